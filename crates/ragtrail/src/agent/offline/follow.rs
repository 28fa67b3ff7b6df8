//! Choosing the next search: a reference the best hits point at, else the names their prose
//! introduces, else (when the search is by words alone) their headings.

use std::collections::HashSet;

use super::references::{names, references_near_question, references_with_strength};
use super::{NAMES_PER_SEARCH, OfflinePlanner, analysed, sentences};
use crate::agent::{MAX_KEYWORDS, Observation, PlannerContext};
use crate::search::SearchHit;
use crate::search::sufficiency::idf;
use crate::text::{self, Lang, char_len};

/// The next search's names (each with the titlePath it came from, best first) and the question
/// words the best name's chunk lacks.
struct NamesToFollow {
    names: Vec<(String, String)>,
    lacking: Vec<String>,
}

/// Whether the run's search found these hits by meaning as well as by words: a model embedder
/// rated the best one against the knowledge base (the hashing embedder's vectors are words).
fn by_meaning(ctx: &PlannerContext<'_>, hits: &[SearchHit]) -> bool {
    hits.first()
        .is_some_and(|h| ctx.lookup.question_standout(&h.chunk_id).is_some())
}

impl OfflinePlanner {
    pub(super) fn next_keywords(&self, ctx: &PlannerContext<'_>) -> Option<(Vec<String>, String)> {
        let Some(Observation::Hits { hits, .. }) = ctx.rounds.last() else {
            return None;
        };
        // The reason is shown to the asker (`--rounds`): in the question's language.
        let lang = Lang::of(ctx.question);
        let top_question: Vec<String> = self
            .question_words
            .iter()
            .take(2)
            .map(|(w, _)| w.clone())
            .collect();
        let own_titles: HashSet<String> = hits
            .iter()
            .filter_map(|h| {
                h.title_path
                    .split(crate::knowledge::TITLE_SEPARATOR)
                    .next()
                    .map(str::to_string)
            })
            .collect();
        // 1. A rule, document or form the best hits point at; among several, the one named in
        //    the sentence that matches the question best (then the better-ranked hit).
        let weights = self.weights();
        let mut best: Option<(f64, String, &str)> = None;
        for hit in hits.iter().take(3) {
            let Some(text) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
                continue;
            };
            for (reference, strong, score) in references_near_question(text, &weights) {
                let score = if strong { score + 100.0 } else { score };
                if !self.unfollowed(&reference) || own_titles.contains(&reference) {
                    continue;
                }
                if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                    best = Some((score, reference, hit.title_path.as_str()));
                }
            }
        }
        if let Some((_, reference, from)) = best {
            let mut keywords = vec![reference.clone()];
            keywords.extend(top_question.iter().filter(|w| **w != reference).cloned());
            return Some((
                keywords,
                match lang {
                    Lang::En => format!("follow the reference to {reference} in {from}"),
                    Lang::Zh => format!("追查「{from}」提到的{reference}"),
                },
            ));
        }
        // 2. Names the best hits introduce, with the question words the best one's chunk lacks.
        if let Some(follow) = self.names_to_follow(ctx) {
            // "follow the names A, B in T1; C in T2"
            let mut by_source: Vec<(&str, Vec<&str>)> = Vec::new();
            for (name, from) in &follow.names {
                match by_source.iter_mut().find(|(f, _)| f == from) {
                    Some((_, names)) => names.push(name),
                    None => by_source.push((from, vec![name])),
                }
            }
            let reason = match lang {
                Lang::En => format!(
                    "follow the name{} {}",
                    if follow.names.len() > 1 { "s" } else { "" },
                    by_source
                        .iter()
                        .map(|(from, names)| format!("{} in {from}", names.join(", ")))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                Lang::Zh => format!(
                    "追查{}",
                    by_source
                        .iter()
                        .map(|(from, names)| format!("「{from}」中的{}", names.join("、")))
                        .collect::<Vec<_>>()
                        .join("；")
                ),
            };
            let mut keywords: Vec<String> = follow.names.into_iter().map(|(n, _)| n).collect();
            keywords.extend(follow.lacking);
            return Some((keywords, reason));
        }
        // 3. Headings of the best hits that were not searched, when the search is by words
        //    alone: they bring the knowledge base's own words for the question's (the hashing
        //    embedder: second set 0.375/0.448 useful replies with them, 0.333/0.414 without).
        //    A model's leg already searched the question's meaning, and the headings' search
        //    only brought passages quoted as evidence that does not answer (multilingual-e5:
        //    held-out sets unchanged, golden zh 0.822 -> 0.836, mean rounds 2.16 -> 1.16 on
        //    laws-zh; BENCHMARKS.md, "The best hits' headings, searched by words alone").
        if by_meaning(ctx, hits) {
            return None;
        }
        let mut fresh = Vec::new();
        for hit in hits.iter().take(3) {
            for part in hit
                .title_path
                .split(crate::knowledge::TITLE_SEPARATOR)
                .skip(1)
            {
                let terms = analysed(part);
                if !terms.is_empty()
                    && terms.iter().any(|t| !self.searched_terms.contains(t))
                    && !fresh.contains(&part.to_string())
                    && char_len(part) <= 20
                {
                    fresh.push(part.to_string());
                }
            }
        }
        if fresh.is_empty() {
            return None;
        }
        fresh.truncate(3);
        let mut keywords = fresh.clone();
        keywords.extend(top_question);
        keywords.truncate(MAX_KEYWORDS);
        Some((
            keywords,
            match lang {
                Lang::En => format!(
                    "broaden with the headings of the best hits: {}",
                    fresh.join(", ")
                ),
                Lang::Zh => format!("用最佳结果的标题扩大搜索：{}", fresh.join("、")),
            },
        ))
    }

    /// The names the best hits of every round introduce that are the likeliest next lookups, at
    /// most [`NAMES_PER_SEARCH`], best first: each taken from a sentence sharing (IDF-weighted)
    /// question terms, not already in the question, not the title of a chunk already seen, not
    /// followed before; a rarer name scores a little higher. Returned with the question words
    /// the best name's chunk lacks (what the next chunk must hold).
    fn names_to_follow(&self, ctx: &PlannerContext<'_>) -> Option<NamesToFollow> {
        let question: HashSet<String> = self
            .question_words
            .iter()
            .flat_map(|(w, _)| analysed(w))
            .collect();
        let n = ctx.lookup.num_chunks();
        let weight = |t: &str| match ctx.lookup.doc_freq(t) {
            0 => 0.0,
            df => idf(df, n),
        };
        let mut seen_titles: HashSet<String> = HashSet::new();
        let mut best_hits: Vec<&SearchHit> = Vec::new();
        for o in ctx.rounds {
            if let Observation::Hits { hits, .. } = o {
                seen_titles.extend(hits.iter().map(|h| h.title_path.to_lowercase()));
                best_hits.extend(hits.iter().take(3));
            }
        }
        let term_set = |text: &str| -> HashSet<String> {
            text::terms(text).into_iter().map(|t| t.text).collect()
        };
        // The IDF weight of the question terms found in any of `sets`.
        let shared = |sets: &[&HashSet<String>]| -> f64 {
            question
                .iter()
                .filter(|t| sets.iter().any(|s| s.contains(*t)))
                .map(|t| weight(t))
                .sum()
        };
        let mut scored: Vec<(f64, String, &SearchHit)> = Vec::new();
        for hit in best_hits {
            let Some(body) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
                continue;
            };
            let title = term_set(&hit.title_path);
            // The title names part of the question and the chunk leaves another part open.
            let subject_with_a_gap = shared(&[&title]) > 0.0
                && ctx
                    .lookup
                    .returned_chunk_terms(&hit.chunk_id, &hit.title_path)
                    .is_some_and(|terms| !question.iter().all(|t| terms.contains(t)));
            for sentence in sentences(body) {
                let candidates = names(sentence);
                if candidates.is_empty() {
                    continue;
                }
                // The bridge of a multi-hop question is where the prose meets the question: a
                // name in a sentence sharing none of its words leads elsewhere — unless the
                // chunk is about the question's subject and leaves a gap: prose names its
                // subject once and then says "he" or "the company", and the title is that
                // subject. The title's words count for every sentence of its chunk.
                let own = term_set(sentence);
                if shared(&[&own]) <= 0.0 && !subject_with_a_gap {
                    continue;
                }
                let overlap = shared(&[&own, &title]);
                for name in candidates {
                    let terms = analysed(&name);
                    if terms.is_empty()
                        || terms.iter().all(|t| question.contains(t))
                        || terms.iter().all(|t| self.searched_terms.contains(t))
                        || seen_titles.contains(&name.to_lowercase())
                        || self.followed.contains(&name)
                    {
                        continue;
                    }
                    let rarity = terms.iter().map(|t| weight(t)).fold(0.0, f64::max);
                    scored.push((overlap + 0.1 * rarity, name, hit));
                }
            }
        }
        // Best first; among equals, the first found (earlier rounds, better hits, earlier text).
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut names: Vec<(String, &SearchHit)> = Vec::new();
        for (_, name, hit) in scored {
            if names.len() == NAMES_PER_SEARCH {
                break;
            }
            if !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                names.push((name, hit));
            }
        }
        let &(_, hit) = names.first()?;
        // The store's analysis of the chunk (titlePath and text), not jieba over it again.
        let hit_terms = ctx
            .lookup
            .returned_chunk_terms(&hit.chunk_id, &hit.title_path);
        let lacking: Vec<String> = self
            .question_words
            .iter()
            .filter(|(w, _)| {
                let terms = analysed(w);
                !terms.is_empty()
                    && hit_terms
                        .as_ref()
                        .is_none_or(|h| terms.iter().all(|t| !h.contains(t)))
            })
            .map(|(w, _)| w.clone())
            .take(3)
            .collect();
        Some(NamesToFollow {
            names: names
                .into_iter()
                .map(|(name, hit)| (name, hit.title_path.clone()))
                .collect(),
            lacking,
        })
    }

    pub(super) fn pending_reference(&self, ctx: &PlannerContext<'_>) -> bool {
        // Prose that names something new where it meets the question is the bridge of a
        // multi-hop question: one chunk covering the question's words does not end it.
        if self.names_to_follow(ctx).is_some() {
            return true;
        }
        let Some(Observation::Hits { hits, .. }) = ctx.rounds.last() else {
            return false;
        };
        let own_titles: HashSet<&str> = hits
            .iter()
            .filter_map(|h| h.title_path.split(crate::knowledge::TITLE_SEPARATOR).next())
            .collect();
        // Any reference counts here, even one far from the question's words: the best hits
        // delegating part of the rule elsewhere is reason enough for another round (which
        // reference is then searched is chosen by its sentence; following only references near
        // the question's words here too ended 7 golden questions a round earlier and lost one
        // expected section).
        hits.iter().take(2).any(|hit| {
            ctx.lookup
                .returned_chunk_text(&hit.chunk_id)
                .is_some_and(|text| {
                    references_with_strength(text)
                        .iter()
                        .any(|(r, _)| self.unfollowed(r) && !own_titles.contains(r.as_str()))
                })
        })
    }

    /// Whether a reference is still worth a search: not followed, and naming something new.
    fn unfollowed(&self, reference: &str) -> bool {
        let terms = analysed(reference);
        !self.followed.contains(reference)
            && !terms.is_empty()
            && terms.iter().any(|t| !self.searched_terms.contains(t))
    }
}
