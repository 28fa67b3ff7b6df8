//! The offline heuristic planner: no network, deterministic, the default and the baseline.
//!
//! - Round 1 searches the question's content words (segmented, stop words dropped), rarest first.
//! - Later rounds follow what the best hits introduce and was not searched yet: names in
//!   《…》/“…”/"…" quotes and form codes such as `FIN-07` (policies point at each other that
//!   way), then names in prose (capitalised runs such as "Shirley Temple": the bridge of a
//!   multi-hop question) with the question words the naming hit lacks, else the headings of the
//!   best hits.
//! - It answers when the evidence covers the question (IDF-weighted key-term coverage of one
//!   returned chunk, the same measure as `searchDocs`' sufficiency) and no reference or name is
//!   left to follow, or when a round brought nothing new; it gives up when nothing covers the
//!   question.
//! - The answer is extractive: the returned sentences that best match the question, each with
//!   its citation and a verbatim quote; a chunk beyond the best one is cited only when it adds
//!   key terms (in its text or its heading) or answers a reference the others delegated.
//!
//! Nothing here knows the sample knowledge base: only text, term rarity and the hits.
//!
//! The planner's parts, by job: `question` reads the question (its content words, nouns no
//! chunk mentions, small talk, a follow-up leaning on the previous turn), `references` mines a
//! chunk's text for the references and names it points at, `follow` chooses the next search,
//! `answer` chooses the chunks to cite and writes the answer.

mod answer;
mod follow;
mod question;
mod references;

use std::collections::HashSet;

use super::planner::{
    Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
};
use crate::search::SearchHit;
use crate::search::sufficiency::{
    KeyTerm, Sufficiency, SufficiencyThresholds, covered_by, key_terms,
};
use crate::text::{self, SentenceEnds, StopThen, char_len, is_stop_term};
use question::small_talk_reply;

/// Round-1 keywords at most: every content word the validator allows. A question's commoner
/// words often name the section that answers (golden set evidence recall 0.814 with the six
/// rarest, 0.838 with eight; HotpotQA joint recall after round 3 0.680 -> 0.738; BENCHMARKS.md).
const FIRST_ROUND_KEYWORDS: usize = super::MAX_KEYWORDS;
/// Names searched together when following the prose of the best hits: the bridge of a
/// multi-hop question is often not the best-scoring name of its sentence, and one search of
/// five hits has room for several (HotpotQA joint recall after round 3: 0.777 with one, 0.835
/// with two or three, 0.825 with four; BENCHMARKS.md).
const NAMES_PER_SEARCH: usize = 3;
/// Sentences in an extractive answer at most.
const ANSWER_SENTENCES: usize = 5;
/// Longest sentence quoted, in characters.
const MAX_SENTENCE_CHARS: usize = 220;
/// Chunks cited at most.
const MAX_CITED_CHUNKS: usize = 3;
/// Share of the question's (IDF-weighted) key terms a further chunk must add to be cited too.
const MIN_CITATION_GAIN: f64 = 0.2;
/// Weight of the best single sentence's key-term coverage in a chunk's citation score (the rest
/// is the whole chunk's). Golden set: citation precision 0.745 at 0, 0.773 at 0.3, 0.782 from
/// 0.4 to 0.7, 0.736 at 1 (BENCHMARKS.md).
const SENTENCE_SHARE: f64 = 0.5;

#[derive(Default)]
pub struct OfflinePlanner {
    thresholds: SufficiencyThresholds,
    question_words: Vec<(String, f64)>,
    /// Topic words carried over from the previous turn of a conversation (said in the reason).
    carried: Vec<String>,
    searched_terms: HashSet<String>,
    seen_chunks: HashSet<String>,
    followed: HashSet<String>,
    /// The question's nouns no chunk mentions (`question::unknown_nouns`); fixed for the run, so
    /// found once, with the question words.
    unknown_nouns: Vec<String>,
    /// The question's function words ([`question::function_words`]): they may add to a hit's coverage but
    /// never count against it.
    function_words: HashSet<String>,
}

/// What the evidence so far supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A returned chunk covers the question: answer it.
    Answer,
    /// Returned chunks bear on the question's topic, but the planner cannot stand behind an
    /// answer: show them as evidence to read.
    Evidence,
    /// Nothing on point.
    Absent,
}

impl OfflinePlanner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_thresholds(thresholds: SufficiencyThresholds) -> Self {
        Self {
            thresholds,
            ..Self::default()
        }
    }

    /// Notes what the last turn's searches used and returned; whether they brought a chunk not
    /// seen before.
    fn take_in(&mut self, observations: &[Observation]) -> bool {
        let mut new_evidence = false;
        for o in observations {
            if let Observation::Hits { keywords, hits, .. } = o {
                for k in keywords {
                    self.searched_terms.extend(analysed(k));
                    self.followed.insert(k.clone());
                }
                for h in hits {
                    new_evidence |= self.seen_chunks.insert(h.chunk_id.clone());
                }
            }
        }
        new_evidence
    }

    /// The first search: the question's content words, rarest first.
    fn first_search(&self, ctx: &PlannerContext<'_>) -> PlannerAction {
        if self.question_words.is_empty() {
            return PlannerAction::GiveUp {
                reason: "the question has no content words to search".to_string(),
            };
        }
        let keywords: Vec<String> = self
            .question_words
            .iter()
            .take(FIRST_ROUND_KEYWORDS)
            .map(|(w, _)| w.clone())
            .collect();
        PlannerAction::Search {
            keywords,
            reason: if self.carried.is_empty() {
                "content words of the question, rarest first".to_string()
            } else {
                format!(
                    "content words of the question, rarest first, with the previous turn's topic carried over: {}",
                    self.carried.join(", ")
                )
            },
            top_k: None,
            // The vector leg reads the question itself: a semantic embedder finds meaning in a
            // sentence that a keyword list has lost.
            query: Some(self.effective_question(ctx)),
        }
    }

    /// What the question's key terms and every chunk returned so far support (a later round's
    /// keywords come from the hits themselves, so their own coverage says nothing about the
    /// question), with the account the user sees.
    ///
    /// A hit's coverage is the IDF-weighted share of the question's key terms in its heading or
    /// text, as `searchDocs` measures it, except that function words
    /// ([`question::function_words`]: 去, 谁, 来, "where") count when a hit has them and never
    /// against it.
    /// - Answer: a hit covers the question (the bar met, words the knowledge base never uses
    ///   weighing the most, as in `searchDocs`) and no noun of the question is absent from it.
    /// - Evidence: not so, but leaving out the words the knowledge base never uses (老婆 for
    ///   配偶, "laptop"), a hit covers the question, and a hit's own heading is named by the
    ///   question (every term of its last titlePath segment is one of the question's): the
    ///   documents' vocabulary says the section is about what was asked, in other words.
    /// - Absent: nothing on point.
    fn verdict(&self, ctx: &PlannerContext<'_>) -> (Verdict, Sufficiency) {
        let question = self.effective_question(ctx);
        let keys = key_terms(
            std::slice::from_ref(&question),
            &|t: &str| ctx.lookup.doc_freq(t),
            ctx.lookup.num_chunks(),
        );
        let (weak, mut strong): (Vec<KeyTerm>, Vec<KeyTerm>) = keys
            .into_iter()
            .partition(|k| self.function_words.contains(&k.term));
        let weak = if strong.is_empty() {
            strong = weak;
            Vec::new()
        } else {
            weak
        };
        let is_absent = |k: &KeyTerm| k.parts.iter().any(|p| ctx.lookup.doc_freq(p) == 0);
        let known_terms: HashSet<String> = strong
            .iter()
            .chain(&weak)
            .filter(|k| !is_absent(k))
            .flat_map(|k| k.parts.iter().cloned())
            .collect();
        let known_keys: Vec<String> = strong
            .iter()
            .chain(&weak)
            .filter(|k| !is_absent(k))
            .map(|k| k.term.clone())
            .collect();
        let all: Vec<KeyTerm> = strong.iter().chain(&weak).cloned().collect();
        // The store's cached analysis of each hit, not jieba over its text again.
        let hits: Vec<(&SearchHit, HashSet<String>, bool)> = all_hits(ctx)
            .filter_map(|(h, _)| {
                let terms = ctx
                    .lookup
                    .returned_chunk_terms(&h.chunk_id, &h.title_path)?;
                let present = covered_by(&all, |t| terms.contains(t), terms.lowercase());
                let leaf = h
                    .title_path
                    .rsplit(crate::knowledge::TITLE_SEPARATOR)
                    .next()
                    .unwrap_or_default();
                let named = h.title_path.contains(crate::knowledge::TITLE_SEPARATOR)
                    && heading_named_by(leaf, &known_keys, &known_terms);
                Some((h, present, named))
            })
            .collect();
        let share = |present: &HashSet<String>, with_absent: bool| -> f64 {
            let counted = |k: &&KeyTerm| with_absent || !is_absent(k);
            let total: f64 = strong.iter().filter(counted).map(|k| k.weight).sum::<f64>()
                + weak
                    .iter()
                    .filter(|k| present.contains(&k.term))
                    .map(|k| k.weight)
                    .sum::<f64>();
            let found: f64 = strong
                .iter()
                .chain(&weak)
                .filter(counted)
                .filter(|k| present.contains(&k.term))
                .map(|k| k.weight)
                .sum();
            if total <= 0.0 { 0.0 } else { found / total }
        };
        let coverage = hits
            .iter()
            .map(|(_, p, _)| share(p, true))
            .fold(0.0, f64::max);
        let known_coverage = hits
            .iter()
            .map(|(_, p, _)| share(p, false))
            .fold(0.0, f64::max);
        let missing: Vec<String> = strong
            .iter()
            .filter(|k| !hits.iter().any(|(_, p, _)| p.contains(&k.term)))
            .map(|k| k.term.clone())
            .collect();
        let total: f64 = strong.iter().map(|k| k.weight).sum();
        let missing_weight: f64 = strong
            .iter()
            .filter(|k| missing.contains(&k.term))
            .map(|k| k.weight)
            .sum();
        let named_heading = hits
            .iter()
            .find(|(_, _, named)| *named)
            .map(|(h, _, _)| h.title_path.clone());
        let bar = self.thresholds.min_coverage;
        let verdict = if hits.is_empty() || total <= 0.0 {
            Verdict::Absent
        } else if coverage >= bar && self.unknown_nouns.is_empty() {
            Verdict::Answer
        } else if known_coverage >= bar && named_heading.is_some() {
            Verdict::Evidence
        } else {
            Verdict::Absent
        };
        let mut reason = if hits.is_empty() {
            "no hits".to_string()
        } else if total <= 0.0 {
            "the keywords have no content words (only stop words)".to_string()
        } else if verdict == Verdict::Answer {
            format!(
                "best hit covers {:.0}% of the key terms (bar {:.0}%)",
                coverage * 100.0,
                bar * 100.0
            )
        } else {
            // The bar may have been met; "bar 35%" alone would read as a pass.
            format!(
                "best hit covers {:.0}% of the key terms ({:.0}% of those the knowledge base uses; {:.0}% needed)",
                coverage * 100.0,
                known_coverage * 100.0,
                bar * 100.0
            )
        };
        if !missing.is_empty() {
            reason.push_str(&format!("; not found in any hit: {}", missing.join(", ")));
        }
        if !self.unknown_nouns.is_empty() {
            reason.push_str(&format!(
                "; no chunk of the knowledge base mentions {}",
                self.unknown_nouns.join(", ")
            ));
        }
        if verdict == Verdict::Evidence
            && let Some(heading) = &named_heading
        {
            reason.push_str(&format!("; the question names the section {heading}"));
        }
        let sufficiency = Sufficiency {
            sufficient: verdict == Verdict::Answer,
            reason,
            coverage,
            union_coverage: if total > 0.0 {
                1.0 - missing_weight / total
            } else {
                0.0
            },
            missing_terms: missing,
        };
        (verdict, sufficiency)
    }

    /// Evidence to read: the passages an answer would quote, shown as passages, not as an
    /// answer (`why`: the verdict's account, recorded as the run's reason).
    fn evidence(&self, ctx: &PlannerContext<'_>, why: &str) -> PlannerAction {
        match self.answer(ctx) {
            PlannerAction::Answer { citations, .. } => PlannerAction::Evidence {
                citations,
                reason: format!("evidence: {why}"),
            },
            other => other,
        }
    }
}

/// Whether a heading is named by the question's words: every Han character of it lies in an
/// occurrence of one of the question's (known) CJK key terms, and every other term of it is one
/// of the question's. A heading with nothing to name is not named.
fn heading_named_by(heading: &str, keys: &[String], terms: &HashSet<String>) -> bool {
    let lower = heading.to_lowercase();
    let chars: Vec<(usize, char)> = lower.char_indices().collect();
    let mut covered = vec![false; chars.len()];
    for key in keys.iter().filter(|k| k.chars().any(text::is_ideograph)) {
        for (start, _) in lower.match_indices(key.as_str()) {
            let end = start + key.len();
            for (i, (at, _)) in chars.iter().enumerate() {
                if *at >= start && *at < end {
                    covered[i] = true;
                }
            }
        }
    }
    let han: Vec<usize> = (0..chars.len())
        .filter(|&i| text::is_ideograph(chars[i].1))
        .collect();
    let latin: String = chars
        .iter()
        .map(|&(_, c)| if text::is_ideograph(c) { ' ' } else { c })
        .collect();
    let latin_terms = analysed(&latin);
    (!han.is_empty() || !latin_terms.is_empty())
        && han.iter().all(|&i| covered[i])
        && latin_terms.iter().all(|t| terms.contains(t))
}

fn analysed(word: &str) -> Vec<String> {
    text::terms(word)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !is_stop_term(t))
        .collect()
}

/// The planner's sentence ends, not the snippet's: an ASCII `;` ends no sentence, and a Latin
/// stop ends one before any whitespace (also U+3000 or a no-break space), not only ASCII
/// whitespace. Kept as they were: the answer quotes these sentences and scores by them.
const SENTENCE_ENDS: SentenceEnds = SentenceEnds {
    semicolon: false,
    stop_then: StopThen::Whitespace,
    keep_blank: false,
};

/// Sentences (and table rows) of a chunk, trimmed, separator rows dropped.
fn sentences(text: &str) -> Vec<&str> {
    text::sentence_spans_with(text, SENTENCE_ENDS)
        .into_iter()
        .map(|(start, end)| text[start..end].trim())
        .filter(|s| char_len(s) >= 4 && !s.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')))
        .collect()
}

/// Every hit returned so far, with the round that returned it (first time only).
fn all_hits<'a>(ctx: &'a PlannerContext<'_>) -> impl Iterator<Item = (&'a SearchHit, u32)> + 'a {
    let mut seen = HashSet::new();
    ctx.rounds
        .iter()
        .filter_map(|o| match o {
            Observation::Hits { round, hits, .. } => Some(hits.iter().map(move |h| (h, *round))),
            _ => None,
        })
        .flatten()
        .filter(move |(h, _)| seen.insert(h.chunk_id.clone()))
}

impl Planner for OfflinePlanner {
    fn kind(&self) -> &'static str {
        "offline"
    }

    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let step = |action| {
            Ok(PlannerStep {
                actions: vec![action],
                ..PlannerStep::default()
            })
        };
        if ctx.searches_done == 0
            && observations.is_empty()
            && let Some(text) = small_talk_reply(ctx.question)
        {
            return step(PlannerAction::Reply {
                text: text.to_string(),
            });
        }
        if self.question_words.is_empty() && ctx.searches_done == 0 {
            self.read_question(ctx);
        }
        // A refused answer is not retried with the same evidence.
        if observations
            .iter()
            .any(|o| matches!(o, Observation::CitationsRefused { .. }))
        {
            return step(PlannerAction::GiveUp {
                reason: "refused_citations".to_string(),
            });
        }
        let new_evidence = self.take_in(observations);
        if ctx.searches_done == 0 {
            return step(self.first_search(ctx));
        }
        let (verdict, sufficiency) = self.verdict(ctx);
        let covered = verdict == Verdict::Answer;
        // The decision the user sees: about the question and every hit so far, not only the
        // last search's own keywords.
        let conclude = |planner: &Self| match verdict {
            Verdict::Answer => planner.answer(ctx),
            Verdict::Evidence => planner.evidence(ctx, &sufficiency.reason),
            Verdict::Absent => PlannerAction::GiveUp {
                reason: format!("no_relevant_hits: {}", sufficiency.reason),
            },
        };
        let last_had_hits =
            matches!(ctx.rounds.last(), Some(Observation::Hits { hits, .. }) if !hits.is_empty());
        if ctx.answer_only || !new_evidence || (covered && !self.pending_reference(ctx)) {
            return step(if last_had_hits || ctx.searches_done > 1 {
                conclude(self)
            } else {
                PlannerAction::GiveUp {
                    reason: format!("no_relevant_hits: {}", sufficiency.reason),
                }
            });
        }
        match self.next_keywords(ctx) {
            Some((keywords, reason)) => step(PlannerAction::Search {
                keywords,
                reason,
                top_k: None,
                query: None,
            }),
            None => step(conclude(self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heading_is_named_when_the_question_s_words_spell_it() {
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let terms = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        assert!(heading_named_by(
            "陪产假",
            &keys(&["陪产", "产假"]),
            &terms(&[])
        ));
        assert!(!heading_named_by(
            "不予报销的项目",
            &keys(&["报销"]),
            &terms(&[])
        ));
        assert!(heading_named_by(
            "Sick leave",
            &keys(&[]),
            &terms(&["sick", "leav"])
        ));
        assert!(!heading_named_by(
            "Lost equipment",
            &keys(&[]),
            &terms(&["lost"])
        ));
        assert!(!heading_named_by("", &keys(&["报销"]), &terms(&[])));
    }

    #[test]
    fn sentences_split_and_drop_table_separators() {
        let s = sentences(
            "第一句。第二句！\n| 城市 | 标准 |\n| --- | --- |\n| 一线 | 600元 |\nEnd. Next one",
        );
        assert_eq!(
            s,
            vec![
                "第一句。",
                "第二句！",
                "| 城市 | 标准 |",
                "| 一线 | 600元 |",
                "End.",
                "Next one"
            ]
        );
        // Unlike a snippet's sentence, `; ` ends none; any whitespace after a stop ends one.
        assert_eq!(
            sentences("Order it in the portal; IT ships it. Done.\u{3000}Thanks all"),
            [
                "Order it in the portal; IT ships it.",
                "Done.",
                "Thanks all"
            ]
        );
    }
}
