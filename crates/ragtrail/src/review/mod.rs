//! Reviewing a finished run: [`replay()`] re-runs its recorded searches against today's index,
//! [`audit()`] shows which evidence produced its answer and whether that evidence still stands.
//! Both read a trace (the `trace` module, below) and the engine; neither calls a model.
//!
//! Both run under the *caller's* access context, never the one written in the trace: traces
//! are unkeyed by default, so anyone who can write a file can write one. A chunk the caller may
//! not see is looked up as if it never existed.

pub mod audit;
pub mod diff;
pub mod replay;
pub mod report;
pub mod rerun;
pub mod runs;

pub use audit::{AuditReport, audit};
pub use replay::{ReplayOptions, ReplayReport, RoundVerdict, replay, replay_with};
pub use report::{audit_markdown, audit_text, live_json, live_text, replay_text, rerun_text};
pub use rerun::{MemoryToday, RerunReport, memory_today, rerun};

use crate::engine::Engine;

use crate::access::AccessContext;
use crate::trace::{TraceFile, run_started};

/// The run was recorded under another access context than the caller's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this run was recorded for tenant {} roles [{}], and you are tenant {} roles [{}]; \
     replay and audit run under your own access only, so use the run's --tenant and --role \
     (RAGTRAIL_TENANT, RAGTRAIL_ROLES) if you hold them",
    recorded.tenant, recorded.roles.join(", "), caller.tenant, caller.roles.join(", ")
)]
pub struct AccessMismatch {
    pub recorded: AccessContext,
    pub caller: AccessContext,
}

/// Whether `caller` is the context `file` was recorded under (a trace without a `run_started`
/// line counts as the default context).
pub fn check_access(file: &TraceFile, caller: &AccessContext) -> Result<(), AccessMismatch> {
    let recorded = run_started(file)
        .map(|s| s.access.clone())
        .unwrap_or_default();
    // Compare as sets: the order and repeats of roles carry no meaning.
    let normalized = AccessContext::new(recorded.tenant.clone(), recorded.roles.clone());
    if normalized == *caller {
        Ok(())
    } else {
        Err(AccessMismatch {
            recorded,
            caller: caller.clone(),
        })
    }
}

/// The trace was recorded against another knowledge base than the engine's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this run searched knowledge base {recorded}, and the data directory or database opened now \
     is knowledge base {current}: replaying here would report every difference between two \
     knowledge bases as drift. Pass the --data-dir (or DATABASE_URL) the run used, or --force \
     to compare anyway"
)]
pub struct KnowledgeBaseMismatch {
    pub recorded: String,
    pub current: String,
}

/// Whether `engine` serves the knowledge base `file` was recorded against. A trace written
/// before traces recorded it, or an engine without an id (a read-only data directory), passes:
/// there is nothing to compare.
pub fn check_knowledge_base(
    file: &TraceFile,
    engine: &Engine,
) -> Result<(), KnowledgeBaseMismatch> {
    let recorded = run_started(file)
        .map(|s| s.knowledge_base.as_str())
        .unwrap_or_default();
    let current = engine.knowledge_base_id();
    if recorded.is_empty() || current.is_empty() || recorded == current {
        Ok(())
    } else {
        Err(KnowledgeBaseMismatch {
            recorded: recorded.to_string(),
            current: current.to_string(),
        })
    }
}
