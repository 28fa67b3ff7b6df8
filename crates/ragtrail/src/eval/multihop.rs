//! Multi-round retrieval on a multi-hop set (BEIR layout, every relevant document needed, e.g.
//! HotpotQA's two gold paragraphs): does the agent see *all* of a question's relevant
//! documents within N rounds? *Joint recall* after round r is the share of questions whose
//! relevant documents all appeared among the hits of rounds 1..=r (a run that stopped earlier
//! keeps what it had). A single search of the whole question, as deep as all rounds together,
//! is reported beside it: more rounds must beat simply asking for more hits.

use std::collections::HashSet;

use serde::Serialize;

use super::metrics::Judgments;
use super::retrieval::{BeirSet, ChunkMap, EvalError, judged_queries};
use crate::agent::{self, Planner, RunSettings};
use crate::engine::{Engine, EngineError};
use crate::search::{SearchError, SearchRequest};

/// One question.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MultihopItem {
    pub query_id: String,
    pub question: String,
    /// The relevant documents, sorted.
    pub gold: Vec<String>,
    /// Relevant documents seen after round 1, 2, … (cumulative; one entry per allowed round).
    pub gold_seen_by_round: Vec<usize>,
    /// Relevant documents among the hits of one search of the whole question, as deep as all
    /// rounds together.
    pub gold_seen_single_search: usize,
    pub rounds: u32,
    pub status: String,
    /// Keywords of each round.
    pub keywords: Vec<Vec<String>>,
    pub trace: Option<String>,
}

/// Totals.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MultihopReport {
    pub dataset: String,
    pub split: String,
    pub questions: usize,
    pub max_rounds: u32,
    pub top_k_per_round: u32,
    /// Share of questions with every relevant document seen after round 1, 2, ….
    pub joint_recall_by_round: Vec<f64>,
    /// Share of questions with at least one relevant document seen after round 1, 2, ….
    pub any_recall_by_round: Vec<f64>,
    /// Mean share of each question's relevant documents seen after round 1, 2, ….
    pub gold_recall_by_round: Vec<f64>,
    /// Joint recall of one search of the question, `max_rounds × top_k_per_round` hits.
    pub joint_recall_single_search: f64,
    pub mean_rounds: f64,
    pub items: Vec<MultihopItem>,
}

/// Runs the agent on every judged question of `set` (the engine holds the corpus, ingested
/// with [`super::retrieval::ingest`], which gave `map`).
pub fn evaluate(
    engine: &Engine,
    map: &ChunkMap,
    set: &BeirSet,
    settings: &RunSettings,
    make_planner: &mut dyn FnMut() -> Box<dyn Planner>,
) -> Result<MultihopReport, EvalError> {
    let options = settings.options.clamped();
    let rounds = options.max_search_rounds as usize;
    let judged = judged_queries(set);
    let mut items = Vec::with_capacity(judged.queries.len());
    for (q, judgments) in &judged.queries {
        let gold = relevant(judgments);
        let mut planner = make_planner();
        let outcome = agent::run(engine, planner.as_mut(), &q.text, settings, &mut |_| {})?;
        let mut seen: HashSet<&str> = HashSet::new();
        let mut by_round = Vec::with_capacity(rounds);
        for r in 1..=rounds as u32 {
            for record in outcome.rounds.iter().filter(|x| x.round == r) {
                seen.extend(
                    record
                        .hits
                        .iter()
                        .filter_map(|h| map.get(&h.chunk_id))
                        .map(String::as_str),
                );
            }
            by_round.push(gold.iter().filter(|g| seen.contains(g.as_str())).count());
        }
        let single = single_search(
            engine,
            map,
            &q.text,
            rounds * options.top_k_per_round as usize,
            settings,
        )?;
        let gold_seen_single_search = gold.iter().filter(|g| single.contains(*g)).count();
        items.push(MultihopItem {
            query_id: q.id.clone(),
            question: q.text.clone(),
            gold,
            gold_seen_by_round: by_round,
            gold_seen_single_search,
            rounds: outcome.rounds.len() as u32,
            status: serde_json::to_value(outcome.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            keywords: outcome.rounds.iter().map(|r| r.keywords.clone()).collect(),
            trace: outcome.trace.as_ref().map(|t| t.path.display().to_string()),
        });
    }
    let n = items.len().max(1) as f64;
    let share = |f: &dyn Fn(&MultihopItem) -> f64| items.iter().map(f).sum::<f64>() / n;
    let by_round = |f: &dyn Fn(&MultihopItem, usize) -> f64| -> Vec<f64> {
        (0..rounds).map(|r| share(&|i| f(i, r))).collect()
    };
    Ok(MultihopReport {
        dataset: set.name.clone(),
        split: set.split.clone(),
        questions: items.len(),
        max_rounds: options.max_search_rounds,
        top_k_per_round: options.top_k_per_round,
        joint_recall_by_round: by_round(&|i, r| flag(i.gold_seen_by_round[r] == i.gold.len())),
        any_recall_by_round: by_round(&|i, r| flag(i.gold_seen_by_round[r] > 0)),
        gold_recall_by_round: by_round(&|i, r| {
            i.gold_seen_by_round[r] as f64 / i.gold.len().max(1) as f64
        }),
        joint_recall_single_search: share(&|i| flag(i.gold_seen_single_search == i.gold.len())),
        mean_rounds: share(&|i| f64::from(i.rounds)),
        items,
    })
}

fn flag(b: bool) -> f64 {
    f64::from(u8::from(b))
}

fn relevant(judgments: &Judgments) -> Vec<String> {
    let mut gold: Vec<String> = judgments
        .iter()
        .filter(|(_, g)| **g >= 1)
        .map(|(d, _)| d.clone())
        .collect();
    gold.sort();
    gold
}

/// BEIR ids of one `searchDocs` call with the whole question as one keyword (the engine's
/// default fusion, as the agent's searches use).
fn single_search(
    engine: &Engine,
    map: &ChunkMap,
    question: &str,
    top_k: usize,
    settings: &RunSettings,
) -> Result<HashSet<String>, EvalError> {
    let req = SearchRequest::new(
        super::retrieval::query_keywords(question),
        top_k,
        settings.access.clone(),
    );
    match engine.search_docs(&req) {
        Ok(resp) => Ok(resp
            .hits
            .iter()
            .filter_map(|h| map.get(&h.chunk_id).cloned())
            .collect()),
        Err(EngineError::Search(SearchError::NoKeywords)) => Ok(HashSet::new()),
        Err(e) => Err(e.into()),
    }
}
