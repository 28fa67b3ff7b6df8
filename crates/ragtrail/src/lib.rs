//! ragtrail: agentic retrieval over policy documents with an audit trail.
//!
//! The flow is `knowledge` (read and chunk documents) → `store` (system of record for chunks and
//! vectors) + `index` (tantivy BM25, derived from the store) → `search` (`searchDocs`: both legs,
//! fused) → `agent` (rounds of keywords) → `trace` (hash-chained JSONL of every step) → `review`
//! (replay and audit of a finished run).
//!
//! A program embedding the engine needs only the names re-exported here: open an [`Engine`] on
//! a data directory, [`Engine::ingest`] a knowledge folder, then search it with
//! [`Engine::search_docs`] under an [`AccessContext`], or answer a question with
//! [`run_agent`] and a [`Planner`]; every run writes a trace that [`check_integrity`],
//! [`replay()`] and [`audit()`] read back.
//!
//! ```
//! use ragtrail::{AccessContext, Engine, IngestOptions, SearchRequest};
//!
//! let dir = tempfile::tempdir()?;
//! let knowledge = dir.path().join("knowledge");
//! std::fs::create_dir_all(&knowledge)?;
//! std::fs::write(
//!     knowledge.join("travel.md"),
//!     "# Travel policy\n\n## Hotels\n\nHotel receipts must show the nightly rate.\n",
//! )?;
//!
//! let mut engine = Engine::open(&dir.path().join("data"))?;
//! let summary = engine.ingest(&knowledge, &IngestOptions::default(), &mut |_| {})?;
//! assert_eq!(summary.added, ["travel.md"]);
//!
//! let request = SearchRequest::new(
//!     vec!["hotel".into(), "receipts".into()],
//!     5,
//!     AccessContext::default(),
//! );
//! let response = engine.search_docs(&request)?;
//! assert_eq!(response.hits[0].title_path, "Travel policy / Hotels");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod access;
mod agent;
mod embed;
mod engine;
pub mod eval;
mod http;
mod index;
mod knowledge;
mod llm;
mod memory;
pub mod review;
mod search;
mod seeded;
mod session;
mod store;
mod telemetry;
mod text;
pub mod trace;

// The front door: the nouns a program embedding the engine uses, by job.

/// Who is asking: one tenant and the roles the operator granted; every search and run is
/// limited to what it may see.
pub use access::AccessContext;

/// Facts an asker states about themselves in a question ("我是B类员工", "I'm based in
/// Singapore"), for `--remember`.
pub use memory::learn::facts_stated as facts_stated_in;
/// Long-term memory of the asker: facts (grade, base city…) kept per tenant and user, with
/// where each came from ([`MemoryStore`] in the data directory, owner-only, written atomically).
pub use memory::{Asker, Fact, FactSource, MemoryError, MemoryStore, same_key};

/// One knowledge base (a data directory, or PostgreSQL): open, ingest, search.
pub use engine::Engine;
/// Why opening, ingesting or searching a knowledge base failed.
pub use engine::EngineError;
/// How [`Engine::ingest`] reads a knowledge folder (scan rules, rebuild, kept versions).
pub use engine::IngestOptions;
/// Progress of a long [`Engine::ingest`], for a progress bar.
pub use engine::IngestProgress;
/// What an [`Engine::ingest`] changed: documents added, changed, removed, skipped.
pub use engine::IngestSummary;
/// What a knowledge base holds ([`Engine::status`]), and why it could not be read.
pub use engine::status::{Status, StatusError};

/// Which embedder to make, and its settings; [`embedder_from_config`] makes it.
pub use embed::EmbedConfig;
/// Computes the vectors of the second search leg (hashing, HTTP endpoint, local model).
pub use embed::Embedder;
/// Makes the embedder an [`EmbedConfig`] describes.
pub use embed::from_config as embedder_from_config;

/// Why a `searchDocs` call was refused or failed.
pub use search::SearchError;
/// One result of `searchDocs`: chunk id, titlePath, snippet, source, score.
pub use search::SearchHit;
/// One `searchDocs` call: keywords, topK, access context, fusion.
pub use search::SearchRequest;
/// What `searchDocs` returned: the hits and what the legs and fusion did.
pub use search::SearchResponse;
/// The engine's tuning of `searchDocs` (fusion, candidates, boosts, thresholds).
pub use search::SearchSettings;
/// One caller's searches ([`Engine::searcher`]): `searchDocs` as named stages, each hit with
/// the chunk it was read from.
pub use search::Searcher;
/// Fusion as pure functions: two legs' ranked hits in, one fused ranking out.
pub use search::fusion;
/// How the BM25 and vector legs are combined (`agree:0.5`, `standout`, `rrf`…).
pub use search::fusion::Fusion;
/// Whether the hits of a search are enough to answer from, and why.
pub use search::sufficiency::Sufficiency;

/// Why a run failed.
pub use agent::AgentError;
/// What a run ended with: status, answer and citations, rounds, trace.
pub use agent::AgentOutcome;
/// The options a caller may set per run (rounds, topK per round…).
pub use agent::AgentRagOptions;
/// The JSON shape of an [`AgentOutcome`], as `ask --json` and `POST /v1/ask` answer it.
pub use agent::AskOutcome;
/// Plans the agent's rounds: keywords to search, then an answer with citations or a refusal.
pub use agent::Planner;
/// One run's options, access context, date, trace and conversation.
pub use agent::RunSettings;
/// A fact about the asker as a question states it (`proposedFacts` of an [`AskOutcome`]).
pub use agent::SaidFact;
/// Where and how a run's trace is written (directory, keys).
pub use agent::TraceSettings;
/// The cause of a run that ended with status `error`, from its reason (`search_error: CAUSE`).
pub use agent::error_cause;
/// The planner that asks an OpenAI-compatible chat model.
pub use agent::llm::LlmPlanner;
/// Told about each finished run with the events its trace holds (set in
/// [`RunSettings::observer`]); [`Telemetry`] is the one the front ends use.
pub use agent::observe::{ObservedEvent, ObservedRun, RunObserver};
/// The planner that needs no model: deterministic keywords and extractive answers.
pub use agent::offline::OfflinePlanner;
/// The reader mode: the offline planner searches, a chat model writes the answer.
pub use agent::reader::ReaderPlanner;
/// Runs the agent loop for one question: rounds of searches, then a checked answer.
pub use agent::run as run_agent;

/// The chat model an [`LlmPlanner`] calls.
pub use llm::ChatConfig;
/// OpenTelemetry export of runs as GenAI spans over OTLP/HTTP, configured by the standard
/// `OTEL_*` variables (docs/telemetry.md); the JSONL trace stays the record.
pub use telemetry::{ConfigProblem as TelemetryConfigProblem, Telemetry, TelemetryConfig};

/// The conversations on disk (one JSON file each).
pub use session::SessionStore;
/// One turn of a conversation kept on disk: the question answered with its earlier turns.
pub use session::ask as ask_in_session;

/// What [`check_integrity`] found: the verdict and every problem.
pub use trace::Integrity;
/// Whether a ledger entry is required for a finished trace.
pub use trace::LedgerPolicy;
/// What [`verify_signed`] checked, one check at a time.
pub use trace::SignedReport;
/// Why a trace could not be read.
pub use trace::TraceError;
/// A trace read from disk, line by line.
pub use trace::TraceFile;
/// A trace's verdict: clean, or an integrity failure.
pub use trace::Verdict;
/// Checks a trace's hash chain and its ledger entry.
pub use trace::check_integrity;
/// [`check_integrity`] with the operator's trace key and a ledger policy.
pub use trace::check_integrity_with;
/// Reads a trace file.
pub use trace::read_trace;
/// Verifies a trace as a third party: chain, ledger entry and the operator's signature.
pub use trace::verify_signed;
/// The operator's Ed25519 signing key, and its public half.
pub use trace::{PublicKey, SigningKey};

/// What an [`audit`] found.
pub use review::AuditReport;
/// The what-if of a [`replay_with`].
pub use review::ReplayOptions;
/// What a replay found: per round, hits missing, new, moved and drifted.
pub use review::ReplayReport;
/// What a [`rerun`] found, round by round.
pub use review::RerunReport;
/// Which evidence produced a run's answer, and whether it still stands.
pub use review::audit::audit;
/// Re-runs a trace's recorded searches against today's index.
pub use review::replay::replay;
/// [`replay`] with a what-if fusion or topK.
pub use review::replay::replay_with;
/// Plans a recorded question again with any planner and compares the runs.
pub use review::rerun::rerun;
/// The reports rendered for people: audit as text and Markdown, replay, re-run, live re-plan.
pub use review::{audit_markdown, audit_text, replay_text, rerun_text};

/// The tenant a document or caller belongs to when none is named.
pub use access::DEFAULT_TENANT;
/// Files and folders only their owner may read (0600 and 0700), for anything holding document
/// text or access secrets.
pub use access::private as private_files;

/// What a knowledge base holds, counted for one scope ([`Engine::status`]).
pub use engine::status::{Scope, status_in};
/// Where a document without access front matter goes: the default tenant, or nowhere.
pub use knowledge::DefaultAccess;
/// A document's state in the store: current, changed since ingest, removed.
pub use knowledge::DocStatus;
/// What changed in a knowledge folder since the last ingest.
pub use knowledge::KnowledgeChanges;
/// How many earlier versions of each chunk the store keeps (evidence versions).
pub use store::KeepVersions;
/// Which pgvector index, iterative scan and search mode the PostgreSQL store uses.
#[cfg(feature = "postgres")]
pub use store::postgres::{
    DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_EF_SEARCH, DEFAULT_HNSW_M, IterativeScan, Space,
    VectorSearchMode,
};
/// The PostgreSQL + pgvector store: its settings, its errors and its migrations.
#[cfg(feature = "postgres")]
pub use store::postgres::{MIGRATOR, PgError, PgSettings, PgStore, redact_database_url};

/// The largest topK one `searchDocs` call accepts.
pub use search::MAX_TOP_K;

/// Writes multilingual-e5-small's packed file out as a sentence-transformers folder (its
/// weights dequantized), which [`LocalEmbedder`] loads: what the folder-loading test holds the
/// two paths together with.
#[cfg(feature = "local-embed")]
pub use embed::e5_folder::write_folder as write_e5_folder;
/// Which side of a search a text is embedded as (a query or a passage).
pub use embed::marking::Side as EmbedSide;
/// The model cache: the models `ragtrail model install` fetches, where they are kept.
pub use embed::models;
/// The in-process model embedders: a sentence-transformers folder (with its options), and
/// multilingual-e5-small from its packed 4-bit file.
#[cfg(feature = "local-embed")]
pub use embed::{E5Embedder, LocalEmbedder, LocalOptions};
/// The embedders: hashing (no model), an OpenAI-compatible endpoint, a local model.
pub use embed::{
    EmbedError, EmbedderChoice, EmbedderInfo, HashingEmbedder, HttpEmbedder, HttpEmbedderConfig,
    LOCAL_KIND, Marking,
};
/// The kind names an [`EmbedderInfo`] carries for the hashing and HTTP embedders.
pub use embed::{hashing::KIND as HASHING_KIND, http::KIND as HTTP_KIND};
/// How HTTP calls to a model or embeddings server are retried.
pub use http::{RetryPolicy, use_ring_for_tls};

/// What a run reports while it works, round by round.
pub use agent::AgentEvent;
/// What a planner did with the asker's remembered facts (a [`PlannerStep`]'s account).
pub use agent::MemoryUse;
/// The answer a planner proposes, and the model calls it made.
pub use agent::{FinalAnswer, ModelCall, ModelUsage, ProposedCitation, RoundRecord};
/// The limits a run accepts: question length, rounds, topK per round.
pub use agent::{MAX_QUESTION_CHARS, MAX_SEARCH_ROUNDS, MAX_TOP_K_PER_ROUND};
/// What a planner sees and decides each round.
pub use agent::{Observation, PlannerAction, PlannerContext, PlannerError, PlannerStep};
/// The chat endpoint the LLM planner uses: flags, environment, and whether one is set.
pub use llm::{LlmFlags, chat_endpoint_configured, resolve_chat_config};
/// Why a conversation turn failed.
pub use session::TurnError;

/// The language of a text, for replies in the asker's language.
pub use text::Lang;
/// Cuts a text to at most so many characters, on a character boundary.
pub use text::truncate_chars;
/// The words of a text as written whose index terms are among some (stems, as the sufficiency
/// judgement's `missingTerms`): what a person reads in their place.
pub use text::written_words;
/// A Chinese–English glossary (CC-CEDICT's line format) for questions about passages in the
/// other language ([`Engine::use_glossary`]).
pub use text::{Glossary, GlossaryError};

/// Internals the workspace's own tests, examples and benchmarks reach into: hidden from the
/// documentation, with no promise that they stay.
#[doc(hidden)]
pub mod internals {
    pub use crate::agent::llm::{OVERRODE_GIVE_UP, prompt};
    pub use crate::agent::question_search::question_keywords;
    pub use crate::agent::{GAVE_UP_BEFORE_SEARCHING, normalized_set, validate_keywords};
    pub use crate::index::Bm25Index;
    pub use crate::knowledge::{
        Chunk, Document, Format, ScanOptions, TEXT_FORMAT, chunk_document, chunk_id, read_document,
        scan, sha256_hex,
    };
    pub use crate::search::snippet::{DEFAULT_SNIPPET_CHARS, keyword_terms, snippet};
    pub use crate::search::{DEFAULT_FUSION, MAX_QUERY_CHARS, RankedRequest};
    pub use crate::seeded::SplitMix64;
    #[cfg(feature = "postgres")]
    pub use crate::store::postgres::with_database;
    pub use crate::store::vectors::{VectorError, VectorIndex};
    pub use crate::text::{is_cjk, quote_in_text, terms};
}

/// Evaluates the agent on a golden question set.
pub use eval::agent::evaluate as evaluate_agent;
/// Evaluates multi-hop questions.
pub use eval::multihop::evaluate as evaluate_multihop;
/// Evaluates retrieval on a BEIR-format set.
pub use eval::retrieval::evaluate as evaluate_retrieval;
