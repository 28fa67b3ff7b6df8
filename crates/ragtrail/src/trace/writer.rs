//! Appending events to a trace file, one flushed line at a time.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use uuid::Uuid;

use serde_json::Value;

use super::canonical::{ZERO_HASH, digest_hex};
use super::error::TraceError;
use super::events::{EventBody, RunFinished, RunStatus, TRACE_VERSION, TraceEvent};
use super::ledger;
use super::seal::{now_millis, open_private, seal};
use super::sign::SigningKey;

/// The longest string a trace line keeps whole (a model's reply, a question); a longer one is
/// cut, and the cut says how long it was and its SHA-256, so the trace stays bounded whatever
/// the model sends and the original can still be matched.
pub const MAX_TRACE_STRING_BYTES: usize = 64 * 1024;

/// Replaces every string longer than `max` bytes in `value` by its first `max` bytes (at a
/// character boundary) and `… [truncated by ragtrail: N bytes, sha256 H]`.
pub fn bound_strings(value: &mut Value, max: usize) {
    match value {
        Value::String(s) if s.len() > max => {
            let end = (0..=max)
                .rev()
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0);
            let cut = &s[..end];
            *s = format!(
                "{cut}… [truncated by ragtrail: {} bytes, sha256 {}]",
                s.len(),
                digest_hex(s.as_bytes(), None)
            );
        }
        Value::Array(items) => items.iter_mut().for_each(|v| bound_strings(v, max)),
        Value::Object(map) => map.values_mut().for_each(|v| bound_strings(v, max)),
        _ => {}
    }
}

/// Writes one run's trace: `<dir>/<UTC start>-<runId>.jsonl`, owner-only, never overwritten.
///
/// Every [`append`](Self::append) writes a whole line in one call and flushes it, so a crash
/// leaves a valid prefix (at worst with a torn last line, which readers skip).
pub struct TraceWriter {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    run_id: Uuid,
    key: Option<Vec<u8>>,
    /// The operator's signing key: when set, the ledger entry of the run is signed.
    signer: Option<Arc<SigningKey>>,
    lines: u64,
    last_hash: String,
    poisoned: bool,
}

/// What [`TraceWriter::finish`] recorded, for the caller to print or keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedTrace {
    /// The trace file.
    pub path: PathBuf,
    /// Lines in the trace, `run_finished` included.
    pub lines: u64,
    /// `hash` of the `run_finished` line, as the ledger records it.
    pub final_hash: String,
    /// `seq` of the ledger entry written for this run.
    pub ledger_seq: u64,
    /// Id of the key that signed the run, when one did.
    pub key_id: Option<String>,
}

impl fmt::Debug for TraceWriter {
    // Hand-written so the trace key can never end up in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceWriter")
            .field("path", &self.path)
            .field("run_id", &self.run_id)
            .field("keyed", &self.key.is_some())
            .field(
                "signed_by",
                &self.signer.as_ref().map(|s| s.key_id().to_string()),
            )
            .field("lines", &self.lines)
            .field("last_hash", &self.last_hash)
            .finish_non_exhaustive()
    }
}

impl TraceWriter {
    /// Creates `dir` if needed and a new trace file in it; fails rather than overwrite.
    ///
    /// With a `key`, line hashes are HMAC-SHA-256, so only key holders can forge a chain.
    pub fn create(
        dir: &Path,
        run_id: Uuid,
        key: Option<Vec<u8>>,
    ) -> Result<TraceWriter, TraceError> {
        crate::access::private::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
        let name = format!("{}-{run_id}.jsonl", Utc::now().format("%Y%m%dT%H%M%SZ"));
        let path = dir.join(name);
        let file = open_private(&path, OpenOptions::new().write(true).create_new(true))?;
        tracing::debug!(path = %path.display(), %run_id, keyed = key.is_some(), "trace created");
        Ok(TraceWriter {
            dir: dir.to_path_buf(),
            path,
            file,
            run_id,
            key,
            signer: None,
            lines: 0,
            last_hash: ZERO_HASH.to_string(),
            poisoned: false,
        })
    }

    /// Signs the run with `signer` when it finishes: the ledger entry carries the key id, a
    /// signature of the run's final hash and one of the entry itself.
    pub fn with_signer(mut self, signer: Option<Arc<SigningKey>>) -> Self {
        self.signer = signer;
        self
    }

    /// The trace file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run this trace records; every line carries it.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// `hash` of the last line written, or 64 zeros before the first.
    pub fn last_hash(&self) -> &str {
        &self.last_hash
    }

    /// Appends one event and returns it as readers will see it (seq, ts, prevHash, hash set).
    ///
    /// The first event must be `run_started`; `run_finished` is written by
    /// [`finish`](Self::finish), which also records the run in the ledger.
    pub fn append(&mut self, body: EventBody) -> Result<TraceEvent, TraceError> {
        Self::check_order(&body, self.lines)?;
        let value = self.write_event(body)?;
        serde_json::from_value(value).map_err(TraceError::Encode)
    }

    /// [`append`](Self::append) for a caller that does not read the event back: the same line
    /// is written, without parsing the sealed value into an event again.
    pub fn record(&mut self, body: EventBody) -> Result<(), TraceError> {
        Self::check_order(&body, self.lines)?;
        self.write_event(body).map(drop)
    }

    fn check_order(body: &EventBody, lines: u64) -> Result<(), TraceError> {
        match (body, lines) {
            (EventBody::RunStarted(_), 0) => {}
            (_, 0) => return Err(TraceError::Misuse("the first event must be run_started")),
            (EventBody::RunStarted(_), _) => {
                return Err(TraceError::Misuse(
                    "run_started can only be the first event",
                ));
            }
            (EventBody::RunFinished(_), _) => {
                return Err(TraceError::Misuse("end a run with finish(), not append()"));
            }
            _ => {}
        }
        Ok(())
    }

    /// Appends `run_finished`, syncs the file, and records the run in `<dir>/ledger.jsonl`.
    pub fn finish(
        mut self,
        status: RunStatus,
        reason: impl Into<String>,
        rounds: u32,
        searches: u32,
    ) -> Result<FinishedTrace, TraceError> {
        if self.lines == 0 {
            return Err(TraceError::Misuse("cannot finish a run that never started"));
        }
        let total = self.lines.checked_add(1).ok_or(TraceError::TooManyLines)?;
        let lines = u32::try_from(total).map_err(|_| TraceError::TooManyLines)?;
        let body = EventBody::RunFinished(RunFinished {
            status,
            reason: reason.into(),
            rounds,
            searches,
            lines,
        });
        let event: TraceEvent =
            serde_json::from_value(self.write_event(body)?).map_err(TraceError::Encode)?;
        self.file
            .sync_data()
            .map_err(|e| TraceError::io(&self.path, e))?;
        let file_name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = ledger::append_entry(
            &self.dir,
            &file_name,
            self.run_id,
            total,
            &event.hash,
            self.key.as_deref(),
            self.signer.as_deref(),
        )?;
        tracing::debug!(path = %self.path.display(), lines = total, "trace finished");
        Ok(FinishedTrace {
            path: self.path,
            lines: total,
            final_hash: event.hash,
            ledger_seq: entry.seq,
            key_id: entry.key_id,
        })
    }

    /// Seals and writes one event; returns the sealed value (the event as readers will parse it).
    fn write_event(&mut self, body: EventBody) -> Result<Value, TraceError> {
        if self.poisoned {
            return Err(TraceError::Poisoned {
                path: self.path.clone(),
            });
        }
        let event = TraceEvent {
            v: TRACE_VERSION,
            run_id: self.run_id,
            seq: self.lines,
            ts: now_millis(),
            prev_hash: self.last_hash.clone(),
            hash: String::new(),
            body,
        };
        let mut value = serde_json::to_value(&event).map_err(TraceError::Encode)?;
        bound_strings(&mut value, MAX_TRACE_STRING_BYTES);
        let (value, line, hash) = seal(value, self.key.as_deref())?;
        if let Err(e) = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
        {
            // Part of the line may be on disk; anything appended after it would not chain.
            self.poisoned = true;
            return Err(TraceError::io(&self.path, e));
        }
        self.lines += 1;
        self.last_hash = hash;
        Ok(value)
    }
}
