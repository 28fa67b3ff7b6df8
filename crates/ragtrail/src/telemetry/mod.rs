//! OpenTelemetry export of runs (docs/telemetry.md): each finished run's recorded events
//! become GenAI spans (`spans`), encoded as an OTLP protobuf request (`otlp`) and sent over
//! HTTP by a background thread (`export`), when the standard `OTEL_*` variables name an
//! endpoint (`config`). The JSONL trace stays the record; this is the operator's view of the
//! same run, under the same id.

mod config;
mod export;
mod otlp;
mod spans;

use std::time::Duration;

pub use config::{ConfigProblem, TelemetryConfig};

use crate::agent::observe::{ObservedRun, RunObserver};

/// The scope spans are reported under.
const SCOPE: &str = "ragtrail";

/// Exports every run it observes; set it in [`crate::agent::RunSettings::observer`].
pub struct Telemetry {
    config: TelemetryConfig,
    exporter: export::Exporter,
}

impl Telemetry {
    /// An exporter as the process's `OTEL_*` variables ask, or `None` when they ask for none
    /// (then nothing is started and runs keep no events). A variable asking for something
    /// unsupported, or a thread that cannot be started, is warned about, never fatal.
    pub fn from_env() -> Option<Self> {
        match TelemetryConfig::from_vars(&|name| std::env::var(name).ok()) {
            Ok(Some(config)) => Self::start(config),
            Ok(None) => None,
            Err(problem) => {
                tracing::warn!("{problem}");
                None
            }
        }
    }

    /// Starts the exporter's thread.
    pub fn start(config: TelemetryConfig) -> Option<Self> {
        match export::Exporter::start(&config) {
            Ok(exporter) => Some(Self { config, exporter }),
            Err(e) => {
                tracing::warn!("OpenTelemetry export is off: its thread could not start: {e}");
                None
            }
        }
    }

    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    /// Waits at most `wait` for the queued runs to be sent (a process about to exit).
    pub fn flush(&self, wait: Duration) -> bool {
        self.exporter.flush(wait)
    }
}

impl RunObserver for Telemetry {
    fn run_finished(&self, run: &ObservedRun<'_>) {
        let spans = spans::run_spans(run, self.config.capture_content);
        let origin = otlp::Origin {
            resource: &self.config.resource,
            scope_name: SCOPE,
            scope_version: env!("CARGO_PKG_VERSION"),
        };
        self.exporter.offer(otlp::export_request(&origin, &spans));
    }
}
