//! Reviewing a finished run: [`replay`] re-runs its recorded searches against today's index,
//! [`audit`] shows which evidence produced its answer and whether that evidence still stands.
//! Both read a trace (the `trace` module, below) and the engine; neither calls a model.

pub mod audit;
pub mod replay;

pub use audit::{AuditReport, audit};
pub use replay::{ReplayReport, RoundVerdict, replay};
