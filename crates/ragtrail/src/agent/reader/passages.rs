//! The hits a model reads, shown compactly: each returned chunk cut down to its two or three
//! sentences that share the most (rare) words with the question, numbered, within a character
//! budget. Every shown sentence is a verbatim piece of its chunk, so a number the model cites
//! maps back to a chunk id and to quotes that pass the citation checks.

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

/// Weights of the question's terms: rarer terms weigh more (`ln(1 + N/df)`).
fn question_weights(question: &str, lookup: &dyn EvidenceLookup) -> Vec<(String, f64)> {
    let n = lookup.num_chunks().max(1) as f64;
    let mut seen = HashSet::new();
    text::terms(question)
        .into_iter()
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
    let weights = question_weights(ctx.question, ctx.lookup);
    let hits: Vec<(String, String)> = ordered_hits(ctx, first)
        .into_iter()
        .filter(|(id, _)| ctx.lookup.returned_chunk_text(id).is_some())
        .take(MAX_PASSAGES)
        .collect();
    if hits.is_empty() {
        return Vec::new();
    }
    let per_passage = (max_chars / hits.len()).max(120);
    hits.into_iter()
        .filter_map(|(chunk_id, title_path)| {
            let text = ctx.lookup.returned_chunk_text(&chunk_id)?;
            let shown = best_sentences(
                text,
                &weights,
                per_passage.saturating_sub(char_len(&title_path)).max(80),
            );
            (!shown.is_empty()).then_some(Passage {
                chunk_id,
                title_path,
                sentences: shown,
            })
        })
        .collect()
}

/// A chunk's best sentences for the question, within `budget` characters, in the chunk's order.
fn best_sentences(text: &str, weights: &[(String, f64)], budget: usize) -> Vec<String> {
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
        if picked.len() == SENTENCES_PER_PASSAGE || (score <= 0.0 && !picked.is_empty()) {
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
        .map(|(i, p)| format!("[{}] {}\n{}", i + 1, p.title_path, p.sentences.join(" ")))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The sentence of a passage that shares the most words with `claim` (the answer's text),
/// with how many; `None` when it shares none.
pub fn supporting_sentence<'a>(passage: &'a Passage, claim: &str) -> Option<(&'a str, usize)> {
    // Chinese numerals read as digits on both sides: "30天" is supported by "提前三十日".
    let arabic = super::reply::arabic;
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

/// The words around the passages, in the question's language.
pub fn headings(lang: Lang) -> (&'static str, &'static str) {
    match lang {
        Lang::Zh => ("段落：", "问题："),
        Lang::En => ("Passages:", "Question: "),
    }
}
