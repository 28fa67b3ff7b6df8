//! Keyword validation and normalisation: keywords are short terms, not sentences.

use crate::text::{char_len, is_cjk};

/// At most this many keywords per search.
pub const MAX_KEYWORDS: usize = 8;
/// At most this many characters per keyword.
pub const MAX_KEYWORD_CHARS: usize = 40;

/// Why a keyword list was refused; the message is shown to the planner as a hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeywordError {
    #[error("give 1 to {MAX_KEYWORDS} keywords, not {0}")]
    Count(usize),
    #[error("keyword {0:?} is empty")]
    Empty(String),
    #[error("keyword {0:?} contains control characters")]
    Control(String),
    #[error("keyword {0:?} is longer than {MAX_KEYWORD_CHARS} characters; use short terms")]
    TooLong(String),
    #[error(
        "keyword {0:?} looks like a sentence; search with short terms (e.g. the rule's or form's name), not questions"
    )]
    Sentence(String),
}

/// Checks a keyword list and returns it trimmed, in order, without duplicates.
pub fn validate(keywords: &[String]) -> Result<Vec<String>, KeywordError> {
    if keywords.is_empty() || keywords.len() > MAX_KEYWORDS {
        return Err(KeywordError::Count(keywords.len()));
    }
    let mut out: Vec<String> = Vec::new();
    for raw in keywords {
        let k = raw.trim();
        if k.is_empty() {
            return Err(KeywordError::Empty(raw.clone()));
        }
        if k.chars().any(char::is_control) {
            return Err(KeywordError::Control(truncated(k)));
        }
        if char_len(k) > MAX_KEYWORD_CHARS {
            return Err(KeywordError::TooLong(truncated(k)));
        }
        if looks_like_sentence(k) {
            return Err(KeywordError::Sentence(k.to_string()));
        }
        if !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    Ok(out)
}

fn truncated(k: &str) -> String {
    format!("{}…", crate::text::truncate_chars(k, 20))
}

/// A question mark, sentence punctuation inside, more than six words, or a long CJK run.
fn looks_like_sentence(k: &str) -> bool {
    let has_sentence_punct = k
        .chars()
        .any(|c| matches!(c, '?' | '？' | '。' | '！' | '，' | '；'));
    let words = k.split_whitespace().count();
    let cjk = k.chars().filter(|c| is_cjk(*c)).count();
    has_sentence_punct || words > 6 || cjk > 16
}

/// The identity of a keyword set for "already searched": analysed terms, sorted, deduplicated.
/// `["报销凭证", "高铁"]` and `["高铁 ", "报销凭证"]` are the same search.
pub fn normalized_set(keywords: &[String]) -> Vec<String> {
    let mut terms: Vec<String> = keywords
        .iter()
        .flat_map(|k| {
            let t = crate::text::terms(k);
            if t.is_empty() {
                vec![k.trim().to_lowercase()]
            } else {
                t.into_iter().map(|t| t.text).collect()
            }
        })
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn short_terms_pass_and_are_deduplicated() {
        assert_eq!(
            validate(&v(&[" 高铁票 ", "报销凭证", "高铁票"])),
            Ok(v(&["高铁票", "报销凭证"]))
        );
    }

    #[test]
    fn bad_lists_are_refused_with_a_reason() {
        assert_eq!(validate(&[]), Err(KeywordError::Count(0)));
        assert_eq!(validate(&v(&["a"; 9])), Err(KeywordError::Count(9)));
        assert!(matches!(validate(&v(&["  "])), Err(KeywordError::Empty(_))));
        assert!(matches!(
            validate(&v(&["a\u{1b}[2J"])),
            Err(KeywordError::Control(_))
        ));
        assert!(matches!(
            validate(&v(&[&"x".repeat(41)])),
            Err(KeywordError::TooLong(_))
        ));
        assert!(matches!(
            validate(&v(&["高铁票可以报销吗？"])),
            Err(KeywordError::Sentence(_))
        ));
        assert!(matches!(
            validate(&v(&["how do I file a travel claim here"])),
            Err(KeywordError::Sentence(_))
        ));
    }

    #[test]
    fn normalisation_ignores_order_case_and_spacing() {
        assert_eq!(
            normalized_set(&v(&["Hotel", "报销凭证"])),
            normalized_set(&v(&["报销凭证 ", "hotels"]))
        );
        assert_ne!(
            normalized_set(&v(&["hotel"])),
            normalized_set(&v(&["hotel", "invoice"]))
        );
    }
}
