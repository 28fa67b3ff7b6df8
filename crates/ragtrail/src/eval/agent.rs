//! Agent evaluation on a golden set: does the run see the expected sections, cite them, state
//! the facts, and refuse what the knowledge base cannot answer?

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::golden::GoldenItem;
use crate::agent::{self, AgentError, Planner, RunSettings};
use crate::engine::Engine;

/// One evaluated question.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    pub id: String,
    /// The question's language, as the set gives it (`zh`, `en`).
    pub lang: String,
    pub answerable: bool,
    pub status: String,
    pub rounds: u32,
    /// Share of expected sections seen after round 1, 2, 3 (cumulative).
    pub recall_by_round: [f64; 3],
    pub recall: f64,
    /// Cited chunks whose section is expected, over all cited chunks (None: nothing cited).
    pub citation_precision: Option<f64>,
    /// Facts found verbatim in the answer, over all facts (None: no facts).
    pub facts_found: Option<f64>,
    /// Passages cited (an answer's or the evidence's).
    pub passages: usize,
    /// Whether a cited passage is in an expected section.
    pub cites_expected: bool,
    pub latency_ms: f64,
    /// The run's model calls added up (no calls with the offline planner).
    pub model_usage: agent::ModelUsage,
    pub trace: Option<String>,
}

/// Totals over a golden set.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReport {
    pub answerable: usize,
    pub unanswerable: usize,
    pub evidence_recall: f64,
    pub evidence_recall_by_round: [f64; 3],
    pub citation_precision: f64,
    pub facts_found: f64,
    pub answered_answerable: f64,
    /// Answerable questions given as evidence (passages to read, not an answer).
    pub evidence_answerable: f64,
    /// Answerable questions answered or given as evidence with an expected section cited.
    pub cited_answerable: f64,
    pub refused_unanswerable: f64,
    /// Unanswerable questions given as evidence: not refused, but not answered either.
    pub evidence_unanswerable: f64,
    /// Useful replies per language of the question (answerable questions only).
    pub useful_by_lang: BTreeMap<String, LangShare>,
    /// Answers (status answered, exit 0), to answerable and unanswerable questions alike.
    pub answers: usize,
    /// Answers that quote no expected section (every answer to an unanswerable question).
    pub wrong_answers: usize,
    /// Unanswerable questions answered.
    pub unanswerable_answered: usize,
    pub mean_rounds: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    /// Model calls, prompt and completion tokens, and seconds of model time per question
    /// (means over every question; tokens over the calls whose server reported them).
    pub model_calls_per_question: f64,
    pub prompt_tokens_per_question: f64,
    pub completion_tokens_per_question: f64,
    pub model_seconds_per_question: f64,
    pub items: Vec<ItemResult>,
}

/// The share of one language's answerable questions that got a useful reply.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LangShare {
    pub useful: f64,
    pub of: usize,
}

impl ItemResult {
    /// A reply a person can act on: an answer quoting an expected section, or evidence quoting
    /// one among at most [`MAX_USEFUL_PASSAGES`] passages (more is a search result, not a reply).
    pub fn useful(&self) -> bool {
        self.answerable
            && self.cites_expected
            && match self.status.as_str() {
                "answered" => true,
                "evidence" => self.passages <= MAX_USEFUL_PASSAGES,
                _ => false,
            }
    }

    /// An answer (exit 0) that quotes no expected section.
    pub fn wrong_answer(&self) -> bool {
        self.status == "answered" && !self.cites_expected
    }
}

/// Evidence with more passages than this is not counted as a useful reply.
pub const MAX_USEFUL_PASSAGES: usize = 3;

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// The share of `items` for which `pred` holds (0 for none).
fn share(items: &[&ItemResult], pred: impl Fn(&ItemResult) -> bool) -> f64 {
    mean(items.iter().map(|r| f64::from(u8::from(pred(r)))))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the agent on the first turn of every item (later turns of a conversation need the
/// session memory of `ragtrail chat`). `make_planner` gives a fresh planner per question.
pub fn evaluate(
    engine: &Engine,
    items: &[GoldenItem],
    settings: &RunSettings,
    make_planner: &mut dyn FnMut() -> Box<dyn Planner>,
) -> Result<AgentReport, AgentError> {
    let mut results = Vec::new();
    for item in items {
        let turn = &item.turns[0];
        let mut planner = make_planner();
        let started = Instant::now();
        let outcome = agent::run(
            engine,
            planner.as_mut(),
            &turn.question,
            settings,
            &mut |_| {},
        )?;
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        let seen_by = |round: u32| -> f64 {
            if turn.expected.is_empty() {
                return 0.0;
            }
            let seen = turn
                .expected
                .iter()
                .filter(|p| {
                    outcome
                        .rounds
                        .iter()
                        .filter(|r| r.round <= round)
                        .flat_map(|r| &r.hits)
                        .any(|h| &h.title_path == *p)
                })
                .count();
            seen as f64 / turn.expected.len() as f64
        };
        let citations = outcome
            .answer
            .as_ref()
            .map(|a| a.citations.as_slice())
            .unwrap_or(&[]);
        let citation_precision = (!citations.is_empty()).then(|| {
            citations
                .iter()
                .filter(|c| turn.expected.contains(&c.title_path))
                .count() as f64
                / citations.len() as f64
        });
        let answer_text = outcome
            .answer
            .as_ref()
            .map(|a| a.text.as_str())
            .unwrap_or("");
        let facts_found = (!turn.facts.is_empty()).then(|| {
            turn.facts
                .iter()
                .filter(|f| answer_text.contains(f.as_str()))
                .count() as f64
                / turn.facts.len() as f64
        });
        results.push(ItemResult {
            id: item.id.clone(),
            lang: item.lang.clone(),
            answerable: item.answerable,
            status: serde_json::to_value(outcome.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            rounds: outcome.rounds.len() as u32,
            recall_by_round: [seen_by(1), seen_by(2), seen_by(3)],
            recall: seen_by(u32::MAX),
            citation_precision,
            facts_found,
            passages: citations.len(),
            cites_expected: citations
                .iter()
                .any(|c| turn.expected.contains(&c.title_path)),
            latency_ms,
            model_usage: agent::ModelUsage::of(&outcome.model_calls),
            trace: outcome.trace.as_ref().map(|t| t.path.display().to_string()),
        });
    }
    let ans: Vec<&ItemResult> = results.iter().filter(|r| r.answerable).collect();
    let unans: Vec<&ItemResult> = results.iter().filter(|r| !r.answerable).collect();
    let mut useful_by_lang: BTreeMap<String, LangShare> = BTreeMap::new();
    for lang in ans.iter().map(|r| r.lang.clone()) {
        let of_lang: Vec<&ItemResult> = ans.iter().copied().filter(|r| r.lang == lang).collect();
        useful_by_lang.insert(
            lang,
            LangShare {
                useful: share(&of_lang, ItemResult::useful),
                of: of_lang.len(),
            },
        );
    }
    let mut lat: Vec<f64> = results.iter().map(|r| r.latency_ms).collect();
    lat.sort_by(f64::total_cmp);
    Ok(AgentReport {
        answerable: ans.len(),
        unanswerable: unans.len(),
        evidence_recall: mean(ans.iter().map(|r| r.recall)),
        evidence_recall_by_round: [0, 1, 2].map(|i| mean(ans.iter().map(|r| r.recall_by_round[i]))),
        citation_precision: mean(ans.iter().filter_map(|r| r.citation_precision)),
        facts_found: mean(ans.iter().filter_map(|r| {
            r.facts_found
                .map(|f| if r.status == "answered" { f } else { 0.0 })
        })),
        answered_answerable: share(&ans, |r| r.status == "answered"),
        evidence_answerable: share(&ans, |r| r.status == "evidence"),
        cited_answerable: share(&ans, |r| {
            matches!(r.status.as_str(), "answered" | "evidence")
                && r.citation_precision.is_some_and(|p| p > 0.0)
        }),
        refused_unanswerable: share(&unans, |r| r.status == "insufficient_evidence"),
        evidence_unanswerable: share(&unans, |r| r.status == "evidence"),
        useful_by_lang,
        answers: results.iter().filter(|r| r.status == "answered").count(),
        wrong_answers: results.iter().filter(|r| r.wrong_answer()).count(),
        unanswerable_answered: unans.iter().filter(|r| r.status == "answered").count(),
        mean_rounds: mean(results.iter().map(|r| f64::from(r.rounds))),
        latency_p50_ms: percentile(&lat, 0.5),
        latency_p95_ms: percentile(&lat, 0.95),
        model_calls_per_question: mean(results.iter().map(|r| f64::from(r.model_usage.calls))),
        prompt_tokens_per_question: mean(
            (results.iter()).map(|r| r.model_usage.prompt_tokens.unwrap_or(0) as f64),
        ),
        completion_tokens_per_question: mean(
            (results.iter()).map(|r| r.model_usage.completion_tokens.unwrap_or(0) as f64),
        ),
        model_seconds_per_question: mean(results.iter().map(|r| r.model_usage.latency_ms / 1e3)),
        items: results,
    })
}
