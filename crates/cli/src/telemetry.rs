//! The process's OpenTelemetry exporter, made once from the `OTEL_*` variables (after `.env`
//! is loaded) for every run this process starts: `ask`, `chat`, and the runs of `serve` and
//! `mcp`. Without an endpoint there is none: no thread, and runs keep nothing for it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ragtrail::{RunObserver, Telemetry};

/// How long a command waits, before exiting, for its runs' spans to be sent.
const FLUSH_WAIT: Duration = Duration::from_secs(3);

static EXPORTER: OnceLock<Option<Arc<Telemetry>>> = OnceLock::new();

fn exporter() -> Option<&'static Arc<Telemetry>> {
    EXPORTER
        .get_or_init(|| Telemetry::from_env().map(Arc::new))
        .as_ref()
}

/// The observer to set in a run's settings, when export is on.
pub fn observer() -> Option<Arc<dyn RunObserver>> {
    exporter().map(|t| Arc::clone(t) as Arc<dyn RunObserver>)
}

/// Sends what is queued, waiting at most [`FLUSH_WAIT`]; a collector that is down or slow
/// costs that wait at most, once, and a warning.
pub fn flush_before_exit() {
    if let Some(Some(t)) = EXPORTER.get()
        && !t.flush(FLUSH_WAIT)
    {
        tracing::warn!(
            "OpenTelemetry export: spans still unsent after {} s are dropped (the JSONL traces are kept)",
            FLUSH_WAIT.as_secs()
        );
    }
}
