//! The search made instead of a give-up before any search: the question's own words are
//! always worth one search. A small model calls "no evidence" on its first turn ("too many
//! options") as readily as a large one answers; the run must not end there. The loop makes it
//! for any planner; the LLM planner makes it itself too, so it can answer the model's give-up
//! call with that search's hits.

use std::collections::HashSet;

use crate::agent::{MAX_KEYWORD_CHARS, MAX_KEYWORDS, validate_keywords as validate};
use crate::text::{self, char_len};

/// The question's content words as a keyword set: jieba's words (any language), each kept
/// when the analyser leaves a term of it (stop words and punctuation go), the rarest in the
/// index first, at most `MAX_KEYWORDS`. `None` when nothing is left to search with.
pub fn question_keywords(question: &str, doc_freq: &dyn Fn(&str) -> u64) -> Option<Vec<String>> {
    let mut seen = HashSet::new();
    let mut words: Vec<(String, u64)> = text::jieba()
        .cut(question, true)
        .into_iter()
        .map(|t| t.word.trim().to_string())
        .filter(|w| !w.is_empty() && char_len(w) <= MAX_KEYWORD_CHARS)
        .filter(|w| !(w.len() < 2 && w.chars().all(|c| c.is_ascii_alphabetic())))
        .filter(|w| seen.insert(w.to_lowercase()))
        .filter_map(|w| {
            let terms = text::terms(&w);
            // A word the index never saw retrieves nothing: it goes last, not first.
            let df = terms
                .iter()
                .map(|t| doc_freq(&t.text))
                .filter(|df| *df > 0)
                .min()
                .unwrap_or(u64::MAX);
            (!terms.is_empty()).then_some((w, df))
        })
        .collect();
    // Single CJK characters are weak keywords when longer words are there.
    if words.iter().any(|(w, _)| char_len(w) > 1) {
        words.retain(|(w, _)| char_len(w) > 1 || w.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    // Stable: ties keep the question's order.
    words.sort_by_key(|(_, df)| *df);
    let keywords: Vec<String> = words
        .into_iter()
        .map(|(w, _)| w)
        .take(MAX_KEYWORDS)
        .collect();
    validate(&keywords).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rarest_content_words_of_either_language_become_valid_keywords() {
        let df = |t: &str| match t {
            "高铁" | "高铁票" => 1,
            "报销" => 5,
            "annual" => 2,
            _ => 3,
        };
        let k = question_keywords("坐高铁出差，报销需要什么凭证？", &df).expect("keywords");
        assert!(k.iter().any(|w| w.contains("高铁")), "{k:?}");
        assert!(k.iter().any(|w| w == "报销"), "{k:?}");
        assert!(!k.iter().any(|w| w == "？" || w == "，"), "{k:?}");
        let k = question_keywords("How many days of annual leave do I get?", &df).expect("en");
        assert_eq!(k[0], "annual", "{k:?}");
        assert!(k.iter().any(|w| w == "leave"), "{k:?}");
        assert!(
            !k.iter().any(|w| w == "of" || w == "I" || w == "?"),
            "{k:?}"
        );
        assert!(k.len() <= MAX_KEYWORDS);
        assert_eq!(question_keywords("？？", &df), None);
    }
}
