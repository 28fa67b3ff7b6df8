//! What a run hands to an observer when it ends: the events it recorded, each with the time it
//! was recorded, so a second view of the run (OpenTelemetry spans, `telemetry`) is built from
//! the very events its JSONL trace holds, with the same run id.
//!
//! The loop keeps the events only when an observer is set: a run without one clones nothing.

use std::time::SystemTime;

use crate::trace::{EventBody, RunStatus};

/// Told about every finished run of the [`super::RunSettings`] it is set in. Called on the
/// run's own thread after its trace is finished: an observer must return quickly (queue, not
/// send) and must never fail the run.
pub trait RunObserver: Send + Sync {
    fn run_finished(&self, run: &ObservedRun<'_>);
}

/// One trace event as the loop recorded it.
#[derive(Debug, Clone)]
pub struct ObservedEvent {
    /// When the loop recorded it (the step it describes ended then).
    pub at: SystemTime,
    pub body: EventBody,
}

/// A finished run, as an observer sees it.
#[derive(Debug)]
pub struct ObservedRun<'a> {
    pub run_id: uuid::Uuid,
    /// The trace file's name (`<UTC start>-<runId>.jsonl`), when the run wrote one.
    pub trace_file: Option<String>,
    /// Before the question was checked and the trace opened.
    pub started: SystemTime,
    pub finished: SystemTime,
    pub status: RunStatus,
    pub reason: &'a str,
    /// Every event the trace holds before its `run_finished` line, in order.
    pub events: &'a [ObservedEvent],
}
