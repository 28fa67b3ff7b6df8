//! What a caller can ask of the server, whatever the transport (HTTP or MCP): searches, runs,
//! traces. Each call takes the caller's [`Grant`], which came from a verified token or the
//! operator's configuration, never from the request; the synchronous engine runs on tokio's
//! blocking pool so a slow search never stalls the accepting threads.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use axum::http::StatusCode;
use ragtrail::review::runs::{self, ListedRun, RunFilter, RunSummary};
use ragtrail::review::{self, AuditReport, ReplayReport};
use ragtrail::trace::{
    CheckedTrace, Integrity, LedgerPolicy, RunStatus, TraceFile, Verdict, check_trace,
};
use ragtrail::{
    AgentError, AgentEvent, AgentOutcome, AgentRagOptions, MAX_TOP_K_PER_ROUND, Planner,
    RunSettings, TraceSettings,
};
use ragtrail::{Asker, Fact, FactSource, MemoryError};
use ragtrail::{Engine, EngineError};
use ragtrail::{MAX_TOP_K, SearchError, SearchRequest, SearchResponse};
use uuid::Uuid;

use crate::direct::DirectSearch;
use crate::error::{ApiError, code};
use crate::tokens::{Grant, TokenStore};

/// Makes the planner of one run (the operator's choice: offline, or a configured chat model).
pub type PlannerFactory = Arc<dyn Fn() -> Result<Box<dyn Planner>, String> + Send + Sync>;

/// How the operator configured the server.
pub struct ServerConfig {
    pub trace_dir: PathBuf,
    /// The operator's trace key (`RAGTRAIL_TRACE_KEY`): HMAC chains when set.
    pub trace_key: Option<Vec<u8>>,
    /// The operator's signing key (`ragtrail keys generate`): every run's ledger entry is
    /// signed with it when set.
    pub signer: Option<std::sync::Arc<ragtrail::trace::SigningKey>>,
    /// The public keys audits and replays check signatures with: the signing key's and the
    /// keyring's (none: signatures are not checked).
    pub trusted_keys: Vec<ragtrail::trace::PublicKey>,
    pub tokens: TokenStore,
    pub planner: PlannerFactory,
    /// Every run's date (YYYY-MM-DD); `None`: the local date when the run starts.
    pub today: Option<String>,
    pub limits: Limits,
    /// The askers' remembered facts (the data directory's): each caller's own, keyed by the
    /// token's name within its tenant.
    pub memory: ragtrail::MemoryStore,
    /// Host names (or `name:port`) `/mcp` answers besides the loopback names
    /// ([`crate::mcp::LOOPBACK_HOSTS`]); any other `Host` header is refused, so a web page that
    /// rebinds its own name to this address cannot reach the tools.
    pub allowed_hosts: Vec<String>,
    /// Told about every run (the operator's OpenTelemetry export, `ragtrail::Telemetry`);
    /// `None`: runs keep nothing for it.
    pub observer: Option<Arc<dyn ragtrail::RunObserver>>,
}

/// What one client may hold of the server: connections, and time to send a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; further clients wait in the listen queue until one closes.
    pub max_connections: usize,
    /// Time to send a request's headers (slow headers, or an idle connection, are closed).
    pub header_timeout: std::time::Duration,
    /// Time to send a request's whole body (answered 408 after it).
    pub body_timeout: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: std::time::Duration::from_secs(10),
            body_timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// The engine and configuration every request shares.
pub struct App {
    /// Read by every request; written only to catch up with what an ingest wrote since
    /// ([`App::engine`]).
    engine: RwLock<Engine>,
    pub config: ServerConfig,
}

/// Options of one `ask`, already bounded.
#[derive(Debug, Clone)]
pub struct AskParams {
    pub question: String,
    pub options: AgentRagOptions,
    pub today: Option<String>,
}

/// Runs `job` on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(job)
        .await
        .map_err(ApiError::internal)?
}

fn search_error(e: EngineError) -> ApiError {
    match e {
        EngineError::Search(
            e @ (SearchError::NoKeywords
            | SearchError::TooManyKeywords { .. }
            | SearchError::KeywordTooLong { .. }),
        ) => ApiError::bad_request(code::INVALID_KEYWORDS, e.to_string()).with_field("keywords"),
        EngineError::Search(e) if e.is_setup() => ApiError::setup(e.to_string()),
        e => ApiError::internal(e),
    }
}

fn memory_error(e: MemoryError) -> ApiError {
    match e {
        e @ (MemoryError::BadKey | MemoryError::BadValue | MemoryError::Full) => {
            ApiError::bad_request(code::INVALID_FIELD, e.to_string())
        }
        e => ApiError::internal(e),
    }
}

fn agent_error(e: AgentError) -> ApiError {
    match e {
        e @ (AgentError::EmptyQuestion | AgentError::QuestionTooLong(_)) => {
            ApiError::bad_request(code::INVALID_QUESTION, e.to_string()).with_field("question")
        }
        e => ApiError::internal(e),
    }
}

/// A run that ended with status `error` is the setup's failure, answered as an error (503
/// `setup_error`), never as an outcome a client could take for a refusal.
fn setup_failed(outcome: AgentOutcome) -> Result<AgentOutcome, ApiError> {
    if outcome.status == RunStatus::Error {
        return Err(ApiError::setup(format!(
            "run {} stopped: {}",
            outcome.run_id,
            ragtrail::error_cause(&outcome.reason)
        )));
    }
    Ok(outcome)
}

impl App {
    pub fn new(engine: Engine, config: ServerConfig) -> Self {
        Self {
            engine: RwLock::new(engine),
            config,
        }
    }

    /// The engine at the knowledge base's current generation: when an ingest (a CLI
    /// `ingest` on the same data directory, another process writing the shared PostgreSQL
    /// database) has changed it since this server last read it, the engine reads it again
    /// first (other requests waiting meanwhile), so every request answers from the latest
    /// generation, access changes included, and never meets `StaleIndex`. The check itself is
    /// one small read per request ([`Engine::behind`]).
    pub fn engine(&self) -> Result<RwLockReadGuard<'_, Engine>, ApiError> {
        fn poisoned<T>(_: T) -> ApiError {
            ApiError::internal("a request panicked while holding the engine")
        }
        {
            let engine = self.engine.read().map_err(poisoned)?;
            if !engine.behind().map_err(ApiError::internal)? {
                return Ok(engine);
            }
        }
        {
            let mut engine = self.engine.write().map_err(poisoned)?;
            // Another request may have caught up while this one waited for the lock.
            if engine.behind().map_err(ApiError::internal)? {
                tracing::info!("the knowledge base changed since it was read; reading it again");
                engine.refresh().map_err(ApiError::internal)?;
            }
        }
        self.engine.read().map_err(poisoned)
    }

    fn today(&self, asked: Option<String>) -> String {
        asked
            .or_else(|| self.config.today.clone())
            .unwrap_or_else(|| {
                chrono::Local::now()
                    .date_naive()
                    .format("%Y-%m-%d")
                    .to_string()
            })
    }

    fn settings(&self, grant: &Grant, options: AgentRagOptions, today: String) -> RunSettings {
        let mut settings = RunSettings::new(options, grant.access.clone(), today);
        settings.trace = Some(TraceSettings {
            dir: self.config.trace_dir.clone(),
            key: self.config.trace_key.clone(),
            signer: self.config.signer.clone(),
            caller: Some(grant.name.clone()),
        });
        settings.observer = self.config.observer.clone();
        settings
    }

    /// Whose memory a call reads: the token's name within its tenant, never the request's.
    fn asker(grant: &Grant) -> Result<Asker, ApiError> {
        Asker::new(&grant.access.tenant, &grant.name).map_err(memory_error)
    }

    /// The caller's remembered facts.
    pub fn memory_list(&self, grant: &Grant) -> Result<Vec<Fact>, ApiError> {
        self.config
            .memory
            .list(&Self::asker(grant)?)
            .map_err(memory_error)
    }

    /// Remembers a fact for the caller (set by the asker).
    pub fn memory_set(&self, grant: &Grant, key: &str, value: &str) -> Result<Fact, ApiError> {
        let (fact, _) = self
            .config
            .memory
            .set(&Self::asker(grant)?, key, value, FactSource::Asker)
            .map_err(memory_error)?;
        Ok(fact)
    }

    /// Forgets one of the caller's facts; 404 when there was none.
    pub fn memory_forget(&self, grant: &Grant, key: &str) -> Result<Fact, ApiError> {
        self.config
            .memory
            .forget(&Self::asker(grant)?, key)
            .map_err(memory_error)?
            .ok_or_else(|| ApiError::not_found("remembered fact"))
    }

    /// `searchDocs` as `ragtrail search --json` runs it (not traced: a search alone answers
    /// nothing; [`App::traced_search`] is the traced form agents use).
    pub fn search(
        &self,
        grant: &Grant,
        keywords: Vec<String>,
        top_k: usize,
        include_superseded: bool,
    ) -> Result<SearchResponse, ApiError> {
        let top_k = crate::body::bounded("topK", top_k, 1, MAX_TOP_K)?;
        let mut req = SearchRequest::new(keywords, top_k, grant.access.clone());
        req.include_superseded = include_superseded;
        self.engine()?.search_docs(&req).map_err(search_error)
    }

    /// One agent run, traced under the caller's token name.
    pub fn ask(&self, grant: &Grant, params: AskParams) -> Result<AgentOutcome, ApiError> {
        self.ask_observed(grant, params, &mut |_| {})
    }

    /// [`App::ask`], telling `on_event` of each round as it happens (the streamed `/v1/ask`).
    pub fn ask_observed(
        &self,
        grant: &Grant,
        params: AskParams,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<AgentOutcome, ApiError> {
        let mut planner = (self.config.planner)().map_err(ApiError::internal)?;
        let mut settings = self.settings(grant, params.options, self.today(params.today));
        settings.memory = self.memory_list(grant)?;
        ragtrail::run_agent(
            &*self.engine()?,
            &mut *planner,
            &params.question,
            &settings,
            on_event,
        )
        .map_err(agent_error)
        .and_then(setup_failed)
    }

    /// A `searchDocs` call by an outside agent, traced as a run of one search round (planner
    /// `direct`), so its hits can be replayed and audited like an `ask`'s.
    pub fn traced_search(
        &self,
        grant: &Grant,
        keywords: Vec<String>,
        top_k: u32,
    ) -> Result<AgentOutcome, ApiError> {
        let top_k = crate::body::bounded("topK", top_k, 1, MAX_TOP_K_PER_ROUND)?;
        let options = AgentRagOptions {
            max_search_rounds: 1,
            top_k_per_round: top_k,
            require_source: true,
        };
        let mut planner = DirectSearch::new(keywords.clone());
        let settings = self.settings(grant, options, self.today(None));
        let question = DirectSearch::question(&keywords);
        let outcome = ragtrail::run_agent(
            &*self.engine()?,
            &mut planner,
            &question,
            &settings,
            &mut |_| {},
        )
        .map_err(agent_error)
        .and_then(setup_failed)?;
        if let Some(message) = planner.rejected() {
            return Err(
                ApiError::bad_request(code::INVALID_KEYWORDS, message).with_field("keywords")
            );
        }
        Ok(outcome)
    }

    /// Up to `limit` runs the caller may see that `filter` keeps, newest first.
    pub fn list(
        &self,
        grant: &Grant,
        limit: usize,
        filter: &RunFilter,
    ) -> Result<Vec<RunSummary>, ApiError> {
        match runs::list_runs(&self.config.trace_dir, &grant.access, limit, &|r| {
            filter.keeps(r)
        }) {
            Ok(listed) => Ok(listed
                .into_iter()
                .filter_map(|r| match r {
                    ListedRun::Run(run) => Some(*run),
                    // A file nobody can read says nothing a caller may know.
                    ListedRun::Unreadable(_) => None,
                })
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    /// The run's trace, checked, if the caller may see it; another tenant's run (or one that
    /// cannot be read, so its tenant is unknown) is "not found", never "forbidden".
    pub fn open_run(&self, grant: &Grant, run_id: &str) -> Result<CheckedRun, ApiError> {
        let run_id: Uuid = run_id.parse().map_err(|_| {
            ApiError::bad_request(
                code::INVALID_RUN_ID,
                "a run id is a UUID (the runId of /v1/traces or of an ask)",
            )
            .with_field("runId")
        })?;
        let path = runs::find_run(&self.config.trace_dir, run_id)
            .map_err(ApiError::internal)?
            .ok_or_else(|| ApiError::not_found("such run"))?;
        let mut checked = check_trace(
            &path,
            self.config.trace_key.as_deref(),
            LedgerPolicy::Required,
            &self.config.trusted_keys,
        )
        .map_err(ApiError::internal)?;
        // The file is kept once, in the run; the check keeps its verdicts.
        let file = checked
            .file
            .take()
            .ok_or_else(|| ApiError::not_found("such run"))?;
        let summary =
            runs::summarize(&path, &file).ok_or_else(|| ApiError::not_found("such run"))?;
        if !runs::may_see(&summary.access, &grant.access) {
            return Err(ApiError::not_found("such run"));
        }
        Ok(CheckedRun {
            summary,
            integrity: checked.integrity.clone(),
            checked,
            file,
        })
    }

    /// The audit of a run the caller may see, under the caller's own access.
    pub fn audit(&self, grant: &Grant, run: &CheckedRun) -> Result<AuditReport, ApiError> {
        let engine = self.engine()?;
        // The same verdict as `ragtrail audit`: the signature is part of it.
        let engine = (run.checked.verdict() != Verdict::IntegrityFailure
            && review::check_access(&run.file, &grant.access).is_ok())
        .then_some(&*engine);
        let mut report = review::audit(&run.file, run.integrity.clone(), engine, &grant.access);
        if let Some(signed) = &run.checked.signature {
            report.add_signature(signed);
        }
        Ok(report)
    }

    /// The replay of a run the caller may see: refused when its integrity fails or it was
    /// recorded with other roles than the caller's.
    pub fn replay(&self, grant: &Grant, run: &CheckedRun) -> Result<ReplayReport, ApiError> {
        if run.checked.verdict() == Verdict::IntegrityFailure {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                code::INTEGRITY_FAILURE,
                format!(
                    "the trace cannot be trusted: {}",
                    run.checked.problems().join("; ")
                ),
            ));
        }
        review::check_access(&run.file, &grant.access).map_err(|e| {
            ApiError::new(StatusCode::FORBIDDEN, code::ACCESS_MISMATCH, e.to_string())
        })?;
        review::replay(&*self.engine()?, &run.file, &grant.access).map_err(ApiError::internal)
    }
}

/// A trace found by run id, read and checked, that the caller may see.
pub struct CheckedRun {
    pub summary: RunSummary,
    pub integrity: Integrity,
    /// The integrity with the run's signature (when keys are at hand).
    pub checked: CheckedTrace,
    pub file: TraceFile,
}
