//! Snippets centred on the passage that best matches the keywords.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::text::{self, LinePiece as Piece, char_len, sentence_spans, truncate_chars};

/// Default snippet length cap, in characters.
pub const DEFAULT_SNIPPET_CHARS: usize = 240;

/// Collapses runs of whitespace into one space so a snippet reads as one line.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// `char_len(&one_line(s))` without building the line.
#[cfg(test)]
fn one_line_len(s: &str) -> usize {
    Piece::joined_len([Piece::of(s)])
}

/// Whether `one_line_len(s) <= max`, reading `s` only as far as it takes to tell.
fn one_line_fits(s: &str, max: usize) -> bool {
    let (mut len, mut in_word) = (0, false);
    for c in s.chars() {
        if c.is_whitespace() {
            in_word = false;
            continue;
        }
        // A word after another costs its separating space too.
        len += if !in_word && len > 0 { 2 } else { 1 };
        in_word = true;
        if len > max {
            return false;
        }
    }
    true
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
    snippet_by(chunk_text, max_chars, None, || {
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
        (Cow::Owned(spans), scores, None)
    })
}

/// [`snippet`] with the sentences and their scores given by `sentences`: the spans of
/// [`text::sentence_spans`], for each its count of distinct keyword terms, and, when the caller
/// holds them, each sentence's [`Piece`] (else the few measured are measured here). A caller
/// that holds a chunk's analysed sentences need not split, analyse or measure the text again; a
/// text short enough to be its own snippet never asks.
/// `one_line_len` is the text's length on one line when the caller knows it (else the text
/// is read as far as it takes to tell whether it fits).
pub fn snippet_by<'s>(
    chunk_text: &str,
    max_chars: usize,
    one_line_len: Option<usize>,
    sentences: impl FnOnce() -> (Cow<'s, [(usize, usize)]>, Vec<usize>, Option<&'s [Piece]>),
) -> String {
    let fits = match one_line_len {
        Some(len) => len <= max_chars,
        None => one_line_fits(chunk_text, max_chars),
    };
    if fits {
        return one_line(chunk_text);
    }
    let (spans, scores, measured) = sentences();
    let best = scores
        .iter()
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.cmp(b).then(ib.cmp(ia)))
        .map(|(i, _)| i)
        .unwrap_or(0);
    // Grow around the best sentence, preferring what follows it (the rule's details).
    let (mut lo, mut hi) = (best, best);
    // Only the sentences near the best one are ever measured, each once (unless the caller
    // measured them all already).
    let mut pieces: Vec<Option<Piece>> = match measured {
        Some(_) => Vec::new(),
        None => vec![None; spans.len()],
    };
    let mut len = |lo: usize, hi: usize| {
        Piece::joined_len((lo..=hi).map(|i| match measured {
            Some(m) => m[i],
            None => {
                *pieces[i].get_or_insert_with(|| Piece::of(&chunk_text[spans[i].0..spans[i].1]))
            }
        }))
    };
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
            let len = char_len(&one_line(s));
            assert_eq!(one_line_len(s), len, "{s:?}");
            assert!(one_line_fits(s, len), "{s:?}");
            assert!(len == 0 || !one_line_fits(s, len - 1), "{s:?}");
        }
    }

    #[test]
    fn pieces_joined_count_the_line_of_their_text() {
        let text = "end.Next word  starts\there. 句子一。句子二\n\n third?x";
        let cuts = [0, 4, 9, 22, 28, 37, 46, 51, text.len()];
        let pieces: Vec<Piece> = cuts
            .windows(2)
            .map(|w| Piece::of(&text[w[0]..w[1]]))
            .collect();
        for lo in 0..pieces.len() {
            for hi in lo..pieces.len() {
                let s = &text[cuts[lo]..cuts[hi + 1]];
                assert_eq!(
                    Piece::joined_len(pieces[lo..=hi].iter().copied()),
                    char_len(&one_line(s)),
                    "{s:?}"
                );
            }
        }
    }

    #[test]
    fn an_unsplittable_text_is_capped() {
        let text = "字".repeat(500);
        let s = snippet(&text, &HashSet::new(), 50);
        assert!(char_len(&s) <= 50);
    }
}
