//! The hits a model reads, shown compactly: each returned chunk cut down to its two or three
//! sentences that share the most (rare) words with the question, numbered, within a character
//! budget. Every shown sentence is a verbatim piece of its chunk, so a number the model cites
//! maps back to a chunk id and to quotes that pass the citation checks. Shared by the reader
//! mode (all the run's hits in one request) and the LLM planner (each search's hits in its
//! tool message).

use std::collections::HashSet;

use crate::agent::offline::sentences;
use crate::agent::planner::{EvidenceLookup, Observation, PlannerContext};
use crate::text::{self, Lang, char_len, truncate_chars};

/// Sentences shown per passage at most.
const SENTENCES_PER_PASSAGE: usize = 3;

/// Passages shown at most.
pub const MAX_PASSAGES: usize = 5;

/// About this many characters of passages in all (titles included).
pub const PASSAGE_CHARS: usize = 2000;

/// One numbered passage: a chunk and the verbatim sentences of it that are shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    pub chunk_id: String,
    pub title_path: String,
    /// In the chunk's own order.
    pub sentences: Vec<String>,
}

/// Weights of the terms of `texts` (the question, and the keywords searched): rarer terms
/// weigh more (`ln(1 + N/df)`).
pub fn term_weights(texts: &[&str], lookup: &dyn EvidenceLookup) -> Vec<(String, f64)> {
    let n = lookup.num_chunks().max(1) as f64;
    let mut seen = HashSet::new();
    texts
        .iter()
        .flat_map(|t| text::terms(t))
        .filter(|t| seen.insert(t.text.clone()))
        .map(|t| {
            let df = lookup.doc_freq(&t.text).max(1) as f64;
            let w = (1.0 + n / df).ln();
            (t.text, w)
        })
        .collect()
}

/// How much of the question a sentence covers: the weights of the question's terms it has.
fn sentence_score(sentence: &str, weights: &[(String, f64)]) -> f64 {
    let terms: HashSet<String> = text::terms(sentence).into_iter().map(|t| t.text).collect();
    weights
        .iter()
        .filter(|(t, _)| terms.contains(t))
        .map(|(_, w)| w)
        .sum()
}

/// The chunks returned so far, each once: those in `first` (the offline planner's pick) first,
/// then in the order the searches returned them.
fn ordered_hits(ctx: &PlannerContext<'_>, first: &[String]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = Vec::new();
    for o in ctx.rounds {
        if let Observation::Hits { hits, .. } = o {
            for h in hits {
                if !all.iter().any(|(id, _)| id == &h.chunk_id) {
                    all.push((h.chunk_id.clone(), h.title_path.clone()));
                }
            }
        }
    }
    let mut ordered: Vec<(String, String)> = first
        .iter()
        .filter_map(|id| all.iter().find(|(c, _)| c == id).cloned())
        .collect();
    for hit in all {
        if !ordered.iter().any(|(c, _)| c == &hit.0) {
            ordered.push(hit);
        }
    }
    ordered
}

/// The passages to show for the run so far, at most `max_chars` characters in all.
pub fn select(ctx: &PlannerContext<'_>, first: &[String], max_chars: usize) -> Vec<Passage> {
    let weights = term_weights(&[ctx.question], ctx.lookup);
    let hits: Vec<(String, String)> = ordered_hits(ctx, first)
        .into_iter()
        .filter(|(id, _)| ctx.lookup.returned_chunk_text(id).is_some())
        .take(MAX_PASSAGES)
        .collect();
    pick(&hits, &weights, ctx.lookup, max_chars, false)
}

/// `hits` (chunk id, titlePath) as passages of about `max_chars` characters in all (titles
/// included, the numbers not): each hit's best sentences for `weights`, in the hits' order. A
/// hit whose text was not returned in this run is left out. With `fill`, sentences that share
/// no weighted word are shown too while the passage has room (up to three in all): a short
/// chunk is then shown whole, its deadline beside its advice.
pub fn pick(
    hits: &[(String, String)],
    weights: &[(String, f64)],
    lookup: &dyn EvidenceLookup,
    max_chars: usize,
    fill: bool,
) -> Vec<Passage> {
    if hits.is_empty() {
        return Vec::new();
    }
    let per_passage = (max_chars / hits.len()).max(120);
    hits.iter()
        .filter_map(|(chunk_id, title_path)| {
            let text = lookup.returned_chunk_text(chunk_id)?;
            let shown = best_sentences(
                text,
                weights,
                per_passage.saturating_sub(char_len(title_path)).max(80),
                fill,
            );
            (!shown.is_empty()).then(|| Passage {
                chunk_id: chunk_id.clone(),
                title_path: title_path.clone(),
                sentences: shown,
            })
        })
        .collect()
}

/// A chunk's best sentences for the question, within `budget` characters, in the chunk's order.
fn best_sentences(text: &str, weights: &[(String, f64)], budget: usize, fill: bool) -> Vec<String> {
    let all = sentences(text);
    let mut ranked: Vec<(usize, f64)> = all
        .iter()
        .enumerate()
        .map(|(i, s)| (i, sentence_score(s, weights)))
        .collect();
    // Best first; ties keep the chunk's order.
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut picked: Vec<usize> = Vec::new();
    let mut used = 0;
    for (i, score) in ranked {
        if picked.len() == SENTENCES_PER_PASSAGE || (score <= 0.0 && !picked.is_empty() && !fill) {
            break;
        }
        let len = char_len(all[i]);
        if !picked.is_empty() && used + len > budget {
            continue;
        }
        picked.push(i);
        used += len.min(budget);
    }
    picked.sort_unstable();
    picked
        .into_iter()
        // A verbatim prefix of an over-long sentence is still a verbatim quote.
        .map(|i| truncate_chars(all[i], budget).to_string())
        .collect()
}

/// The passages as the model reads them: `[n] titlePath` and the shown sentences.
pub fn render(passages: &[Passage]) -> String {
    passages
        .iter()
        .enumerate()
        .map(|(i, p)| block(i + 1, p))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One passage as the model reads it, numbered `n`.
pub fn block(n: usize, p: &Passage) -> String {
    format!("[{n}] {}\n{}", p.title_path, p.sentences.join(" "))
}

/// The sentence of a passage that shares the most words with `claim` (the answer's text),
/// with how many; `None` when it shares none.
pub fn supporting_sentence<'a>(passage: &'a Passage, claim: &str) -> Option<(&'a str, usize)> {
    // Chinese numerals read as digits on both sides: "30天" is supported by "提前三十日".
    let arabic = super::numerals::arabic;
    let claim_terms: HashSet<String> = text::terms(&arabic(claim))
        .into_iter()
        .map(|t| t.text)
        .collect();
    passage
        .sentences
        .iter()
        .map(|s| {
            let shared = text::terms(&arabic(s))
                .into_iter()
                .map(|t| t.text)
                .collect::<HashSet<_>>()
                .intersection(&claim_terms)
                .count();
            (s.as_str(), shared)
        })
        // The first of the best, so a tie keeps the chunk's order.
        .fold(None, |best: Option<(&str, usize)>, (s, n)| match best {
            Some((_, b)) if b >= n => best,
            _ if n > 0 => Some((s, n)),
            _ => best,
        })
}

/// Where a citation bracket starts and ends, and its numbers: `[2]`, `【2】`, `[1, 3]`, `[1][3]`
/// (each bracket on its own). `None` for a bracket that holds anything but numbers.
pub fn bracket_at(s: &str, start: usize) -> Option<(usize, Vec<usize>)> {
    let rest = &s[start..];
    let open = rest.chars().next()?;
    let close = match open {
        '[' => ']',
        '【' => '】',
        _ => return None,
    };
    let inner_start = start + open.len_utf8();
    let end = s[inner_start..].find(close)? + inner_start;
    let inner = &s[inner_start..end];
    let numbers: Option<Vec<usize>> = inner
        .split([',', '，', '、', ' '])
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().trim_start_matches('#').parse::<usize>().ok())
        .collect();
    let numbers = numbers.filter(|n| !n.is_empty())?;
    Some((end + close.len_utf8(), numbers))
}

/// `text` with each citation bracket replaced by what `with` makes of its numbers and of the
/// bracket as written.
pub fn map_markers(text: &str, mut with: impl FnMut(&[usize], &str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if let Some((end, numbers)) = bracket_at(text, i) {
            out.push_str(&with(&numbers, &text[i..end]));
            i = end;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The text without its `[n]` markers.
pub fn strip_markers(text: &str) -> String {
    map_markers(text, |_, _| String::new())
}

/// `text` with the passage numbers in its brackets (`[3]`, `【3】`, `[3, 1]`) replaced by their
/// places in `order` (1-based): `[3]` becomes `[1]` when passage 3 is cited first. A bracket
/// with a number not in `order` is left as written.
pub fn renumber_markers(text: &str, order: &[usize]) -> String {
    map_markers(text, |numbers, raw| {
        let places: Option<Vec<String>> = (numbers.iter())
            .map(|n| {
                order
                    .iter()
                    .position(|o| o == n)
                    .map(|k| format!("[{}]", k + 1))
            })
            .collect();
        places.map_or_else(|| raw.to_string(), |p| p.concat())
    })
}

/// The words around the passages, in the question's language.
pub fn headings(lang: Lang) -> (&'static str, &'static str) {
    match lang {
        Lang::Zh => ("段落：", "问题："),
        Lang::En => ("Passages:", "Question: "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filling_shows_a_short_chunks_other_sentences() {
        let text =
            "电子发票须在乘车日期后180天内申请开具。建议返程当天即完成开票，以免错过报销时限。";
        let weights = [("报销".to_string(), 1.0)];
        assert_eq!(
            best_sentences(text, &weights, 300, false),
            ["建议返程当天即完成开票，以免错过报销时限。"]
        );
        assert_eq!(
            best_sentences(text, &weights, 300, true),
            [
                "电子发票须在乘车日期后180天内申请开具。",
                "建议返程当天即完成开票，以免错过报销时限。"
            ]
        );
        // Within the budget only.
        assert_eq!(best_sentences(text, &weights, 30, true).len(), 1);
    }

    #[test]
    fn markers_are_renumbered_to_the_citation_order() {
        assert_eq!(
            renumber_markers("Leave is 15 days [3]. It accrues [1, 3]【3】.", &[3, 1]),
            "Leave is 15 days [1]. It accrues [2][1][1]."
        );
        // A number that is not cited, or a bracket of words, stays as written.
        assert_eq!(
            renumber_markers("See [4] and [the form].", &[3]),
            "See [4] and [the form]."
        );
    }
}
