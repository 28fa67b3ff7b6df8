//! The event schema of trace format v1.
//!
//! Payload fields default when absent so that traces written before a field existed keep
//! reading; unknown fields are ignored by the typed parse (the hash still covers them) and
//! unknown event types are kept as [`EventBody::Unknown`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::records::{FactRecord, HitRecord, LegRecord, SufficiencyRecord, WeightsRecord};
use crate::access::AccessContext;

/// The major version this module writes and the newest it reads.
pub const TRACE_VERSION: u32 = 1;

/// One line of a trace: the chain envelope plus the typed payload.
///
/// On disk: `{"v":1,"runId":"<uuid v7>","seq":0,"ts":"2026-11-30T06:25:01.123Z","type":"…",
/// …payload…,"prevHash":"<64 hex>","hash":"<64 hex>"}` in canonical form (keys sorted, no
/// whitespace), one per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceEvent {
    /// Major format version; readers refuse anything newer than [`TRACE_VERSION`].
    pub v: u32,
    /// Same on every line of a trace; also names the file and the ledger entry.
    pub run_id: Uuid,
    /// 0-based line number, so a dropped or reordered line shows as a gap.
    pub seq: u64,
    /// Written as RFC 3339 UTC with milliseconds.
    #[serde(with = "ts_millis")]
    pub ts: DateTime<Utc>,
    /// `hash` of the previous line, or 64 zeros on the first.
    pub prev_hash: String,
    /// SHA-256 or HMAC-SHA-256 (lowercase hex) of the canonical line without `hash`.
    pub hash: String,
    /// The `type` field and the payload, flattened into the same object.
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened, tagged by the `type` field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    /// `run_started`: always the first line.
    RunStarted(RunStarted),
    /// `llm_turn`: one planner decision.
    LlmTurn(LlmTurn),
    /// `search`: one search round and its hits.
    Search(SearchRound),
    /// `answer`: the answer and its citations.
    Answer(AnswerEvent),
    /// `memory_read`: which of the asker's remembered facts the run searched with and used.
    MemoryRead(MemoryRead),
    /// `fact_proposed`: a fact about the asker that the planner read in the question.
    FactProposed(FactProposed),
    /// `run_finished`: always the last line of a complete trace.
    RunFinished(RunFinished),
    /// An event type from a newer minor version: every field except the envelope, `type`
    /// included, kept as read so it can be shown and is still covered by the hash.
    #[serde(untagged)]
    Unknown(Map<String, Value>),
}

impl EventBody {
    /// The `type` string as written in the trace.
    pub fn type_name(&self) -> &str {
        match self {
            EventBody::RunStarted(_) => "run_started",
            EventBody::LlmTurn(_) => "llm_turn",
            EventBody::Search(_) => "search",
            EventBody::Answer(_) => "answer",
            EventBody::MemoryRead(_) => "memory_read",
            EventBody::FactProposed(_) => "fact_proposed",
            EventBody::RunFinished(_) => "run_finished",
            EventBody::Unknown(fields) => fields.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

impl<'de> Deserialize<'de> for EventBody {
    /// Reads `type` first so an unknown type becomes [`EventBody::Unknown`] instead of an error,
    /// while a known type with a broken payload is still reported as malformed.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = Map::<String, Value>::deserialize(deserializer)?;
        let type_name = match fields.get("type") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(D::Error::custom("`type` must be a string")),
            None => return Err(D::Error::missing_field("type")),
        };
        fn typed<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            fields: Map<String, Value>,
        ) -> Result<T, E> {
            serde_json::from_value(Value::Object(fields)).map_err(E::custom)
        }
        Ok(match type_name.as_str() {
            "run_started" => EventBody::RunStarted(typed(fields)?),
            "llm_turn" => EventBody::LlmTurn(typed(fields)?),
            "search" => EventBody::Search(typed(fields)?),
            "answer" => EventBody::Answer(typed(fields)?),
            "memory_read" => EventBody::MemoryRead(typed(fields)?),
            "fact_proposed" => EventBody::FactProposed(typed(fields)?),
            "run_finished" => EventBody::RunFinished(typed(fields)?),
            _ => EventBody::Unknown(fields),
        })
    }
}

/// First line of every trace: everything needed to understand and replay the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    #[serde(default)]
    pub question: String,
    /// The agent's options object, kept as data so new options need no schema change.
    #[serde(default)]
    pub options: Value,
    pub access: AccessContext,
    /// `"offline"` or `"llm"`; a string so a new planner kind needs no format change.
    #[serde(default)]
    pub planner: String,
    /// Chat model of the LLM planner; absent for the offline planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub embedder: EmbedderInfo,
    /// Identifies the index the run searched, so replay can tell when it changed.
    #[serde(default)]
    pub index_fingerprint: String,
    /// Which knowledge base the run searched (`Engine::knowledge_base_id`), so replay against
    /// another one is refused instead of reported as drift. Absent in traces before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub knowledge_base: String,
    /// Crate version that wrote the trace.
    #[serde(default)]
    pub version: String,
    /// The run's notion of today (YYYY-MM-DD), which decides which documents are in force.
    #[serde(default)]
    pub today: String,
    /// Set when the question is one turn of a multi-turn session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// 1-based turn within the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Who started the run when a server granted the access: the name of the caller's token
    /// (never the token itself). Absent for runs started from the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The conversation's earlier turns as the planner was given them, so an audit shows what
    /// a follow-up question was read against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_turns: Vec<EarlierTurn>,
}

/// One earlier turn of the conversation, as recorded at the start of a later one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EarlierTurn {
    pub turn: u32,
    pub question: String,
    /// The grounded answer, or the insufficient-evidence message.
    pub answer: String,
    /// That turn's trace file, when it wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Which embedder produced the vectors the dense leg searched (the store records the same).
pub use crate::embed::EmbedderInfo;

/// One planner decision; enough to replay the run without the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LlmTurn {
    /// 1-based turn of the planner within the run.
    pub turn: u32,
    /// The decision as data (tool calls or the answer), exactly as the agent acted on it.
    pub output: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    pub latency_ms: f64,
    /// Attempts repeated after transport errors or malformed replies.
    pub retries: u32,
    /// Why the model stopped (`stop`, `tool_calls`, `length`…), as its server said; absent
    /// when it did not say, for planners without a model, and in traces before it existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The model's reply as written, when the planner acted on something else than it (the
    /// reader mode keeps it: its answer, or the `NONE` or text the offline reply replaced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Why the model's reply was not used, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How the request fitted the model's context budget, when one is set: what was left out
    /// of what the model saw this turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_fit: Option<ContextFit>,
}

/// How one request to the model was fitted into its context budget: what was sent and what
/// was left out this turn (the model's own earlier replies in the run first, then the oldest
/// search results, then the oldest earlier turns of a conversation). Trimmed hits stay citable: the engine checks citations against every hit the
/// run returned, not against what the model still sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContextFit {
    /// The configured context size, in tokens.
    pub budget_tokens: u32,
    /// Estimated prompt tokens of the request as sent (after trimming).
    pub prompt_tokens_estimate: u32,
    /// Search rounds whose hits were replaced by a short stub in this turn.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trimmed_rounds: Vec<u32>,
    /// The chunk ids of those hits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trimmed_chunks: Vec<String>,
    /// Earlier conversation turns left out in this turn.
    #[serde(skip_serializing_if = "is_zero")]
    pub trimmed_history_turns: u32,
    /// The model's own earlier replies in the run shortened in this turn (prose left out,
    /// long tool arguments cut).
    #[serde(skip_serializing_if = "is_zero")]
    pub trimmed_replies: u32,
    /// Still over the budget with everything trimmable trimmed (sent anyway).
    #[serde(skip_serializing_if = "is_false")]
    pub over_budget: bool,
}

/// Token counts reported by the chat endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TokenUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// One `searchDocs` call and every hit the planner saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SearchRound {
    /// 1-based search round; later rounds refine the keywords.
    pub round: u32,
    pub keywords: Vec<String>,
    /// The planner's stated reason for this search.
    pub reason: String,
    pub top_k: u32,
    /// How the legs' rankings were merged (e.g. `rrf`).
    pub fusion: String,
    /// The weights the fusion gave the legs in this round (min-max modes; absent in traces
    /// written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<WeightsRecord>,
    pub filters: SearchFilters,
    /// Per-leg statistics keyed by leg name (`bm25`, `dense`, ...).
    pub legs: BTreeMap<String, LegRecord>,
    pub hits: Vec<TracedHit>,
    pub sufficiency: SufficiencyRecord,
    /// The same keywords were already searched in this run.
    #[serde(skip_serializing_if = "is_false")]
    pub repeated: bool,
    /// The round whose results were reused instead of searching again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<u32>,
    /// The question text handed to the vector leg with the keywords, when the planner gave one
    /// (used by a semantic embedder; absent in traces written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The planner gave up before any search, for this reason; the loop did not accept that
    /// and ran this search of the question's own words instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overrode_give_up: Option<String>,
}

/// The access filters both legs applied before ranking.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SearchFilters {
    pub tenant: String,
    pub roles: Vec<String>,
    pub include_superseded: bool,
}

/// A hit as the planner saw it, plus the hash of the chunk content so audit can detect drift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TracedHit {
    /// `chunkId`, `titlePath`, `snippet`, `sourceUri`, `score`, `metadata`, at the hit's top level.
    #[serde(flatten)]
    pub hit: HitRecord,
    /// Hash of the chunk's content when it was returned, to compare with the store later.
    #[serde(default)]
    pub content_hash: String,
}

/// What a run did with the asker's remembered facts: written once, before the answer, by a
/// run whose asker had any. Only the facts it used or searched are copied with their values;
/// the others are named by key, so the trace keeps no more of the memory than the run needed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryRead {
    /// The facts that decided the answer, as they were when the run read them (an LLM run:
    /// every fact the model was given).
    pub used: Vec<FactRecord>,
    /// The facts whose values were searched (already in that search's keywords), so a run
    /// planned again searches the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searched: Vec<FactRecord>,
    /// Keys of the facts the question itself stated (it wins over memory for the run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stated: Vec<String>,
    /// Keys of the remembered facts that did not bear on the question.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unused: Vec<String>,
}

/// A fact about the asker that the planner (the model's `proposeFact` tool) read in the
/// question, and whether the run kept it: only a value in the question's own words is kept,
/// and a kept fact is remembered only when the operator asks (`ask --remember`, chat's yes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FactProposed {
    pub key: String,
    pub value: String,
    pub kept: bool,
    /// Why it was not kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The final answer and the evidence it cites.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AnswerEvent {
    pub text: String,
    pub citations: Vec<Citation>,
    pub grounded: bool,
    /// Citations the agent dropped because they did not check out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedCitation>,
    /// A reply the planner declared conversational (greeting, thanks): no evidence behind it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unsourced: bool,
}

/// One cited chunk and the quote taken from it (in traces, and in the outcome of a run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, rename_all = "camelCase")]
pub struct Citation {
    // Read with defaults from a trace, but an answer always sends all four.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub chunk_id: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub quote: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub title_path: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub source_uri: String,
}

/// A citation the agent refused, with why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RefusedCitation {
    pub chunk_id: String,
    pub quote: String,
    pub reason: String,
}

/// Last line of a complete trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFinished {
    /// Serialised as `answered`, `insufficient_evidence` or `error`.
    pub status: RunStatus,
    /// Why the run ended: `answered`, `round_limit`, `no_relevant_hits`, `refused_citations`, ...
    #[serde(default)]
    pub reason: String,
    /// Search rounds the agent ran.
    #[serde(default)]
    pub rounds: u32,
    /// `searchDocs` calls made, cached and repeated ones included.
    #[serde(default)]
    pub searches: u32,
    /// Lines in the trace including this one, so a cut-off tail is visible even without the
    /// ledger.
    #[serde(default)]
    pub lines: u32,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The agent answered with citations.
    Answered,
    /// The agent found passages that bear on the question but could not compose an answer it
    /// can stand behind: they are given as quotes with citations, to read, not as an answer.
    /// The run's answer event carries them in the same shape as an answer's citations.
    Evidence,
    /// The agent stopped without enough evidence to answer.
    InsufficientEvidence,
    /// The run failed (see `reason`).
    Error,
    /// A status written by a newer version; read so such traces still verify, never written.
    #[serde(other)]
    Unknown,
}

impl RunStatus {
    /// The status as people read it in text output (`insufficient evidence`, never the enum's
    /// name); JSON output keeps the serialised name.
    pub fn label(self) -> &'static str {
        match self {
            RunStatus::Answered => "answered",
            RunStatus::Evidence => "evidence, not an answer",
            RunStatus::InsufficientEvidence => "insufficient evidence",
            RunStatus::Error => "error",
            RunStatus::Unknown => "unknown (written by a newer ragtrail)",
        }
    }

    /// The serialised name (`insufficient_evidence`), as JSON output and filters spell it.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Answered => "answered",
            RunStatus::Evidence => "evidence",
            RunStatus::InsufficientEvidence => "insufficient_evidence",
            RunStatus::Error => "error",
            RunStatus::Unknown => "unknown",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `ts` as RFC 3339 UTC with milliseconds on output; any RFC 3339 offset accepted on input.
pub(crate) mod ts_millis {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&ts.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|ts| ts.with_timezone(&Utc))
            .map_err(|e| serde::de::Error::custom(format!("invalid ts {text:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(body: Value) -> Value {
        let mut v = json!({
            "v": 1, "runId": "01970000-0000-7000-8000-000000000000", "seq": 0,
            "ts": "2026-11-30T06:25:01.123Z", "prevHash": "0".repeat(64), "hash": "ab",
        });
        if let (Some(map), Value::Object(body)) = (v.as_object_mut(), body) {
            map.extend(body);
        }
        v
    }

    #[test]
    fn unknown_type_is_kept_raw() {
        let v = envelope(json!({"type": "tool_audit", "x": [1, 2]}));
        let event: TraceEvent = serde_json::from_value(v).unwrap();
        assert_eq!(event.body.type_name(), "tool_audit");
        let EventBody::Unknown(fields) = &event.body else {
            panic!("not unknown: {event:?}")
        };
        assert_eq!(fields.get("x"), Some(&json!([1, 2])));
        // Writing it back reproduces the same fields.
        let back = serde_json::to_value(&event).unwrap();
        assert_eq!(back["type"], json!("tool_audit"));
        assert_eq!(back["x"], json!([1, 2]));
    }

    #[test]
    fn known_type_with_bad_payload_is_an_error() {
        let v = envelope(json!({"type": "run_finished", "status": 7}));
        assert!(serde_json::from_value::<TraceEvent>(v).is_err());
    }

    #[test]
    fn missing_optional_fields_default_and_extra_fields_are_ignored() {
        let v = envelope(json!({"type": "search", "round": 2, "futureField": {"a": 1}}));
        let event: TraceEvent = serde_json::from_value(v).unwrap();
        let EventBody::Search(search) = event.body else {
            panic!("not a search")
        };
        assert_eq!(search.round, 2);
        assert!(search.hits.is_empty());
        assert!(!search.repeated);
        assert_eq!(search.cached, None);
    }

    #[test]
    fn optional_and_default_fields_are_skipped_on_output() {
        let body = EventBody::Search(SearchRound {
            round: 1,
            ..SearchRound::default()
        });
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(v["type"], json!("search"));
        assert!(v.get("repeated").is_none());
        assert!(v.get("cached").is_none());
        let finished = EventBody::RunFinished(RunFinished {
            status: RunStatus::InsufficientEvidence,
            reason: "round_limit".into(),
            rounds: 3,
            searches: 3,
            lines: 9,
        });
        let v = serde_json::to_value(&finished).unwrap();
        assert_eq!(v["status"], json!("insufficient_evidence"));
    }

    #[test]
    fn unknown_status_from_a_newer_version_reads() {
        let v = envelope(json!({"type": "run_finished", "status": "cancelled", "lines": 1}));
        let event: TraceEvent = serde_json::from_value(v).unwrap();
        let EventBody::RunFinished(f) = event.body else {
            panic!("not run_finished")
        };
        assert_eq!(f.status, RunStatus::Unknown);
    }

    #[test]
    fn ts_keeps_millis() {
        let v = envelope(json!({"type": "answer"}));
        let event: TraceEvent = serde_json::from_value(v).unwrap();
        let back = serde_json::to_value(&event).unwrap();
        assert_eq!(back["ts"], json!("2026-11-30T06:25:01.123Z"));
    }
}
