//! ragtrail: agentic retrieval over policy documents with an audit trail.
//!
//! The flow is `knowledge` (read and chunk documents) → `store` (system of record for chunks and
//! vectors) + `index` (tantivy BM25, derived from the store) → `search` (`searchDocs`: both legs,
//! fused) → `agent` (rounds of keywords) → `trace` (hash-chained JSONL of every step).

pub mod access;
pub mod agent;
pub mod embed;
pub mod engine;
pub mod eval;
pub mod http;
pub mod index;
pub mod knowledge;
pub mod llm;
pub mod review;
pub mod search;
pub mod seeded;
pub mod session;
pub mod store;
pub mod text;
pub mod trace;
