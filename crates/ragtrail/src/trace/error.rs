//! Errors of the trace module.

use std::path::PathBuf;

/// Why a trace or ledger could not be written or read.
///
/// Verification findings are not errors: they come back as reports (see `verify`), so that one
/// bad line does not hide what the rest of the file says.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading or writing `path` failed. The message names the path and the OS error once; the
    /// OS error is not also exposed as the source, or a report that prints the whole chain
    /// (`{:#}`) would print it twice.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Nothing to verify (a run that died before its first event leaves such a file).
    #[error("{}: the trace is empty", path.display())]
    Empty { path: PathBuf },
    /// A line that is not a valid v1 event (and is not a torn last line).
    #[error("line {line}: {message}")]
    Malformed { line: usize, message: String },
    /// A line written by a newer major version, whose envelope this version cannot trust.
    #[error(
        "trace format version {found} is not supported: this ragtrail reads version {supported}; \
         upgrade ragtrail to read traces written by a newer release"
    )]
    UnsupportedVersion { found: u64, supported: u32 },
    /// An event could not be turned into JSON (a bug in the caller's data, e.g. a map key type).
    #[error("cannot encode trace event: {0}")]
    Encode(#[source] serde_json::Error),
    /// The writer was used in a way that would produce a trace no verifier accepts.
    #[error("trace writer misuse: {0}")]
    Misuse(&'static str),
    /// An earlier write failed half-way; appending more would break the chain.
    #[error("{}: an earlier write failed; the trace accepts no more events", path.display())]
    Poisoned { path: PathBuf },
    /// More lines than `run_finished.lines` (u32) can record.
    #[error("trace has more lines than the format can count")]
    TooManyLines,
}

impl TraceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            error: source,
        }
    }
}
