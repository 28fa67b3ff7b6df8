//! The integration tests, one binary (as ripgrep does): every file here is a module, `common/`
//! holds what they share. Each links the engine once instead of once per file.

mod common;

mod adversarial;
mod agent;
mod cli_embedder;
mod conversation;
mod eval_agent;
mod eval_retrieval;
mod golden_set;
mod http_embed;
mod ingest_search;
mod llm_planner;
mod local_model;
mod outcomes;
mod postgres;
mod replay_audit;
