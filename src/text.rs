//! Text analysis shared by the BM25 index, snippets and the offline planner: one tokenizer for
//! Chinese and Latin text, so that what the index stores and what a keyword matches agree.
//!
//! Chinese runs are segmented with jieba in search mode (a compound such as `报销凭证` also yields
//! `报销` and `凭证`); Latin words are lowercased, English stop words dropped and words stemmed.

use std::sync::OnceLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// Name under which the analyzer is registered in tantivy.
pub const ANALYZER_NAME: &str = "ragtrail_zh_en";

/// The jieba dictionary takes a noticeable moment to load: once per process.
pub fn jieba() -> &'static Jieba {
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
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
        let mut tokens = Vec::new();
        for (position, piece) in jieba()
            .cut_for_search(text, true)
            .into_iter()
            .filter(|t| t.word.chars().any(char::is_alphanumeric))
            .enumerate()
        {
            tokens.push(Token {
                offset_from: piece.byte_start,
                offset_to: piece.byte_end,
                position,
                text: piece.word.to_string(),
                position_length: 1,
            });
        }
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

/// Whether a character belongs to a CJK script (ideographs, kana, hangul).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0x20000..=0x2FA1F)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn truncation_respects_characters() {
        assert_eq!(truncate_chars("报销凭证", 2), "报销");
        assert_eq!(truncate_chars("ab", 5), "ab");
    }
}
