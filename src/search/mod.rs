//! `searchDocs`: the one retrieval tool the agent calls. Runs the BM25 leg (and the vector leg,
//! when the store has vectors) under the operator's access context, fuses them, and returns
//! [`SearchHit`]s with snippets and per-leg ranks in their metadata.

pub mod snippet;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::access::AccessContext;

/// One result of `searchDocs`, exactly as the planner (and the trace) sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub chunk_id: String,
    pub title_path: String,
    pub snippet: String,
    pub source_uri: String,
    pub score: f64,
    pub metadata: BTreeMap<String, String>,
}

/// Upper bound on `topK` whatever the caller asks.
pub const MAX_TOP_K: usize = 50;
/// How many candidates each leg contributes before fusion.
pub const DEFAULT_CANDIDATES: usize = 100;

/// A `searchDocs` call.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub keywords: Vec<String>,
    pub top_k: usize,
    pub access: AccessContext,
    pub include_superseded: bool,
}

impl SearchRequest {
    pub fn new(keywords: Vec<String>, top_k: usize, access: AccessContext) -> Self {
        Self {
            keywords,
            top_k,
            access,
            include_superseded: false,
        }
    }
}

/// Counts and latency of one leg.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegStats {
    pub count: u32,
    pub latency_ms: f64,
}

/// The hits of a `searchDocs` call and how they were found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResponse {
    pub hits: Vec<SearchHit>,
    /// Content hash of each hit's chunk, in hit order (the trace records them).
    pub content_hashes: Vec<String>,
    pub legs: BTreeMap<String, LegStats>,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    #[error("no keywords to search: give one or more words")]
    NoKeywords,
}
