//! The records a `search` event is made of, owned by the trace format.
//!
//! Each field is named explicitly on the wire, so renaming a field of the engine's runtime
//! types (`search::SearchHit`, `LegStats`, `Sufficiency`, `FusionWeights`) cannot change a
//! signed, hash-chained trace: the runtime values are copied into these in `convert.rs`, the
//! one trace module that knows the search module. The names, the defaults for fields that
//! older traces lack and the fields left out when empty are the format of v1
//! (docs/trace-format.md), pinned by `pinned.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A hit as the planner saw it (flattened into a [`TracedHit`](super::TracedHit) beside its
/// content hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitRecord {
    #[serde(rename = "chunkId")]
    pub chunk_id: String,
    #[serde(rename = "titlePath")]
    pub title_path: String,
    #[serde(rename = "snippet")]
    pub snippet: String,
    #[serde(rename = "sourceUri")]
    pub source_uri: String,
    /// The fused score.
    #[serde(rename = "score")]
    pub score: f64,
    /// Ranks and scores per leg, matched keywords, the document's front matter.
    #[serde(rename = "metadata")]
    pub metadata: BTreeMap<String, String>,
}

/// How one retrieval leg did in one search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LegRecord {
    /// Hits the leg returned.
    #[serde(rename = "count")]
    pub count: u32,
    #[serde(rename = "latencyMs")]
    pub latency_ms: f64,
}

/// Whether a search's hits were evidence enough, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SufficiencyRecord {
    #[serde(rename = "sufficient")]
    pub sufficient: bool,
    #[serde(rename = "reason")]
    pub reason: String,
    /// Best IDF-weighted key-term coverage of a single hit, 0..=1.
    #[serde(rename = "coverage")]
    pub coverage: f64,
    /// IDF-weighted share of the key terms found in any hit.
    #[serde(rename = "unionCoverage")]
    pub union_coverage: f64,
    /// Key terms that no hit contains.
    #[serde(rename = "missingTerms", skip_serializing_if = "Vec::is_empty")]
    pub missing_terms: Vec<String>,
}

/// The weights a min-max-style fusion gave the legs in one search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WeightsRecord {
    /// BM25's weight; the vector leg's is `1 - bm25`.
    #[serde(rename = "bm25")]
    pub bm25: f64,
    /// The lexical confidence the weight was derived from (`confidence` fusion).
    #[serde(
        rename = "lexicalConfidence",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub lexical_confidence: Option<f64>,
}

/// One remembered fact of the asker as a run used it (a `memory_read` event), copied from the
/// memory when the run read it: a later change or `forget` does not change the trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactRecord {
    #[serde(rename = "key")]
    pub key: String,
    #[serde(rename = "value")]
    pub value: String,
    /// `asker` (set by the asker) or `run:<runId>` (said in that run's question).
    #[serde(rename = "source")]
    pub source: String,
    /// When the fact was set, RFC 3339 UTC.
    #[serde(rename = "setAt")]
    pub set_at: String,
}
