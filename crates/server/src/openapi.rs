//! The shapes of the answers, for `/openapi.json` ([`crate::spec`]). The answers are the
//! engine's JSON (`search --json`, `ask --json`, `audit --json`…); the engine knows nothing of
//! HTTP or OpenAPI, so their schemas are described here, and a test checks that every field a
//! real answer carries is described. Below the handlers, which name these in their
//! `#[utoipa::path]` attributes.

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::ToSchema;

/// An error answer: `{"error": {"code", "message", "field"}}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    error: ErrorDetail,
}

/// One error; `code` never changes once published.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// A stable code: unauthorized, body_too_large, body_timeout, malformed_json,
    /// unknown_field, missing_field, invalid_field, out_of_range, access_in_request,
    /// invalid_keywords, invalid_question, invalid_run_id, not_found, access_mismatch,
    /// integrity_failure, not_ready, host_not_allowed, internal.
    code: String,
    message: String,
    /// The request field at fault, as a JSON path (`topK`, `keywords[2]`).
    field: Option<String>,
}

/// `GET /healthz`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Health {
    /// `ok`
    status: String,
}

/// `GET /readyz`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Ready {
    /// `ready`
    status: String,
    /// Chunks the caller's token may search; absent without a token.
    chunks: Option<usize>,
    /// The knowledge base's generation requests answer from (the embedded store's, or the
    /// database's data version).
    generation: u64,
}

/// One hit of `searchDocs`, as `ragtrail search --json` prints it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct SearchHit {
    chunk_id: String,
    /// The headings from the document title down to the chunk, joined by ` / `.
    title_path: String,
    snippet: String,
    /// The document's path and anchor (`leave.md#annual-leave`, `rooms.pdf#page=2`).
    source_uri: String,
    /// The fused score, 1.0 for the best hit.
    score: f64,
    /// The chunk's content hash (SHA-256), as recorded in traces.
    content_hash: String,
    /// Which leg found it and how (bm25Rank, bm25Score, vectorRank, vectorScore,
    /// matchedKeywords), and the document's front matter (tenant, status, version, updated…).
    metadata: BTreeMap<String, String>,
}

/// A citation of an answer: a verbatim quote from one chunk the run was shown.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct Citation {
    chunk_id: String,
    quote: String,
    title_path: String,
    source_uri: String,
}

/// One search round of a run.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Round {
    round: u32,
    keywords: Vec<String>,
    /// Why the planner searched these keywords.
    reason: String,
    hits: Vec<SearchHit>,
    /// Whether the hits cover the question's key terms (coverage, reason, sufficient).
    #[schema(value_type = Object)]
    sufficiency: Value,
}

/// The outcome of `POST /v1/ask`, as `ragtrail ask --json` prints it; with `Accept:
/// text/event-stream`, the data of the stream's last event (`outcome`), after one `round`
/// event per round (each a [`Round`]).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AskOutcome {
    run_id: String,
    /// answered, evidence, insufficient_evidence or error.
    status: String,
    reason: String,
    /// The answer, or what the run says when it has none.
    answer: Option<String>,
    citations: Vec<Citation>,
    rounds: Vec<Round>,
    /// The chat model's turns (latency, tokens), empty with the offline planner.
    #[schema(value_type = Vec<Object>)]
    model_calls: Vec<Value>,
    #[schema(value_type = Object)]
    model_usage: Value,
    /// The trace file, relative to the server's working directory.
    trace: Option<String>,
}

/// One run as listed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct RunSummary {
    run_id: String,
    /// The trace's file name.
    file: String,
    /// When its first line was written (RFC 3339).
    started: Option<String>,
    question: String,
    /// answered, evidence, insufficient_evidence, error; null while unfinished.
    status: Option<String>,
    reason: String,
    rounds: u32,
    answer: Option<String>,
    /// The tenant and roles the run was made under.
    #[schema(value_type = Object)]
    access: Value,
    /// The name of the token that started it.
    caller: Option<String>,
    session_id: Option<String>,
    turn: Option<u32>,
}

/// `GET /v1/traces`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RunList {
    runs: Vec<RunSummary>,
}

/// The integrity verdict of a trace: its hash chain and the ledger's record of it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct Integrity {
    /// clean, findings or integrity_failure.
    status: String,
    first_bad_line: Option<u64>,
    problems: Vec<String>,
}

/// `GET /v1/traces/{runId}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TraceDetail {
    run: RunSummary,
    integrity: Integrity,
    /// Every line of the trace as written (docs/trace-format.md).
    #[schema(value_type = Vec<Object>)]
    events: Vec<Value>,
}

/// `GET /v1/traces/{runId}/audit`: which evidence produced the answer and whether it still
/// stands, as `ragtrail audit --json` prints it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct AuditReport {
    run_id: String,
    question: String,
    status: String,
    answer: Option<String>,
    integrity: Integrity,
    /// Each citation: where the run found it, whether its quote is in the chunk, the chunk's
    /// state in today's store.
    #[schema(value_type = Vec<Object>)]
    citations: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    rounds: Vec<Value>,
    /// Problems (the audit's exit status 1).
    findings: Vec<String>,
    notes: Vec<String>,
    #[schema(value_type = Object)]
    decision: Value,
    /// The verdict `ragtrail audit` ends with: clean, findings, integrity failure, integrity
    /// failure (invalid signature). When the server holds public keys, the report also has
    /// `signature: {state, detail}` (valid, invalid, unsigned, key not at hand, not checked).
    result: String,
    /// `ragtrail audit`'s exit status for this verdict: 0, 1 or 3.
    exit_code: i32,
}

/// `POST /v1/traces/{runId}/replay`: the recorded searches against today's index, as
/// `ragtrail replay --json` prints it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct ReplayReport {
    run_id: String,
    question: String,
    /// Whether today's index returns what the run was shown.
    reproduced: bool,
    /// Per round: verdict (identical, reordered, differs), missing, new and moved hits, and
    /// drift (recordedText beside currentText).
    #[schema(value_type = Vec<Object>)]
    rounds: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    citations: Vec<Value>,
    /// Cited chunks whose content changed or that are gone.
    #[schema(value_type = Vec<Object>)]
    cited_drift: Vec<Value>,
}
