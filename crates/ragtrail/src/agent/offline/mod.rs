//! The offline heuristic planner: no network, deterministic, the default and the baseline.
//!
//! - Round 1 searches the question's content words (segmented, stop words dropped), rarest first.
//! - Later rounds follow what the best hits introduce and was not searched yet: names in
//!   《…》/“…”/"…" quotes and form codes such as `FIN-07` (policies point at each other that
//!   way), then names in prose (capitalised runs such as "Shirley Temple": the bridge of a
//!   multi-hop question) with the question words the naming hit lacks, else, when the search
//!   is by words alone (no model embedder), the headings of the best hits.
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
//! `answer` chooses the chunks to cite and writes the answer, `lists` quotes a list's lead-in
//! and items together.

mod answer;
mod asked;
mod everyday;
mod follow;
mod lists;
mod other_language;
mod question;
mod references;
mod remembered;

use std::collections::{HashMap, HashSet};

use super::planner::{
    Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
};
use crate::search::SearchHit;
use crate::search::sufficiency::{KeyTerm, Sufficiency, SufficiencyThresholds, covered_by, decide};
use crate::text::{self, Lang, SentenceEnds, StopThen, char_len, is_stop_term};
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
/// Share of a question part's key terms (IDF-weighted) that a sentence, with the headings it
/// stands under, must cover to be about the part's subject and so state its answer.
const SUBJECT_SHARE: f64 = 0.7;
/// Passages given as evidence at most: more is a search result, not a reply.
const MAX_EVIDENCE: usize = 3;
/// Share of the question's key terms (IDF-weighted, words no chunk uses left out) one
/// returned passage must cover for the passages to be shown as evidence rather than refused.
const EVIDENCE_COVERAGE: f64 = 0.35;
/// A further evidence passage's chunk must score this share of the best one's.
const EVIDENCE_SPREAD: f64 = 0.5;
/// Weight of a standard deviation of meaning (the question's similarity over the knowledge base)
/// against the best passage's whole coverage when evidence passages are ranked with a model
/// embedder. Anything from 0.5 to 10 chose alike on the five evaluation sets; below, coverage
/// wins again (BENCHMARKS.md, "Evidence ranked by meaning among the passages that cover").
const MEANING_WEIGHT: f64 = 1.0;
/// Longest sentence quoted, in characters: the longest quote the loop's citation check
/// accepts. A rule is often one long sentence ("The following are not reimbursed: airport
/// lounge access, seat upgrades, …").
const MAX_SENTENCE_CHARS: usize = crate::agent::citations::MAX_QUOTE_CHARS;
/// Chunks cited at most.
const MAX_CITED_CHUNKS: usize = 3;
/// Share of the question's (IDF-weighted) key terms a further chunk must add to be cited too.
const MIN_CITATION_GAIN: f64 = 0.2;
/// Weight of the best single sentence's key-term coverage in a chunk's citation score (the rest
/// is the whole chunk's). Golden set: citation precision 0.745 at 0, 0.773 at 0.3, 0.782 from
/// 0.4 to 0.7, 0.736 at 1 (BENCHMARKS.md).
const SENTENCE_SHARE: f64 = 0.5;
/// How far (in standard deviations of the question's similarity over the knowledge base) a
/// returned passage must stand out to be shown as evidence when the question's words do not
/// cover it: three, the usual bar for "not chance" (BENCHMARKS.md, "Passages that stand out").
const STANDOUT_BAR: f64 = 3.0;
/// Passages given as evidence that way at most.
const MAX_STANDOUT_CITED: usize = 2;

#[derive(Default)]
pub struct OfflinePlanner {
    thresholds: SufficiencyThresholds,
    question_words: Vec<(String, f64)>,
    /// Topic words carried over from the previous turn of a conversation (said in the reason).
    carried: Vec<String>,
    searched_terms: HashSet<String>,
    seen_chunks: HashSet<String>,
    followed: HashSet<String>,
    /// The question's words no chunk mentions that carry its subject
    /// (`weigh_absent_words`): the knowledge base lacks what is asked, and the run refuses.
    unknown_nouns: Vec<String>,
    /// The question's other words no chunk mentions: they keep an answer from being composed,
    /// not the passages that cover the rest from being shown.
    everyday_unknown: Vec<String>,
    /// The question's key terms for the verdict and the answer (`question::verdict_keys`),
    /// read once with the question.
    verdict_keys: Vec<KeyTerm>,
    /// The question's single Chinese characters no index term holds alone (丢 of "手机丢了":
    /// the documents write 丢失), left out of `verdict_keys`; a passage read for the answer
    /// weighs them where it writes them (`answer::passage_keys`).
    characters: Vec<KeyTerm>,
    /// Everyday words no chunk contains, with the written words searched for them
    /// (`everyday::formal_equivalents`) and the key term that stands for them in the verdict.
    written: Vec<(String, Vec<String>, String)>,
    /// The key terms of the question's subject found only in the other language's words
    /// (`other_language`): evidence must hold one of them.
    crossed: Vec<String>,
    /// The asker's remembered facts: stated by the question, searched, to be weighed.
    remembered: remembered::Remembered,
}

impl OfflinePlanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the question's subject is named by no chunk the run may see (the run refuses
    /// whatever the passages say).
    pub(crate) fn subject_unknown(&self) -> bool {
        !self.unknown_nouns.is_empty()
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
            reason: match (Lang::of(ctx.question), self.carried.is_empty()) {
                (Lang::En, true) => "content words of the question, rarest first".to_string(),
                (Lang::Zh, true) => "问题中的实词，少见的在前".to_string(),
                (Lang::En, false) => format!(
                    "content words of the question, rarest first, with the previous turn's topic carried over: {}",
                    self.carried.join(", ")
                ),
                (Lang::Zh, false) => format!(
                    "问题中的实词，少见的在前，并沿用上一轮的话题：{}",
                    self.carried.join("、")
                ),
            },
            top_k: None,
            // Round 1 searches the question itself: a semantic vector leg embeds its words.
            query: Some(self.effective_question(ctx)),
            lexical: false,
        }
    }

    /// The `searchDocs` sufficiency decision, applied to the question's key terms and every
    /// chunk returned so far (a later round's keywords come from the hits themselves, so their
    /// own coverage says nothing about the question). A word no chunk mentions keeps it from
    /// being sufficient: no answer can state what the documents never name.
    fn question_sufficiency(&self, ctx: &PlannerContext<'_>) -> Sufficiency {
        let keys = &self.verdict_keys;
        // Every turn weighs every hit so far: the store's cached analysis of each, not jieba
        // over its text again.
        let per_hit: Vec<HashSet<String>> = all_hits(ctx)
            .filter_map(|(h, _)| {
                let terms = ctx
                    .lookup
                    .returned_chunk_terms(&h.chunk_id, &h.title_path)?;
                Some(covered_by(keys, |t| terms.contains(t), terms.lowercase()))
            })
            .collect();
        let mut sufficiency = decide(keys, &per_hit, self.thresholds);
        if !self.unknown_nouns.is_empty() || !self.everyday_unknown.is_empty() {
            sufficiency.sufficient = false;
        }
        sufficiency
    }

    /// Why nothing is shown, in the question's language and the asker's own words: the subject
    /// no passage of the knowledge base mentions, else the words no passage found holds, else
    /// the words no single passage found brings together.
    fn why_refused(&self, ctx: &PlannerContext<'_>, sufficiency: &Sufficiency) -> String {
        let lang = Lang::of(ctx.question);
        let quoted = |words: &[String]| -> String {
            let sep = lang.pick(", ", "、");
            words
                .iter()
                .map(|w| format!("“{w}”"))
                .collect::<Vec<_>>()
                .join(sep)
        };
        if !self.unknown_nouns.is_empty() {
            return match lang {
                Lang::Zh => format!("知识库中没有段落提到{}", quoted(&self.unknown_nouns)),
                Lang::En => format!(
                    "no passage in English mentions {}",
                    quoted(&self.unknown_nouns)
                ),
            };
        }
        let missing: Vec<String> =
            self.askers_words(self.question_words.iter().map(|(w, _)| w).filter(|w| {
                analysed(w)
                    .iter()
                    .any(|t| sufficiency.missing_terms.contains(t))
                    || sufficiency.missing_terms.contains(&w.to_lowercase())
            }));
        // Said of the passages found, not of the knowledge base: a word no hit holds may well
        // be written elsewhere (最长, 两年 in a body of laws).
        if !missing.is_empty() {
            return match lang {
                Lang::Zh => format!("找到的段落都没有讲到{}", quoted(&missing)),
                Lang::En => format!("none of the passages found speaks of {}", quoted(&missing)),
            };
        }
        let words: Vec<String> = self.askers_words(
            self.question_words
                .iter()
                .filter(|(_, weight)| *weight > 0.0)
                .map(|(w, _)| w),
        );
        let words = &words[..words.len().min(3)];
        match lang {
            Lang::Zh => format!("找到的段落中没有一段同时讲到{}", quoted(words)),
            Lang::En => format!(
                "none of the passages found speaks of {} together",
                quoted(words)
            ),
        }
    }

    /// `words` as the asker put them, each once: a written word searched for an everyday one
    /// (上级 for 老板) is shown as the asker's, who never said it.
    fn askers_words<'w>(&self, words: impl Iterator<Item = &'w String>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for word in words {
            let own = self
                .written
                .iter()
                .find(|(_, written, _)| written.contains(word))
                .map_or(word, |(everyday, _, _)| everyday);
            if !out.contains(own) {
                out.push(own.clone());
            }
        }
        out
    }
}

/// The summed weight of the question's terms (`weights`, [`OfflinePlanner::weights`]) that
/// `terms` hold: how much of the question a sentence or a line speaks of.
fn weight_held(weights: &HashMap<String, f64>, terms: &HashSet<String>) -> f64 {
    weights
        .iter()
        .filter(|(t, _)| terms.contains(*t))
        .map(|(_, w)| w)
        .sum()
}

fn analysed(word: &str) -> Vec<String> {
    text::terms(word)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !is_stop_term(t))
        .collect()
}

/// The planner's sentence ends, not the snippet's: an ASCII `;` ends no sentence, a Latin
/// stop ends one before any whitespace (also U+3000 or a no-break space), not only ASCII
/// whitespace, and a `.` before a lowercase word closes an abbreviation (a quote ending in
/// "(i.e." is a fragment). The answer quotes these sentences and scores by them.
const SENTENCE_ENDS: SentenceEnds = SentenceEnds {
    semicolon: false,
    stop_then: StopThen::Whitespace,
    keep_blank: false,
    lowercase_continues: true,
};

/// Sentences (and table rows) of a chunk, trimmed, separator rows dropped.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
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
        // A run whose asker has remembered facts says on its last turn what it did with them.
        let account = |used: Vec<String>, planner: &Self| {
            (!ctx.memory.is_empty()).then(|| planner.remembered.account(used))
        };
        let step = |action: PlannerAction, memory| {
            Ok(PlannerStep {
                actions: vec![action],
                memory,
                ..PlannerStep::default()
            })
        };
        if ctx.searches_done == 0
            && observations.is_empty()
            && let Some(text) = small_talk_reply(ctx.question)
        {
            return step(
                PlannerAction::Reply {
                    text: text.to_string(),
                },
                None,
            );
        }
        if self.question_words.is_empty() && ctx.searches_done == 0 {
            self.read_question(ctx);
            self.remembered = remembered::Remembered::read(ctx.question, ctx.today, ctx.memory);
        }
        // A refused answer is not retried with the same evidence.
        if observations
            .iter()
            .any(|o| matches!(o, Observation::CitationsRefused { .. }))
        {
            return step(
                PlannerAction::GiveUp {
                    reason: "refused_citations".to_string(),
                },
                account(Vec::new(), self),
            );
        }
        let new_evidence = self.take_in(observations);
        if ctx.searches_done == 0 {
            return step(self.first_search(ctx), None);
        }
        // The asker's remembered facts are searched once, after the question's own words.
        if let Some(search) = self.memory_search(ctx) {
            return step(search, None);
        }
        let sufficiency = self.question_sufficiency(ctx);
        let covered = sufficiency.sufficient;
        // The decision the user sees: about the question and every hit so far, not only the
        // last search's own keywords. A subject no chunk names refuses; passages that cover
        // the question's words (everyday words aside) are evidence; else what stands out by
        // meaning, else nothing.
        let give_up = || {
            let reason = format!("no_relevant_hits: {}", self.why_refused(ctx, &sufficiency));
            // The subject's words are in no passage: only a passage whose meaning stands out
            // (a multilingual model finding it in another language) is shown, never one that
            // merely shares the other words.
            if !self.unknown_nouns.is_empty() {
                return self
                    .standout_evidence(ctx)
                    .unwrap_or(PlannerAction::GiveUp { reason });
            }
            let evidence = (sufficiency.coverage >= EVIDENCE_COVERAGE)
                .then(|| self.evidence(ctx, "evidence: no passage states the answer".to_string()))
                .flatten()
                .or_else(|| self.standout_evidence(ctx));
            evidence.unwrap_or(PlannerAction::GiveUp { reason })
        };
        // A run about to finish answers from a remembered fact when one bears on the question
        // (a subject no chunk names still refuses).
        let remembered = || {
            if !self.unknown_nouns.is_empty() {
                return None;
            }
            self.remembered_answer(ctx)
        };
        let last_had_hits =
            matches!(ctx.rounds.last(), Some(Observation::Hits { hits, .. }) if !hits.is_empty());
        if ctx.answer_only || !new_evidence || (covered && !self.pending_reference(ctx)) {
            if let Some((action, used)) = remembered() {
                return step(action, account(used, self));
            }
            return step(
                if covered && (last_had_hits || ctx.searches_done > 1) {
                    self.answer(ctx)
                } else {
                    give_up()
                },
                account(Vec::new(), self),
            );
        }
        // Once the remembered facts were searched, a row they choose answers: following the
        // references of the passages that name them would only stray.
        if self.remembered.searched_any()
            && let Some((action, used)) = remembered()
        {
            return step(action, account(used, self));
        }
        match self.next_keywords(ctx) {
            Some((keywords, reason)) => step(
                PlannerAction::Search {
                    keywords,
                    reason,
                    top_k: None,
                    query: None,
                    lexical: false,
                },
                None,
            ),
            None => match remembered() {
                Some((action, used)) => step(action, account(used, self)),
                None if covered => step(self.answer(ctx), account(Vec::new(), self)),
                None => step(give_up(), account(Vec::new(), self)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // An abbreviation's stop before a lowercase word ends none.
        assert_eq!(
            sentences(
                "Paid when internet service (i.e. the data plan) is out. Wifi on a plane is."
            ),
            [
                "Paid when internet service (i.e. the data plan) is out.",
                "Wifi on a plane is."
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
