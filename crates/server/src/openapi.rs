//! The shapes of the answers, for `/openapi.json` ([`crate::spec`]). The types that write an
//! answer describe it themselves, re-exported here: the engine's (its `openapi` feature derives
//! utoipa's `ToSchema` on them: a run's outcome, its rounds, hits, citations and model calls, a
//! run as listed, a trace's integrity) and the server's error body. What remains below are the
//! answers still built as `json!` (health, readiness, the run list and a trace's detail
//! wrap the types above) and the engine's audit and replay reports, described in part; a test
//! checks them against real answers. Below the handlers, which name these in their
//! `#[utoipa::path]` attributes.

use serde_json::Value;
use utoipa::ToSchema;

pub use crate::error::{ErrorBody, ErrorDetail};
pub use ragtrail::SearchHit;
pub use ragtrail::Sufficiency;
pub use ragtrail::review::runs::RunSummary;
pub use ragtrail::trace::{Citation, Integrity};
pub use ragtrail::{AskOutcome, ModelCall, ModelUsage, RoundRecord, SaidFact};

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

/// One remembered fact (`/v1/memory`), as `ragtrail memory list --json` prints it.
#[derive(ToSchema)]
#[schema(as = Fact)]
#[allow(dead_code)]
pub struct FactSchema {
    key: String,
    value: String,
    /// `{"kind": "asker"}` (set by the asker) or `{"kind": "said", "runId": …}` (said in
    /// that run's question).
    #[schema(value_type = Object)]
    source: Value,
    /// When it was set, RFC 3339 UTC.
    #[schema(rename = "setAt")]
    set_at: String,
}

/// `GET /v1/traces`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RunList {
    runs: Vec<RunSummary>,
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
