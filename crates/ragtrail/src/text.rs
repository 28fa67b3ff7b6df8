//! Text analysis shared by the BM25 index, snippets and the offline planner: one tokenizer for
//! Chinese and Latin text, so that what the index stores and what a keyword matches agree.
//!
//! Chinese runs are segmented with jieba in search mode (a compound such as `报销凭证` also yields
//! `报销` and `凭证`); Latin words are lowercased, English stop words dropped and words stemmed.

mod dictionary;
mod glossary;

pub use dictionary::Segmenter;
pub use glossary::{Glossary, GlossaryError};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// Name under which the analyzer is registered in tantivy.
pub const ANALYZER_NAME: &str = "ragtrail_zh_en";

/// jieba, with the dictionary words each text needs (see [`Segmenter`]).
pub fn jieba() -> &'static Segmenter {
    dictionary::segmenter()
}

/// Segments mixed Chinese/Latin text into words, dropping whitespace and punctuation.
#[derive(Clone, Default)]
pub struct MixedTokenizer;

pub struct MixedTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for MixedTokenizer {
    type TokenStream<'a> = MixedTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MixedTokenStream {
        // Dictionary words first; then every CJK character bigram that is not already a word,
        // so a term the dictionary lacks (年假, 婚假) still matches where it occurs.
        let mut spans: Vec<(usize, usize)> = jieba()
            .cut_for_search(text, false)
            .into_iter()
            .filter(|t| t.word.chars().any(char::is_alphanumeric))
            .map(|t| (t.byte_start, t.byte_end))
            .collect();
        // The dictionary words' spans, made only for a text with a CJK bigram (Latin text,
        // most of an English corpus, has none).
        let mut words: Option<std::collections::HashSet<(usize, usize)>> = None;
        let mut prev: Option<(usize, char)> = None;
        for (i, c) in text.char_indices() {
            if is_cjk(c) {
                if let Some((start, p)) = prev
                    && is_cjk(p)
                {
                    let span = (start, i + c.len_utf8());
                    let words = words.get_or_insert_with(|| spans.iter().copied().collect());
                    if !words.contains(&span) {
                        spans.push(span);
                    }
                }
                prev = Some((i, c));
            } else {
                prev = None;
            }
        }
        spans.sort_unstable();
        let tokens = spans
            .into_iter()
            .enumerate()
            .map(|(position, (start, end))| Token {
                offset_from: start,
                offset_to: end,
                position,
                text: text[start..end].to_string(),
                position_length: 1,
            })
            .collect();
        MixedTokenStream { tokens, next: 0 }
    }
}

impl TokenStream for MixedTokenStream {
    fn advance(&mut self) -> bool {
        if self.next < self.tokens.len() {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// The analyzer used for indexing and for keywords alike.
pub fn analyzer() -> TextAnalyzer {
    let builder = TextAnalyzer::builder(MixedTokenizer)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser);
    match StopWordFilter::new(Language::English) {
        Some(stop) => builder
            .filter(stop)
            .filter(Stemmer::new(Language::English))
            .build(),
        None => builder.filter(Stemmer::new(Language::English)).build(),
    }
}

/// One analysed term with its byte span in the source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub text: String,
    pub start: usize,
    pub end: usize,
}

/// Analyse `text` into index terms (lowercased, stemmed; stop words and punctuation dropped).
pub fn terms(text: &str) -> Vec<Term> {
    thread_local! {
        static ANALYZER: std::cell::RefCell<TextAnalyzer> = std::cell::RefCell::new(analyzer());
    }
    ANALYZER.with(|cell| {
        let mut analyzer = cell.borrow_mut();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(token) = stream.next() {
            out.push(Term {
                text: token.text.clone(),
                start: token.offset_from,
                end: token.offset_to,
            });
        }
        out
    })
}

/// The words of `text` as written whose index terms are among `wanted` (an analyser's terms,
/// `invoic` for `invoice`), each once, in the order written: what a person reads in their
/// place. A CJK term `text` holds as written is its own word; a term `text` does not yield is
/// left out, never shown as a stem.
pub fn written_words(text: &str, wanted: &[String]) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for t in terms(text) {
        if wanted.contains(&t.text)
            && let Some(word) = text.get(t.start..t.end)
        {
            found.push((t.start, word.to_string()));
        }
    }
    for w in wanted.iter().filter(|w| w.chars().any(is_cjk)) {
        if let Some(at) = text.find(w.as_str()) {
            found.push((at, w.clone()));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    let mut out: Vec<String> = Vec::new();
    for (_, word) in found {
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Whether `text` writes `word` as a word of its own somewhere: an occurrence that begins and
/// ends where jieba's words do, neither inside a longer dictionary word (笔记 is written in
/// "笔记要整理", not in "笔记本电脑", where jieba reads 笔记本电脑) nor across two (坐高 is
/// not written in "乘坐高铁", 乘坐 + 高铁). Words the dictionary lacks (陪产假) are cut into
/// pieces, so they count wherever they occur on such ends. Latin text is matched case aside.
pub fn written_as_a_word(text: &str, word: &str) -> bool {
    let word = word.trim();
    if word.is_empty() {
        return false;
    }
    if !word.chars().any(is_cjk) {
        return text.to_lowercase().contains(&word.to_lowercase());
    }
    let occurrences: Vec<(usize, usize)> = text
        .match_indices(word)
        .map(|(at, w)| (at, at + w.len()))
        .collect();
    if occurrences.is_empty() {
        return false;
    }
    // Without the HMM: it joins unknown characters into words of its own guessing.
    let cut = jieba().cut(text, false);
    let starts: std::collections::HashSet<usize> = cut.iter().map(|t| t.byte_start).collect();
    let ends: std::collections::HashSet<usize> = cut.iter().map(|t| t.byte_end).collect();
    occurrences
        .iter()
        .any(|(start, end)| starts.contains(start) && ends.contains(end))
}

/// The language a person wrote in, for the words around what ragtrail shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Zh,
    En,
}

impl Lang {
    /// Chinese when the text has any CJK ideograph (policy questions mix in Latin product
    /// names and numbers, never the other way round), else English.
    pub fn of(text: &str) -> Self {
        if text.chars().any(is_cjk) {
            Lang::Zh
        } else {
            Lang::En
        }
    }

    /// `en` or `zh`, whichever this language is.
    pub fn pick<'a>(self, en: &'a str, zh: &'a str) -> &'a str {
        match self {
            Lang::Zh => zh,
            Lang::En => en,
        }
    }
}

/// Whether a character belongs to a CJK script (ideographs, kana, hangul).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0x20000..=0x2FA1F)
}

/// What collapsing whitespace runs to one space (a snippet's one line) makes of one piece of a
/// text, enough to tell the length of several adjacent pieces on one line without building it
/// ([`LinePiece::joined_len`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinePiece {
    /// Characters other than whitespace.
    chars: usize,
    /// Runs of them (words).
    words: usize,
    /// Whether the piece starts and ends inside a word (a word then runs on across the
    /// border with its neighbour).
    starts_in_word: bool,
    ends_in_word: bool,
}

impl LinePiece {
    pub fn of(s: &str) -> Self {
        let (mut chars, mut words, mut in_word) = (0, 0, false);
        for c in s.chars() {
            if c.is_whitespace() {
                in_word = false;
            } else {
                if !in_word {
                    words += 1;
                    in_word = true;
                }
                chars += 1;
            }
        }
        Self {
            chars,
            words,
            starts_in_word: s.chars().next().is_some_and(|c| !c.is_whitespace()),
            ends_in_word: in_word,
        }
    }

    /// The characters of the pieces' text, one after the other, on one line (whitespace runs
    /// as one space, none at either end).
    pub fn joined_len(pieces: impl IntoIterator<Item = LinePiece>) -> usize {
        let (mut chars, mut words, mut run_on) = (0, 0, 0);
        let mut before: Option<LinePiece> = None;
        for p in pieces {
            chars += p.chars;
            words += p.words;
            if before.is_some_and(|b| b.ends_in_word && p.starts_in_word) {
                run_on += 1;
            }
            before = Some(p);
        }
        chars + (words - run_on).saturating_sub(1)
    }
}

/// Number of characters, the unit of every length limit (bytes would penalise Chinese 3×).
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// The longest prefix of `s` with at most `max` characters.
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Words jieba's HMM got wrong that the knowledge base knows, as extra candidate keywords. The
/// corpus teaches the vocabulary the segmenter's dictionary lacks; a word counts as known when
/// it occurs in at least two chunks (`doc_freq` of the index).
///
/// - Broken apart: where a single CJK character was left (`今年|的|年|假|没休` for 年假, or
///   `年|假来`), the two-character word it forms with a neighbouring character.
/// - Glued together: inside a word of three or more characters the index has never seen
///   (`开专票`), the two-character words it does know (专票).
///
/// Function words are never part of a repaired word ("的年" is not one).
pub fn repaired_words(tokens: &[String], doc_freq: &dyn Fn(&str) -> u64) -> Vec<String> {
    let single_cjk = |t: &str| char_len(t) == 1 && t.chars().all(is_cjk);
    // A function word is no part of a word ("的年" is not one).
    let joinable = |x: &char| is_cjk(*x) && !is_stop_term(&x.to_string());
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if !single_cjk(token) || is_stop_term(token) {
            continue;
        }
        let c = token.chars().next().unwrap_or_default();
        let before = i
            .checked_sub(1)
            .and_then(|j| tokens[j].chars().last())
            .filter(joinable)
            .map(|p| format!("{p}{c}"));
        let after = tokens
            .get(i + 1)
            .and_then(|n| n.chars().next())
            .filter(joinable)
            .map(|n| format!("{c}{n}"));
        for word in [before, after].into_iter().flatten() {
            if doc_freq(&word) >= 2 && !is_stop_term(&word) && !out.contains(&word) {
                out.push(word);
            }
        }
    }
    for token in tokens {
        let chars: Vec<char> = token.chars().collect();
        if chars.len() < 3 || !chars.iter().all(|c| is_cjk(*c)) || doc_freq(token) > 0 {
            continue;
        }
        for pair in chars.windows(2).filter(|p| p.iter().all(joinable)) {
            let word: String = pair.iter().collect();
            if doc_freq(&word) >= 2 && !is_stop_term(&word) && !out.contains(&word) {
                out.push(word);
            }
        }
    }
    out
}

/// Function words that carry no topic: dropped from planner keywords and from the key terms
/// that sufficiency checks. Applied to analysed terms (English ones are already stemmed, and the
/// analyzer already removed English articles and prepositions).
pub fn is_stop_term(term: &str) -> bool {
    const ZH: &[&str] = &[
        "的",
        "了",
        "吗",
        "呢",
        "吧",
        "啊",
        "呀",
        "么",
        "是",
        "在",
        "有",
        "和",
        "与",
        "或",
        "及",
        "我",
        "你",
        "他",
        "她",
        "它",
        "我们",
        "你们",
        "他们",
        "要",
        "会",
        "能",
        "能够",
        "可以",
        "可",
        "怎么",
        "怎样",
        "怎么样",
        "如何",
        "什么",
        "哪些",
        "哪个",
        "哪里",
        "哪儿",
        "多少",
        // Quantity frames: "几天" asks for a number of days, the number is what is asked.
        "几天",
        "几个",
        "几年",
        "几次",
        "几号",
        "多少天",
        "多少钱",
        "多长时间",
        "多长",
        "多久",
        "几",
        "这",
        "那",
        "这个",
        "那个",
        "这些",
        "那些",
        "就",
        "都",
        "也",
        "还",
        "被",
        "把",
        "给",
        "对",
        "从",
        "到",
        "为",
        "以",
        "之",
        "请问",
        "一下",
        "需要",
        "应该",
        "得",
        "地",
        "着",
        "过",
        "吗？",
        "是否",
        "不",
        "没有",
        "没",
        "自己",
        "现在",
        "如果",
        "的话",
        "时候",
        "一个",
        "个",
        "些",
        "等",
        "让",
        "想",
        "弄",
        "办",
        "算",
        "用",
        "上",
        "下",
        "里",
        "中",
        "后",
        "前",
        "多",
        "少",
        "最",
        "很",
        "又",
        "再",
        // Question frames: how a question is asked, never what it is about.
        "有没有",
        "行不行",
        "能不能",
        "是不是",
        "可不可以",
        "要不要",
        "怎么办",
        "一般",
        "大概",
        "该",
        // Motion and person words that frame an everyday question (去深圳, 谁来批): the
        // destination or the role after them carries the meaning.
        "去",
        "来",
        "谁",
    ];
    const EN: &[&str] = &[
        "what", "how", "when", "where", "who", "whom", "which", "why", "can", "could", "do", "doe",
        "did", "i", "me", "my", "we", "our", "you", "your", "he", "she", "him", "her", "it", "its",
        "much", "mani", "need", "get", "would", "should", "shall", "may", "might", "must", "have",
        "ha", "had", "am", "been", "being", "were", "so", "than", "too", "very", "just", "any",
        "some", "all", "there", "here", "about", "from", "up", "out", "over", "after", "before",
        "also", "onli", "own", "same", "other", "each", "few", "more", "most", "s", "t", "ok",
        // Pronouns, the remains of contractions, indefinites (stemmed forms: "his" keeps its
        // s, a vowel stands right before it; "themselves" is "themselv").
        "his", "mine", "myself", "yourself", "himself", "herself", "itself", "ourselv", "yourselv",
        "themselv", "has", "them", "they", "their", "m", "don", "didn", "doesn", "isn", "aren",
        "wasn", "won", "ll", "re", "ve", "d", "someth", "anyth", "noth", "everyth", "someon",
        "anyon", "until",
        // Adverbs, interjections and light verbs that frame a question in English the way
        // 还/就/弄 do in Chinese: how it is asked, never what it is about.
        "us", "now", "still", "alreadi", "ever", "even", "realli", "actual", "again", "often",
        "becaus", "though", "anyway", "pleas", "yes", "oop", "hi", "okay", "like", "want", "know",
        "think", "tell", "told", "say", "said", "gave", "give", "given", "got", "gotten", "go",
        "goe", "went", "gone", "come", "came", "make", "made", "let", "put", "thing", "stuff",
        "lot", "bit", "somebodi", "anybodi", "whatev", "whenev", "wherev", "guy", "kind", "sort",
        "way",
    ];
    // A set, not a scan of both lists: every keyword's every word and term is checked
    // (a scan was a visible share of a `searchDocs` call's key terms).
    static STOP: std::sync::OnceLock<rustc_hash::FxHashSet<&'static str>> =
        std::sync::OnceLock::new();
    STOP.get_or_init(|| ZH.iter().chain(EN).copied().collect())
        .contains(term)
}

/// What ends a sentence for [`sentence_spans_with`]. Every caller ends one after 。！？；and at
/// a newline; they differ in what must follow a Latin `.`, `!` or `?`, whether an ASCII `;`
/// ends one too, and whether whitespace-only pieces are kept. The defaults are the snippet's
/// rules ([`sentence_spans`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentenceEnds {
    /// An ASCII `;` ends a sentence like `.` does (followed by [`Self::stop_then`]).
    pub semicolon: bool,
    /// What must follow a Latin stop for it to end a sentence; at the end of the text any stop
    /// ends one (the last piece is the same either way).
    pub stop_then: StopThen,
    /// Keep whitespace-only pieces, so that the spans tile the whole text (a caller that joins
    /// pieces again keeps every byte); otherwise they are left out.
    pub keep_blank: bool,
    /// A `.` before a lowercase Latin word ends no sentence: it closes an abbreviation ("(i.e.
    /// the data plan", "e.g. a laptop"), since a sentence begins with a capital, a digit or
    /// another script.
    pub lowercase_continues: bool,
}

/// What must follow a Latin `.`, `!` or `?` for it to end a sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopThen {
    /// ASCII whitespace: space, tab, newline, form feed, carriage return.
    AsciiWhitespace,
    /// Any Unicode whitespace (also the ideographic space U+3000 and the no-break space).
    Whitespace,
    /// A plain space (U+0020) only.
    Space,
}

impl StopThen {
    fn allows(self, next: char) -> bool {
        match self {
            Self::AsciiWhitespace => next.is_ascii_whitespace(),
            Self::Whitespace => next.is_whitespace(),
            Self::Space => next == ' ',
        }
    }
}

impl Default for SentenceEnds {
    fn default() -> Self {
        Self {
            semicolon: true,
            stop_then: StopThen::AsciiWhitespace,
            keep_blank: false,
            lowercase_continues: false,
        }
    }
}

/// Sentence spans (byte ranges) of `s`, split after 。！？；, newlines and `. ` style ends (also
/// `; `); whitespace-only pieces left out. The snippet's splitter: [`SentenceEnds::default`].
pub fn sentence_spans(s: &str) -> Vec<(usize, usize)> {
    sentence_spans_with(s, SentenceEnds::default())
}

/// Sentence spans (byte ranges) of `s` under `ends`, in order; each ends just after its stop,
/// so a piece keeps the whitespace that follows the previous stop.
pub fn sentence_spans_with(s: &str, ends: SentenceEnds) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let end = i + c.len_utf8();
        let latin_stop = matches!(c, '.' | '!' | '?') || (ends.semicolon && c == ';');
        let is_end = matches!(c, '。' | '！' | '？' | '；' | '\n')
            || (latin_stop
                && s[end..]
                    .chars()
                    .next()
                    .is_none_or(|next| ends.stop_then.allows(next))
                && !(ends.lowercase_continues
                    && c == '.'
                    && s[end..]
                        .trim_start_matches([' ', '\t'])
                        .starts_with(|next: char| next.is_ascii_lowercase())));
        if is_end {
            if ends.keep_blank || !s[start..end].trim().is_empty() {
                spans.push((start, end));
            }
            start = end;
        }
    }
    if start < s.len() && (ends.keep_blank || !s[start..].trim().is_empty()) {
        spans.push((start, s.len()));
    }
    spans
}

/// Whether `quote` occurs in `text`, ignoring differences in whitespace and a trailing `…`
/// (how a citation's quote is checked against its chunk, by the agent and by the audit).
/// A quote of several lines (a table row under its header row) occurs when each line does.
pub fn quote_in_text(quote: &str, text: &str) -> bool {
    let text = squash_whitespace(text);
    let mut lines = quote.lines().filter(|l| !l.trim().is_empty()).peekable();
    lines.peek().is_some()
        && lines.all(|line| {
            let q = squash_whitespace(line.trim().trim_end_matches('…').trim_start_matches('…'));
            !q.is_empty() && text.contains(&q)
        })
}

fn squash_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_inside_a_longer_word_is_not_written_as_a_word() {
        let laptop = "公司笔记本电脑丢失的，须在2小时内报告IT服务台。";
        assert!(!written_as_a_word(laptop, "笔记"));
        assert!(written_as_a_word(laptop, "笔记本电脑"));
        assert!(written_as_a_word(laptop, "服务台"));
        // One occurrence as a word of its own is enough.
        assert!(written_as_a_word(
            &format!("{laptop}会议笔记由秘书整理。"),
            "笔记"
        ));
        // A word the dictionary lacks is cut into pieces, never into a longer word.
        assert!(written_as_a_word("男方享受陪产假10天。", "陪产假"));
        assert!(!written_as_a_word("男方享受陪产假10天。", "婚假"));
        // Nor across two words: 乘坐 + 高铁 write no 坐高.
        assert!(!written_as_a_word("乘坐高铁的，报销二等座。", "坐高"));
        assert!(written_as_a_word("乘坐高铁的，报销二等座。", "乘坐高铁"));
        assert!(written_as_a_word(
            "A Doctor's Note is required.",
            "doctor's note"
        ));
        assert!(!written_as_a_word("anything", ""));
    }

    #[test]
    fn stems_are_shown_as_the_words_written() {
        let wanted = ["invoic", "taxpay", "礼物", "nowher"].map(String::from);
        assert_eq!(
            written_words(
                "Taxpayer number on an invoice, and invoices; 收到礼物",
                &wanted
            ),
            ["Taxpayer", "invoice", "invoices", "礼物"]
        );
    }

    #[test]
    fn english_question_framing_words_are_never_key_terms() {
        let framing = "Oops, yes, I already told you: he gave us some stuff again because he \
            still really wants to know, so please tell me now, whatever it is";
        let left: Vec<String> = terms(framing)
            .into_iter()
            .map(|t| t.text)
            .filter(|t| !is_stop_term(t))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn words_the_segmenter_got_wrong_are_repaired_from_the_corpus() {
        let df = |t: &str| match t {
            "年假" => 12,
            "的年" => 30,
            "假没" | "假来" => 1,
            "专票" => 9,
            "开专" => 1,
            _ => 0,
        };
        let tokens = |s: &[&str]| s.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        assert_eq!(
            repaired_words(&tokens(&["今年", "的", "年", "假", "没休", "完"]), &df),
            ["年假"]
        );
        assert_eq!(
            repaired_words(&tokens(&["请假", "能", "拿", "年", "假来", "抵"]), &df),
            ["年假"]
        );
        // Known to one chunk only, or no single character left: nothing to rejoin.
        assert!(repaired_words(&tokens(&["假", "来"]), &df).is_empty());
        assert!(repaired_words(&tokens(&["今年", "年假"]), &df).is_empty());
        // Glued: the known piece of an unknown word.
        assert_eq!(
            repaired_words(&tokens(&["一定", "要", "开专票"]), &df),
            ["专票"]
        );
    }

    fn texts(s: &str) -> Vec<String> {
        terms(s).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn chinese_is_segmented_into_words() {
        let t = texts("高铁票需要上传铁路电子客票报销凭证");
        assert!(t.contains(&"报销".to_string()), "{t:?}");
        assert!(t.contains(&"凭证".to_string()), "{t:?}");
        assert!(!t.iter().any(|w| w.contains('需') && w.len() > 30));
    }

    #[test]
    fn latin_is_lowercased_stemmed_and_stopped() {
        let t = texts("The Hotels are Reimbursed");
        assert_eq!(t, vec!["hotel", "reimburs"]);
    }

    /// Possessive and reflexive pronouns frame a question, as "he" and "she" do: "his" in "when
    /// his wife gives birth" was a key term no passage holds, and refused the question.
    #[test]
    fn pronouns_are_stop_terms_in_their_analysed_form() {
        for word in [
            "his",
            "him",
            "mine",
            "himself",
            "themselves",
            "ourselves",
            "yours",
        ] {
            let analysed = texts(word);
            assert!(
                !analysed.is_empty() && analysed.iter().all(|t| is_stop_term(t)),
                "{word} -> {analysed:?}"
            );
        }
        assert!(!is_stop_term("wife"));
    }

    #[test]
    fn punctuation_and_query_syntax_are_not_terms() {
        let t = texts("tenant:other OR * \"x\" \\");
        assert_eq!(t, vec!["tenant", "other", "x"]);
    }

    #[test]
    fn offsets_point_into_the_source() {
        let s = "差旅 Hotel 发票";
        for term in terms(s) {
            assert!(s.is_char_boundary(term.start) && s.is_char_boundary(term.end));
        }
    }

    #[test]
    fn sentence_ends_differ_only_where_configured() {
        let s = "One; two. Three.\u{3000}Four。\n五";
        let pieces = |ends: SentenceEnds| -> Vec<&str> {
            sentence_spans_with(s, ends)
                .into_iter()
                .map(|(a, b)| &s[a..b])
                .collect()
        };
        // The snippet's: `; ` ends a sentence, U+3000 after a stop does not, blanks dropped.
        assert_eq!(
            pieces(SentenceEnds::default()),
            ["One;", " two.", " Three.\u{3000}Four。", "五"]
        );
        assert_eq!(
            sentence_spans(s),
            sentence_spans_with(s, SentenceEnds::default())
        );
        let any_whitespace = SentenceEnds {
            semicolon: false,
            stop_then: StopThen::Whitespace,
            keep_blank: false,
            lowercase_continues: false,
        };
        assert_eq!(
            pieces(any_whitespace),
            ["One; two.", " Three.", "\u{3000}Four。", "五"]
        );
        // Blank pieces kept: the spans tile the text.
        let space_only = SentenceEnds {
            semicolon: false,
            stop_then: StopThen::Space,
            keep_blank: true,
            lowercase_continues: false,
        };
        assert_eq!(
            pieces(space_only),
            ["One; two.", " Three.\u{3000}Four。", "\n", "五"]
        );
        assert_eq!(pieces(space_only).concat(), s);
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate_chars("报销凭证", 2), "报销");
        assert_eq!(truncate_chars("ab", 5), "ab");
    }
}
