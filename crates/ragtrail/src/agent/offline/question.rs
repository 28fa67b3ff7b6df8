//! Reading the question: its content words and their weight, the nouns no chunk mentions,
//! small talk, and whether it leans on the previous turn.

use std::collections::{HashMap, HashSet};

use super::{OfflinePlanner, analysed, everyday, other_language};
use crate::agent::PlannerContext;
use crate::search::sufficiency::{KeyTerm, idf, key_terms};
use crate::text::{self, char_len};

/// The question's content words with their weight (the rarest analysed term in each).
fn question_words(question: &str, ctx: &PlannerContext<'_>) -> Vec<(String, f64)> {
    let mut seen = HashSet::new();
    // HMM on: it finds words the dictionary lacks (年假), which the index matches by bigrams.
    let tokens: Vec<String> = joined_figures(
        text::jieba()
            .cut(question, true)
            .into_iter()
            .map(|t| t.word.trim().to_string())
            .collect(),
    );
    // A repair the index knows only as a bigram across two of the passages' words (坐 + 高 of
    // 坐高铁, from 乘坐高铁) is no word of the asker's either.
    let repaired: Vec<String> = text::repaired_words(&tokens, &|t: &str| ctx.lookup.doc_freq(t))
        .into_iter()
        .filter(|w| ctx.lookup.writes(w))
        .collect();
    let tokens = tokens
        .into_iter()
        .flat_map(|t| noise_pieces(&t, ctx).unwrap_or(vec![t]));
    let mut words: Vec<(String, f64)> = tokens
        .into_iter()
        .chain(repaired)
        .filter(|w| !w.is_empty() && seen.insert(w.to_lowercase()))
        .filter_map(|w| {
            let terms = analysed(&w);
            // Rarest *known* term: a word the index has never seen cannot retrieve anything,
            // so it goes last (df 0 ⇒ weight 0), not first.
            let n = ctx.lookup.num_chunks();
            let weight = terms
                .iter()
                .map(|t| match ctx.lookup.doc_freq(t) {
                    0 => 0.0,
                    df => idf(df, n),
                })
                .fold(0.0, f64::max);
            let latin_letter = w.chars().all(|c| c.is_ascii_alphabetic()) && w.len() < 2;
            (!terms.is_empty() && !latin_letter).then_some((w, weight))
        })
        .collect();
    // Single characters are weak keywords; keep them only if no longer word the index knows is
    // left (a word it has never seen retrieves nothing: "东西坏了能换吗" still has 坏 and 换).
    if words
        .iter()
        .any(|(w, weight)| char_len(w) > 1 && *weight > 0.0)
    {
        words.retain(|(w, _)| char_len(w) > 1 || w.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    words.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    words
}

/// The segmenter's pieces of a figure written with thousands separators ("50", ",", "000")
/// joined back into the asker's "50,000": one word, shown and searched as written.
fn joined_figures(tokens: Vec<String>) -> Vec<String> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let mut word = tokens[i].clone();
        if digits(&word) && word.len() <= 3 {
            while i + 2 < tokens.len()
                && tokens[i + 1] == ","
                && tokens[i + 2].len() == 3
                && digits(&tokens[i + 2])
            {
                word.push(',');
                word.push_str(&tokens[i + 2]);
                i += 2;
            }
        }
        out.push(word);
        i += 1;
    }
    out
}

/// Whether the English `word` is a verb by its place in `question`: right after a subject
/// pronoun ("can I bring"), the infinitive's "to" ("to claim"), or a modal that follows a
/// pronoun ("we can bring", "I don't need"); a modal alone opens a question before its subject
/// ("Can astronauts get …"). The segmenter tags no English part of speech; a verb says how the
/// asker put the question, not what it is about, and is no subject to look up in the other
/// language.
fn verb_by_place(question: &str, word: &str) -> bool {
    const PRONOUNS: &[&str] = &["i", "we", "you", "they", "he", "she"];
    const MODALS: &[&str] = &[
        "can", "could", "will", "would", "shall", "should", "may", "might", "must", "do", "does",
        "did", "don't", "doesn't", "didn't", "can't", "cannot", "won't",
    ];
    let words: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.replace('’', "'").to_lowercase())
        .collect();
    let word = word.to_lowercase();
    let is = |at: usize, list: &[&str]| words.get(at).is_some_and(|w| list.contains(&w.as_str()));
    (1..words.len()).any(|i| {
        words[i] == word
            && (is(i - 1, PRONOUNS)
                || is(i - 1, &["to"])
                || (is(i - 1, MODALS) && i >= 2 && is(i - 2, PRONOUNS)))
    })
}

/// The character a one-character Chinese noun with the colloquial suffix 子 or 儿 stands for
/// (单子 → 单), or `term` itself when it is one Chinese character.
fn one_character(term: &str) -> Option<char> {
    let mut chars = term.chars();
    let first = chars.next().filter(|c| text::is_cjk(*c))?;
    match (chars.next(), chars.next()) {
        (None, _) => Some(first),
        (Some('子' | '儿'), None) => Some(first),
        _ => None,
    }
}

/// Whether an English word is a past participle or past tense by its ending ("offered",
/// "hired"): a verb, not a noun a word before it could narrow.
fn participle(word: &str) -> bool {
    let lower = word.to_lowercase();
    lower.chars().count() >= 5 && lower.ends_with("ed")
}

/// The content word right after `word` in `question` (jieba's words; spaces and 的 between
/// them skipped), if any.
fn word_after(question: &str, word: &str) -> Option<String> {
    word_beside(question, word, true)
}

/// The content word right after (or before) `word` in the question, if any.
fn word_beside(question: &str, word: &str, after: bool) -> Option<String> {
    let tokens: Vec<String> = text::jieba()
        .cut(question, true)
        .into_iter()
        .map(|t| t.word.trim().to_string())
        .filter(|t| !t.is_empty() && t != "的")
        .collect();
    let at = tokens.iter().position(|t| t.eq_ignore_ascii_case(word))?;
    let beside = if after {
        at.checked_add(1)?
    } else {
        at.checked_sub(1)?
    };
    tokens
        .get(beside)
        .filter(|w| !analysed(w).is_empty())
        .cloned()
}

/// The question's key terms as the verdict weighs them: `searchDocs`' key terms, with the
/// words jieba's HMM made up and no chunk mentions replaced by their dictionary words.
fn verdict_keys(question: &str, ctx: &PlannerContext<'_>) -> Vec<KeyTerm> {
    let doc_freq = |t: &str| ctx.lookup.doc_freq(t);
    let n = ctx.lookup.num_chunks();
    let mut seen = HashSet::new();
    let mut keys = Vec::new();
    for key in key_terms(&[question.to_string()], &doc_freq, n) {
        let replaced = match made_up_pieces(&key.term, &|w: &str| ctx.lookup.writes(w)) {
            Some(pieces) => key_terms(&pieces, &doc_freq, n),
            None => vec![key],
        };
        keys.extend(replaced.into_iter().filter(|k| seen.insert(k.term.clone())));
    }
    keys
}

/// A word jieba's HMM joined from pieces its dictionary lacks as a whole ("最多能", "能报",
/// "没休", 坐高 of 坐高铁) and that no chunk writes as a word of its own (`writes`; 乘坐高铁
/// holds 坐高 across two words): segmentation noise, searched for nothing and only ever
/// counting against the evidence. Its dictionary words of two or more characters stand for it;
/// most such words have none (能 + 报) and drop out. `None` for any other word.
fn made_up_pieces(term: &str, writes: &dyn Fn(&str) -> bool) -> Option<Vec<String>> {
    if !made_up(term) || writes(term) {
        return None;
    }
    Some(
        text::jieba()
            .cut(term, false)
            .into_iter()
            .map(|t| t.word.to_string())
            .filter(|w| char_len(w) >= 2)
            .collect(),
    )
}

/// A word jieba's HMM made up that chunks hold only across their own words (坐高 of 坐高铁, in
/// 乘坐 + 高铁; 能休 of 一年能休几天), or made of function words alone (我能, 有个): searched,
/// it would match places that do not say it, and the reply would show it as a word the asker
/// used. Its dictionary words stand for it, as in the verdict. Any other made-up word no chunk
/// holds stays: it may be an everyday word the documents name otherwise (生娃 → 生育), or the
/// subject they lack (年会).
fn noise_pieces(word: &str, ctx: &PlannerContext<'_>) -> Option<Vec<String>> {
    // Whether it is made up at all first: the lookups below search the index, and most of a
    // question's words are the dictionary's.
    if !made_up(word) {
        return None;
    }
    let function_words = word.chars().all(|c| text::is_stop_term(&c.to_string()));
    if !function_words && !ctx.lookup.mentions(word) {
        return None;
    }
    made_up_pieces(word, &|w: &str| ctx.lookup.writes(w))
}

/// A CJK word of two or more characters that jieba's dictionary lacks: its HMM joined it.
fn made_up(word: &str) -> bool {
    char_len(word) >= 2 && word.chars().all(text::is_cjk) && !text::jieba().has_word(word)
}

/// The reply to a greeting or thanks (and nothing else), in the question's language.
pub(super) fn small_talk_reply(question: &str) -> Option<&'static str> {
    if !is_small_talk(question) {
        return None;
    }
    let chinese = question.chars().any(text::is_cjk);
    Some(match (chinese, is_thanks(question)) {
        (true, true) => "不客气！还有其他制度方面的问题吗？",
        (true, false) => "你好！请问想了解哪方面的制度？",
        (false, true) => "You're welcome! Anything else about the policies?",
        (false, false) => "Hello! What would you like to know about the policies?",
    })
}

/// A greeting or thanks, and nothing else.
fn is_small_talk(question: &str) -> bool {
    const PHRASES: &[&str] = &[
        "你好",
        "您好",
        "嗨",
        "哈喽",
        "早上好",
        "下午好",
        "晚上好",
        "谢谢",
        "谢谢你",
        "谢谢您",
        "多谢",
        "感谢",
        "好的谢谢",
        "hi",
        "hello",
        "hey",
        "good morning",
        "good afternoon",
        "good evening",
        "thanks",
        "thank you",
        "thanks a lot",
        "thx",
        "ok thanks",
    ];
    let normalized: String = question
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| {
            !c.is_ascii_punctuation() && !matches!(c, '！' | '，' | '。' | '？' | '～' | '~')
        })
        .collect();
    let normalized = normalized.trim();
    PHRASES.contains(&normalized)
}

fn is_thanks(question: &str) -> bool {
    let q = question.to_lowercase();
    ["谢", "感谢", "thank", "thx"].iter().any(|w| q.contains(w))
}

/// Whether a question leans on the previous turn: short, or pointing back ("那…呢", "this").
fn refers_back(question: &str) -> bool {
    let q = question.trim().to_lowercase();
    const MARKERS: &[&str] = &[
        "那",
        "这个",
        "这些",
        "它",
        "其",
        "上面",
        "刚才",
        "呢",
        "what about",
        "how about",
        "that",
        "this",
        "those",
        "these",
        " it",
        "the same",
    ];
    let cjk = q.chars().filter(|c| text::is_cjk(*c)).count();
    let short = if cjk > 0 {
        cjk <= 12
    } else {
        q.split_whitespace().count() <= 6
    };
    short || MARKERS.iter().any(|m| q.contains(m))
}

impl OfflinePlanner {
    /// Reads the question on the run's first turn: its content words, with the previous turn's
    /// topic words in front when it leans on that turn, and its nouns no chunk mentions.
    pub(super) fn read_question(&mut self, ctx: &PlannerContext<'_>) {
        self.question_words = question_words(ctx.question, ctx);
        if let Some(previous) = ctx.history.iter().rev().find(|t| !t.keywords.is_empty())
            && refers_back(ctx.question)
        {
            // A follow-up that omits its topic ("需要提供什么证明？") searches with the previous
            // turn's topic words in front.
            let own: HashSet<String> = self
                .question_words
                .iter()
                .flat_map(|(w, _)| analysed(w))
                .collect();
            let top = self.question_words.first().map(|w| w.1).unwrap_or(1.0) + 1.0;
            let carried: Vec<String> = previous
                .keywords
                .first()
                .into_iter()
                .flatten()
                .filter(|k| analysed(k).iter().any(|t| !own.contains(t)))
                .take(2)
                .cloned()
                .collect();
            for (i, word) in carried.iter().enumerate() {
                self.question_words.insert(i, (word.clone(), top));
            }
            self.carried = carried;
        }
        self.verdict_keys = verdict_keys(&self.effective_question(ctx), ctx);
        self.use_formal_equivalents(ctx, &HashSet::new());
        let read = (
            self.question_words.clone(),
            self.verdict_keys.clone(),
            self.written.clone(),
        );
        self.weigh_absent_words(ctx);
        // A subject no passage names in the question's language may be named in the other
        // one's (paternity leave: 陪产假): read again with the subject's words looked up in the
        // glossary. Only the subject's: a circumstance word carried across ("late" → 误点,
        // 家里 → "home") searches passages about something else.
        if !self.unknown_nouns.is_empty() && ctx.lookup.glossary().is_some() {
            let subject: HashSet<String> = std::mem::take(&mut self.unknown_nouns)
                .into_iter()
                .collect();
            (self.question_words, self.verdict_keys, self.written) = read;
            self.everyday_unknown.clear();
            self.use_formal_equivalents(ctx, &subject);
            self.weigh_absent_words(ctx);
        }
    }

    /// The question's words no chunk this run may see mentions (after written words stood in
    /// for everyday ones): when they carry at least as much of the question's weight as the
    /// words the documents share, they are its subject and the knowledge base lacks it ("婚假
    /// 可以休几天", "paternity leave"); otherwise they are circumstance ("要补什么单子" in a
    /// question about over-limit expenses), weigh nothing in the verdict and only keep an
    /// answer from being composed.
    fn weigh_absent_words(&mut self, ctx: &PlannerContext<'_>) {
        // The asker's own word for a key term (an English key term is a stem, and analysing a
        // stem again may not give it back: "expens" is no "expenses").
        let word_for = |k: &KeyTerm| -> String {
            self.question_words
                .iter()
                .map(|(w, _)| w)
                .find(|w| w.to_lowercase() == k.term || analysed(w).contains(&k.term))
                .cloned()
                .unwrap_or_else(|| k.term.clone())
        };
        let (absent, present): (Vec<KeyTerm>, Vec<KeyTerm>) = self
            .verdict_keys
            .iter()
            .cloned()
            .partition(|k| !ctx.lookup.mentions(&word_for(k)));
        // One Chinese character (报, 交) is never an index term of its own, so that none is
        // "mentioned" says nothing about the documents: it never refuses, and weighs only in
        // the passages read for the answer, by how they write it. A colloquial noun made of
        // one character and the suffix 子 or 儿 (单子, 本子, 事儿) is that character, as the
        // documents write it in their words (报销单, 退单).
        let mut single: Vec<(String, KeyTerm)> = Vec::new();
        let mut rest: Vec<KeyTerm> = Vec::new();
        for k in absent {
            match one_character(&k.term) {
                Some(c) => single.push((
                    k.term.clone(),
                    KeyTerm {
                        term: c.to_string(),
                        ..k
                    },
                )),
                None => rest.push(k),
            }
        }
        let absent = rest;
        self.verdict_keys
            .retain(|k| single.iter().all(|(term, _)| *term != k.term));
        self.characters = single.into_iter().map(|(_, k)| k).collect();
        if absent.is_empty() {
            return;
        }
        let weight = |keys: &[&KeyTerm]| keys.iter().map(|k| k.weight).sum::<f64>();
        // Part of speech as jieba tags the question: a thing (a noun, or a Latin word, which
        // nothing here tags) can be what is asked about; a verb or an adverb no chunk uses
        // (回来, 交上去) only says how the asker put it.
        let tags: HashMap<String, String> = text::jieba()
            .tag(&self.effective_question(ctx), true)
            .into_iter()
            .map(|t| (t.word.trim().to_lowercase(), t.tag.to_string()))
            .collect();
        let question = self.effective_question(ctx);
        let mut things: Vec<(&KeyTerm, String)> = Vec::new();
        let mut verbs: Vec<(&KeyTerm, String)> = Vec::new();
        let mut all: Vec<String> = Vec::new();
        for k in &absent {
            let word = word_for(k);
            let tag = tags.get(&word.to_lowercase()).map_or("", String::as_str);
            all.push(word.clone());
            // Names of people, places and bodies (拉萨, "Spain": capitalised in English) are
            // left out: a rule for "other cities" or "another country" covers one it does not
            // list.
            let name = matches!(tag, "nr" | "ns" | "nt")
                || word.chars().next().is_some_and(|c| c.is_ascii_uppercase());
            if name || !(tag.starts_with('n') || tag == "eng" || tag == "x") {
                continue;
            }
            if tag == "eng" && verb_by_place(&question, &word) {
                verbs.push((k, word));
            } else {
                things.push((k, word));
            }
        }
        // An English verb no chunk uses is the subject only when nothing else is missing ("Can
        // I smoke in the office?"); beside a missing thing it says what is done with it ("Can
        // I bring my dog?": the dog is asked about, and "bring" is no word to look up in the
        // other language).
        if things.is_empty() {
            things = verbs;
        }
        // A missing word that modifies the content word after it ("paternity leave", "洗衣服
        // 的费用") narrows that word to a kind the documents never name: the word it narrows
        // is part of the missing subject, not evidence of the rest ("leave" alone is not what
        // is asked about). A verb is never narrowed: after the missing word it says what that
        // does ("a vendor offered", 坐夜车睡卧铺), and is no part of it.
        let head_noun = |next: &str| match tags.get(&next.to_lowercase()).map(String::as_str) {
            Some("eng") | None => !participle(next),
            Some(tag) => !tag.starts_with('v'),
        };
        let narrowed: HashSet<String> = things
            .iter()
            .filter_map(|(_, w)| word_after(&question, w))
            .filter(|next| head_noun(next))
            .flat_map(|next| analysed(&next).into_iter().chain([next.to_lowercase()]))
            .collect();
        let mut thing_keys: Vec<&KeyTerm> = things.iter().map(|(k, _)| *k).collect();
        let (heads, present_refs): (Vec<&KeyTerm>, Vec<&KeyTerm>) =
            present.iter().partition(|k| narrowed.contains(&k.term));
        thing_keys.extend(heads);
        if !things.is_empty() && weight(&thing_keys) >= weight(&present_refs) {
            self.unknown_nouns = things.into_iter().map(|(_, w)| w).collect();
            return;
        }
        // Any word the documents never use may be what the asker means (结婚 in "结婚的话公司
        // 给放几天假"): passages that cover the rest are evidence, never an answer.
        self.everyday_unknown = all;
        self.verdict_keys = present;
    }

    /// Everyday words no chunk contains, searched and weighed as the written words the
    /// knowledge base uses for them (老婆 → 配偶), and the words of `across` as the other
    /// language's words for them: they no longer count against the evidence.
    fn use_formal_equivalents(&mut self, ctx: &PlannerContext<'_>, across: &HashSet<String>) {
        let mentions = |word: &str| ctx.lookup.mentions(word);
        let n = ctx.lookup.num_chunks();
        let doc_freq = |t: &str| ctx.lookup.doc_freq(t);
        let words: Vec<String> = self.question_words.iter().map(|(w, _)| w.clone()).collect();
        for word in words {
            if mentions(&word) {
                continue;
            }
            let mut written = everyday::formal_equivalents(&word, &mentions);
            // The neighbour the other language's word stands for too ("leave" of "paternity
            // leave" → 陪产假).
            let mut with: Option<String> = None;
            let mut crossed = false;
            if written.is_empty()
                && across.contains(&word)
                && let Some(glossary) = ctx.lookup.glossary()
            {
                let question = self.effective_question(ctx);
                let after = word_beside(&question, &word, true);
                let before = word_beside(&question, &word, false);
                if let Some(c) = other_language::crossing(
                    &word,
                    after.as_deref(),
                    before.as_deref(),
                    glossary,
                    &|w: &str| ctx.lookup.writes(w),
                ) {
                    written = c.words;
                    with = c.with;
                    crossed = true;
                }
            }
            let Some(first) = written.first() else {
                continue;
            };
            let lower = word.to_lowercase();
            let own: Vec<String> = analysed(&word);
            // The written word stands for the everyday one in the verdict: one key term, so
            // that a passage needs only one of them.
            let replacement = key_terms(std::slice::from_ref(first), &doc_freq, n);
            let key = replacement
                .first()
                .map(|k| k.term.clone())
                .unwrap_or_default();
            let at = self
                .verdict_keys
                .iter()
                .position(|k| k.term == lower || own.contains(&k.term));
            match at {
                Some(i) => {
                    self.verdict_keys.splice(i..=i, replacement);
                }
                None => self.verdict_keys.extend(replacement),
            }
            if let Some(neighbour) = &with {
                let theirs = analysed(neighbour);
                let lower = neighbour.to_lowercase();
                self.verdict_keys
                    .retain(|k| k.term == key || (k.term != lower && !theirs.contains(&k.term)));
            }
            for w in &written {
                let weight = analysed(w)
                    .iter()
                    .map(|t| match ctx.lookup.doc_freq(t) {
                        0 => 0.0,
                        df => idf(df, n),
                    })
                    .fold(0.0, f64::max);
                if !self.question_words.iter().any(|(q, _)| q == w) {
                    self.question_words.push((w.clone(), weight));
                }
            }
            self.question_words.retain(|(q, _)| *q != word);
            if crossed {
                self.crossed.push(key.clone());
            }
            self.written.push((word, written, key));
        }
        self.question_words
            .sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    }

    /// The question with the topic words carried over from the previous turn, if any.
    pub(super) fn effective_question(&self, ctx: &PlannerContext<'_>) -> String {
        if self.carried.is_empty() {
            ctx.question.to_string()
        } else {
            format!("{} {}", self.carried.join(" "), ctx.question)
        }
    }

    pub(super) fn weights(&self) -> HashMap<String, f64> {
        let mut w = HashMap::new();
        for (word, weight) in &self.question_words {
            for t in analysed(word) {
                w.entry(t).or_insert(*weight);
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_with_thousands_separators_is_one_word() {
        let cut = |q: &str| -> Vec<String> {
            joined_figures(
                text::jieba()
                    .cut(q, true)
                    .into_iter()
                    .map(|t| t.word.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect(),
            )
        };
        let words = cut("A gift worth 50,000 yen, or 1,250,000 in all, 3, 12 or 2024,5");
        for figure in ["50,000", "1,250,000", "3", "12", "2024", "5"] {
            assert!(words.iter().any(|w| w == figure), "{figure}: {words:?}");
        }
        assert!(!words.iter().any(|w| w == "000" || w == "250"), "{words:?}");
        assert!(cut("报销5,000元以内").iter().any(|w| w == "5,000"));
    }

    #[test]
    fn an_english_word_after_a_pronoun_a_modal_or_to_is_a_verb() {
        assert!(verb_by_place("Can I bring my dog to the office?", "bring"));
        assert!(verb_by_place("Do we need to book early?", "book"));
        assert!(verb_by_place("I don't want to claim it", "claim"));
        assert!(!verb_by_place("Can I bring my dog to the office?", "dog"));
        assert!(!verb_by_place("Is there a book allowance?", "book"));
        assert!(!verb_by_place("What is the dress code?", "dress"));
        // A modal opens a question before its subject; after a pronoun it comes before a verb.
        assert!(!verb_by_place("Can astronauts get a permit?", "astronauts"));
        assert!(verb_by_place("We can bring guests?", "bring"));
    }

    #[test]
    fn a_noun_with_the_suffix_zi_or_er_is_its_one_character() {
        assert_eq!(one_character("单子"), Some('单'));
        assert_eq!(one_character("事儿"), Some('事'));
        assert_eq!(one_character("报"), Some('报'));
        for not in ["孩子们", "子女", "单据", "kid", "a子", ""] {
            assert_eq!(one_character(not), None, "{not}");
        }
    }

    #[test]
    fn an_english_word_ending_in_ed_is_a_verb_form_not_a_head_noun() {
        assert!(participle("offered") && participle("Hired"));
        assert!(!participle("leave") && !participle("code") && !participle("need"));
    }

    #[test]
    fn made_up_words_no_chunk_mentions_stand_for_their_dictionary_words() {
        let nowhere = |_: &str| false;
        // Only the dictionary words of two or more characters stand for a made-up word: 报销
        // for 报销完, nothing for 能报 (能 + 报) or 最多能 (最 + 多 + 能).
        assert_eq!(
            made_up_pieces("报销完", &nowhere),
            Some(vec!["报销".to_string()])
        );
        assert_eq!(made_up_pieces("能报", &nowhere), Some(Vec::new()));
        assert_eq!(made_up_pieces("最多能", &nowhere), Some(Vec::new()));
        // A dictionary word, a word the knowledge base uses (年假 is matched by its bigrams),
        // and a Latin word stay as they are.
        assert_eq!(made_up_pieces("报销", &nowhere), None);
        assert_eq!(made_up_pieces("最多能", &|_: &str| true), None);
        assert_eq!(made_up_pieces("globex", &nowhere), None);
    }
}
