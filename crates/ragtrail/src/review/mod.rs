//! Reviewing a finished run: [`replay`] re-runs its recorded searches against today's index,
//! [`audit`] shows which evidence produced its answer and whether that evidence still stands.
//! Both read a trace (the `trace` module, below) and the engine; neither calls a model.
//!
//! Both run under the *caller's* access context, never the one written in the trace: traces
//! are unkeyed by default, so anyone who can write a file can write one. A chunk the caller may
//! not see is looked up as if it never existed.

pub mod audit;
mod markdown;
pub mod replay;
pub mod runs;

pub use audit::{AuditReport, audit};
pub use markdown::audit_markdown;
pub use replay::{ReplayReport, RoundVerdict, replay};

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
