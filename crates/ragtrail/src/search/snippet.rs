//! Snippets centred on the passage that best matches the keywords.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::text::{self, char_len, sentence_spans, truncate_chars};

/// Default snippet length cap, in characters.
pub const DEFAULT_SNIPPET_CHARS: usize = 240;

/// Collapses runs of whitespace into one space so a snippet reads as one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `char_len(&one_line(s))` without building the line: the characters of the words between
/// whitespace, and one space between each two of them.
fn one_line_len(s: &str) -> usize {
    let (mut chars, mut words, mut in_word) = (0, 0usize, false);
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
    chars + words.saturating_sub(1)
}

/// The distinct analysed terms of the keywords.
pub fn keyword_terms(keywords: &[String]) -> HashSet<String> {
    keywords
        .iter()
        .flat_map(|k| text::terms(k))
        .map(|t| t.text)
        .collect()
}

/// A snippet of at most `max_chars` characters around the sentence matching most keyword terms.
pub fn snippet(chunk_text: &str, terms: &HashSet<String>, max_chars: usize) -> String {
    snippet_by(chunk_text, max_chars, || {
        let spans = sentence_spans(chunk_text);
        let scores = spans
            .iter()
            .map(|&(a, b)| {
                let found: HashSet<String> = text::terms(&chunk_text[a..b])
                    .into_iter()
                    .map(|t| t.text)
                    .filter(|t| terms.contains(t))
                    .collect();
                found.len()
            })
            .collect();
        (Cow::Owned(spans), scores)
    })
}

/// [`snippet`] with the sentences and their scores given by `sentences`: the spans of
/// [`text::sentence_spans`] and, for each, its count of distinct keyword terms. A caller that
/// holds a chunk's analysed sentences need not split and analyse the text again; a text short
/// enough to be its own snippet never asks.
pub fn snippet_by<'s>(
    chunk_text: &str,
    max_chars: usize,
    sentences: impl FnOnce() -> (Cow<'s, [(usize, usize)]>, Vec<usize>),
) -> String {
    if one_line_len(chunk_text) <= max_chars {
        return one_line(chunk_text);
    }
    let (spans, scores) = sentences();
    let best = scores
        .iter()
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.cmp(b).then(ib.cmp(ia)))
        .map(|(i, _)| i)
        .unwrap_or(0);
    // Grow around the best sentence, preferring what follows it (the rule's details).
    let (mut lo, mut hi) = (best, best);
    let len = |lo: usize, hi: usize| one_line_len(&chunk_text[spans[lo].0..spans[hi].1]);
    loop {
        let mut grew = false;
        if hi + 1 < spans.len() && len(lo, hi + 1) <= max_chars {
            hi += 1;
            grew = true;
        }
        if lo > 0 && len(lo - 1, hi) <= max_chars {
            lo -= 1;
            grew = true;
        }
        if !grew {
            break;
        }
    }
    let Some(&(start, _)) = spans.get(lo) else {
        return truncate_chars(&one_line(chunk_text), max_chars).to_string();
    };
    let end = spans.get(hi).map(|s| s.1).unwrap_or(chunk_text.len());
    let body = one_line(&chunk_text[start..end]);
    let mut out = String::new();
    if lo > 0 {
        out.push('…');
    }
    let budget = max_chars.saturating_sub(out.chars().count() + 1);
    if char_len(&body) > budget {
        out.push_str(truncate_chars(&body, budget));
        out.push('…');
    } else {
        out.push_str(&body);
        if hi + 1 < spans.len() && char_len(&out) < max_chars {
            out.push('…');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_returned_whole_on_one_line() {
        let terms = keyword_terms(&["报销".into()]);
        assert_eq!(snippet("第一行\n第二行", &terms, 100), "第一行 第二行");
    }

    #[test]
    fn long_text_centres_on_the_matching_sentence() {
        let filler = "这是与问题无关的背景说明。".repeat(20);
        let text = format!("{filler}高铁票必须提供铁路电子客票报销凭证。{filler}");
        let terms = keyword_terms(&["高铁票".into(), "报销凭证".into()]);
        let s = snippet(&text, &terms, 80);
        assert!(s.contains("高铁票必须提供铁路电子客票报销凭证。"), "{s}");
        assert!(char_len(&s) <= 80, "{}", char_len(&s));
        assert!(s.starts_with('…'));
    }

    #[test]
    fn one_line_len_counts_the_line_one_line_builds() {
        for s in [
            "",
            " ",
            "a",
            "  a  b\t\tc\n",
            "第一行\n第二行",
            "\u{3000}全角\u{3000}空格 x",
            "x\u{a0}y  \r\n z ",
            "one. two!  three?\n\nfour",
        ] {
            assert_eq!(one_line_len(s), char_len(&one_line(s)), "{s:?}");
        }
    }

    #[test]
    fn an_unsplittable_text_is_capped() {
        let text = "字".repeat(500);
        let s = snippet(&text, &HashSet::new(), 50);
        assert!(char_len(&s) <= 50);
    }
}
