//! The outcome as one JSON object: what `ask --json` prints, what `/v1/ask` returns and what
//! its event stream's `outcome` event carries. `AgentOutcome` serialises through it
//! (`#[serde(into)]`); with the `openapi` feature the same types describe themselves to the
//! server's `/openapi.json`.

use serde::Serialize;

use super::{AgentOutcome, ModelCall, ModelUsage, RoundRecord};
use crate::trace::{Citation, RunStatus};

/// The outcome of a run as `ragtrail ask --json` prints it and `POST /v1/ask` returns it; with
/// `Accept: text/event-stream`, the data of the stream's last event (`outcome`), after one
/// `round` event per round (each a `Round`). Built from an `AgentOutcome`: the answer's text
/// (or what the run says when it has none) beside its citations, the model calls added up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AskOutcome {
    /// The run's id (a UUID), as its trace and `/v1/traces` name it.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub run_id: uuid::Uuid,
    /// answered, evidence, insufficient_evidence or error.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub status: RunStatus,
    /// Why the run ended: answered, round_limit, no_relevant_hits, refused_citations, …
    pub reason: String,
    /// The answer, or what the run says when it has none.
    pub answer: Option<String>,
    pub citations: Vec<Citation>,
    pub rounds: Vec<RoundRecord>,
    /// Facts about the asker the model read in the question (`proposeFact`) and the run kept;
    /// remembered only with `ask --remember` or chat's yes. Left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposed_facts: Vec<SaidFact>,
    /// The chat model's turns (latency, tokens), empty with the offline planner.
    pub model_calls: Vec<ModelCall>,
    pub model_usage: ModelUsage,
    /// The planner that ran: offline, llm or reader.
    pub planner: String,
    /// The chat model it called, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The trace file, relative to the working directory of whoever ran it.
    pub trace: Option<String>,
    /// With status `error` only: what failed, in its own words (an index embedded with another
    /// model, an embeddings or chat server that does not answer, a missing model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A fact about the asker, as the question states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SaidFact {
    pub key: String,
    pub value: String,
}

impl From<AgentOutcome> for AskOutcome {
    fn from(o: AgentOutcome) -> Self {
        let model_usage = ModelUsage::of(&o.model_calls);
        let error =
            (o.status == RunStatus::Error).then(|| super::run::error_cause(&o.reason).to_string());
        let (answer, citations) = match o.answer {
            Some(a) => (Some(a.text), a.citations),
            None => (o.message, Vec::new()),
        };
        Self {
            run_id: o.run_id,
            status: o.status,
            reason: o.reason,
            answer,
            citations,
            rounds: o.rounds,
            proposed_facts: (o.proposed_facts.into_iter())
                .map(|(key, value)| SaidFact { key, value })
                .collect(),
            model_calls: o.model_calls,
            model_usage,
            planner: o.planner,
            model: o.model,
            trace: o.trace.map(|t| t.path.display().to_string()),
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::super::{FinalAnswer, ModelCall, RoundRecord};
    use super::*;
    use crate::search::SearchHit;
    use crate::search::sufficiency::Sufficiency;
    use crate::trace::FinishedTrace;

    fn outcome() -> AgentOutcome {
        AgentOutcome {
            run_id: uuid::Uuid::parse_str("01970000-0000-7000-8000-00000000000a").unwrap(),
            status: RunStatus::Answered,
            reason: "answered".to_string(),
            answer: Some(FinalAnswer {
                text: "10 days a year.".to_string(),
                citations: vec![Citation {
                    chunk_id: "leave.md#annual".to_string(),
                    quote: "10 days".to_string(),
                    title_path: "Leave / Annual".to_string(),
                    source_uri: "leave.md#annual".to_string(),
                }],
                unsourced: false,
            }),
            message: None,
            rounds: vec![RoundRecord {
                round: 1,
                keywords: vec!["annual".to_string(), "leave".to_string()],
                reason: "content words".to_string(),
                hits: vec![SearchHit {
                    chunk_id: "leave.md#annual".to_string(),
                    title_path: "Leave / Annual".to_string(),
                    snippet: "10 days".to_string(),
                    source_uri: "leave.md#annual".to_string(),
                    score: 1.0,
                    metadata: BTreeMap::from([("bm25Rank".to_string(), "1".to_string())]),
                }],
                sufficiency: Sufficiency {
                    sufficient: true,
                    reason: "covered".to_string(),
                    coverage: 0.75,
                    union_coverage: 0.75,
                    missing_terms: Vec::new(),
                },
            }],
            keyword_sets_tried: vec![vec!["annual".to_string(), "leave".to_string()]],
            proposed_facts: Vec::new(),
            model_calls: vec![
                ModelCall {
                    turn: 1,
                    latency_ms: 12.5,
                    prompt_tokens: Some(100),
                    completion_tokens: Some(7),
                    retries: 0,
                },
                ModelCall {
                    turn: 2,
                    latency_ms: 2.5,
                    prompt_tokens: None,
                    completion_tokens: None,
                    retries: 1,
                },
            ],
            planner: "llm".to_string(),
            model: Some("small-chat".to_string()),
            trace: Some(FinishedTrace {
                path: "traces/run.jsonl".into(),
                lines: 5,
                final_hash: "ab".repeat(32),
                ledger_seq: 3,
                key_id: None,
            }),
        }
    }

    /// Field for field what `ask --json` and `/v1/ask` have always sent, and the planner and
    /// its model.
    #[test]
    fn an_answered_outcome_is_written_as_before() {
        let value = serde_json::to_value(outcome()).unwrap();
        assert_eq!(
            value,
            json!({
                "runId": "01970000-0000-7000-8000-00000000000a",
                "status": "answered",
                "reason": "answered",
                "answer": "10 days a year.",
                "citations": [{"chunkId": "leave.md#annual", "quote": "10 days",
                    "titlePath": "Leave / Annual", "sourceUri": "leave.md#annual"}],
                "rounds": [{
                    "round": 1,
                    "keywords": ["annual", "leave"],
                    "reason": "content words",
                    "hits": [{"chunkId": "leave.md#annual", "titlePath": "Leave / Annual",
                        "snippet": "10 days", "sourceUri": "leave.md#annual", "score": 1.0,
                        "metadata": {"bm25Rank": "1"}}],
                    "sufficiency": {"sufficient": true, "reason": "covered", "coverage": 0.75,
                        "unionCoverage": 0.75},
                }],
                "modelCalls": [
                    {"turn": 1, "latencyMs": 12.5, "promptTokens": 100, "completionTokens": 7,
                        "retries": 0},
                    {"turn": 2, "latencyMs": 2.5, "promptTokens": null, "completionTokens": null,
                        "retries": 1},
                ],
                "modelUsage": {"calls": 2, "promptTokens": 100, "completionTokens": 7,
                    "callsWithoutUsage": 1, "latencyMs": 15.0},
                "planner": "llm",
                "model": "small-chat",
                "trace": "traces/run.jsonl",
            })
        );
    }

    /// Without an answer, `answer` carries the run's message and `citations` is empty.
    #[test]
    fn an_outcome_without_an_answer_sends_its_message() {
        let mut o = outcome();
        o.status = RunStatus::InsufficientEvidence;
        o.answer = None;
        o.message = Some("not enough evidence".to_string());
        o.model_calls.clear();
        o.trace = None;
        let value = serde_json::to_value(&o).unwrap();
        assert_eq!(value["status"], "insufficient_evidence");
        assert_eq!(value["answer"], "not enough evidence");
        assert_eq!(value["citations"], json!([]));
        assert_eq!(value["trace"], json!(null));
        assert_eq!(
            value["modelUsage"],
            json!({"calls": 0, "promptTokens": null, "completionTokens": null,
                "callsWithoutUsage": 0, "latencyMs": 0.0})
        );
        o.message = None;
        assert_eq!(serde_json::to_value(&o).unwrap()["answer"], json!(null));
    }
}
