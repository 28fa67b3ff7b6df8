//! The integration tests, one binary (as ripgrep does): every file here is a module, `common/`
//! holds what they share. Each links the engine once instead of once per file.

mod common;

mod adversarial;
mod agent;
mod ask_display;
mod broken_setup;
mod browser;
mod clean_text;
mod cli_embedder;
mod conversation;
mod default_embedder;
mod embed_server;
mod eval_agent;
mod eval_retrieval;
mod evidence_versions;
mod formats;
mod golden_set;
mod honest_outcomes;
mod http_embed;
mod ingest_search;
mod leaks;
mod live_generations;
mod llm_planner;
mod local_model;
mod many_writers;
mod mcp;
mod mcp_http;
mod memory;
mod outcomes;
mod postgres;
mod reader;
mod real_llm;
mod replay_audit;
mod replay_rerun;
mod review_ux;
mod serve_faults;
mod serve_http;
mod serve_openapi;
mod serve_pg;
mod serve_stream;
mod signed_traces;
mod small_leaks;
mod stale_knowledge;
mod telemetry;
