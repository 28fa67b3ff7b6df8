//! The ledger: one hash-chained line per finished run, so a trace that was cut short, rewritten
//! whole or deleted no longer matches what was recorded when it finished.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::canonical::{ZERO_HASH, canonical_json, is_hash};
use super::error::TraceError;
use super::events::{TRACE_VERSION, ts_millis};
use super::reader::{check_version, split_lines};
use super::seal::{now_millis, open_private, seal};
use super::sign::{SigningKey, entry_message, run_message};

/// File name of the ledger inside the trace directory.
pub const LEDGER_FILE_NAME: &str = "ledger.jsonl";

/// How much of the ledger's end is read first when looking for its last entry.
const TAIL_WINDOW: u64 = 8 * 1024;

/// One finished run as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    pub v: u32,
    /// Position in the ledger's own chain.
    pub seq: u64,
    #[serde(with = "ts_millis")]
    pub ts: DateTime<Utc>,
    pub run_id: Uuid,
    /// File name of the trace (no directory, so the folder can move).
    pub file: String,
    /// Lines of the trace, `run_finished` included.
    pub lines: u64,
    /// `hash` of the trace's `run_finished` line.
    pub final_hash: String,
    /// Id of the operator key that signed this entry (`trace::sign`); absent when unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// That key's signature of the run's final hash ([`super::sign::run_message`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_signature: Option<String>,
    pub prev_hash: String,
    pub hash: String,
    /// That key's signature of this entry's `hash` ([`super::sign::entry_message`]), which
    /// covers every other field; it is itself left out of the hash, as `hash` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Name of the ledger key that holds an entry's signature (left out of what is hashed).
pub(crate) const SIGNATURE_KEY: &str = "signature";

/// A ledger line's value as its hash covers it: without its `signature`.
pub(crate) fn unsigned(value: &Value) -> std::borrow::Cow<'_, Value> {
    match value.as_object() {
        Some(map) if map.contains_key(SIGNATURE_KEY) => {
            let mut map = map.clone();
            map.remove(SIGNATURE_KEY);
            std::borrow::Cow::Owned(Value::Object(map))
        }
        _ => std::borrow::Cow::Borrowed(value),
    }
}

/// One ledger entry as read: the raw value (hashed by verification) and the typed entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerLine {
    pub line_no: usize,
    pub value: Value,
    pub entry: LedgerEntry,
}

/// A ledger as read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ledger {
    pub entries: Vec<LedgerLine>,
    /// Lines that are not JSON: remnants of a writer that died mid-line. The chain skips them
    /// (the next entry links to the last whole one), so dropping a real entry still shows.
    pub torn_lines: Vec<usize>,
}

impl Ledger {
    /// The entry for `run_id`, preferring one that names `file` if the id appears twice.
    pub fn find(&self, run_id: Uuid, file: &str) -> Option<&LedgerLine> {
        let matching: Vec<&LedgerLine> = self
            .entries
            .iter()
            .filter(|l| l.entry.run_id == run_id)
            .collect();
        matching
            .iter()
            .find(|l| l.entry.file == file)
            .or(matching.last())
            .copied()
    }
}

/// `<dir>/ledger.jsonl`, or `path` itself when it is not a directory.
pub fn ledger_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(LEDGER_FILE_NAME)
    } else {
        path.to_path_buf()
    }
}

/// Reads a ledger. Non-JSON lines are listed in [`Ledger::torn_lines`]; a JSON line that is not
/// an entry is [`TraceError::Malformed`].
pub fn read_ledger(path: &Path) -> Result<Ledger, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
    let (complete, tail) = split_lines(&bytes);
    let mut ledger = Ledger::default();
    for (i, raw) in complete.iter().copied().chain(tail).enumerate() {
        let line_no = i + 1;
        let Ok(value) = serde_json::from_slice::<Value>(raw) else {
            ledger.torn_lines.push(line_no);
            continue;
        };
        check_version(line_no, &value)?;
        let entry = serde_json::from_value::<LedgerEntry>(value.clone()).map_err(|e| {
            TraceError::Malformed {
                line: line_no,
                message: e.to_string(),
            }
        })?;
        ledger.entries.push(LedgerLine {
            line_no,
            value,
            entry,
        });
    }
    Ok(ledger)
}

/// Appends the entry for a finished run to `<dir>/ledger.jsonl`, chained to the last entry.
///
/// The whole read-then-append runs under an exclusive lock on the ledger file, so concurrent
/// runs (threads or processes) cannot both chain to the same predecessor.
pub(crate) fn append_entry(
    dir: &Path,
    file: &str,
    run_id: Uuid,
    lines: u64,
    final_hash: &str,
    key: Option<&[u8]>,
    signer: Option<&SigningKey>,
) -> Result<LedgerEntry, TraceError> {
    let path = dir.join(LEDGER_FILE_NAME);
    let mut ledger = open_private(
        &path,
        OpenOptions::new().read(true).append(true).create(true),
    )?;
    ledger.lock().map_err(|e| TraceError::io(&path, e))?;
    // The lock is released when `ledger` is closed, on every path out of here.
    let io = |e| TraceError::io(&path, e);
    let len = ledger.metadata().map_err(io)?.len();
    let tail = last_entry(&mut ledger, len).map_err(io)?;
    let (seq, prev_hash) = match tail.last {
        Some((seq, hash)) => (seq.checked_add(1).ok_or(TraceError::TooManyLines)?, hash),
        None => (0, ZERO_HASH.to_string()),
    };
    let entry = LedgerEntry {
        v: TRACE_VERSION,
        seq,
        ts: now_millis(),
        run_id,
        file: file.to_string(),
        lines,
        final_hash: final_hash.to_string(),
        key_id: signer.map(|s| s.key_id().to_string()),
        run_signature: signer.map(|s| s.sign(&run_message(run_id, final_hash))),
        prev_hash,
        hash: String::new(),
        signature: None,
    };
    let value = serde_json::to_value(&entry).map_err(TraceError::Encode)?;
    let (mut value, mut line, hash) = seal(value, key)?;
    if let (Some(signer), Some(map)) = (signer, value.as_object_mut()) {
        let signature = signer.sign(&entry_message(&hash));
        map.insert(SIGNATURE_KEY.to_string(), Value::String(signature));
        line = canonical_json(&value);
        line.push('\n');
    }
    let entry: LedgerEntry = serde_json::from_value(value).map_err(TraceError::Encode)?;
    let mut bytes = Vec::with_capacity(line.len() + 1);
    if !tail.ends_with_newline {
        tracing::warn!(path = %path.display(), "ledger ends in a torn line; appending after it");
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    ledger.write_all(&bytes).map_err(io)?;
    ledger.sync_data().map_err(io)?;
    Ok(entry)
}

struct Tail {
    /// `seq` and `hash` of the last whole entry.
    last: Option<(u64, String)>,
    ends_with_newline: bool,
}

/// Finds the last whole entry by reading backwards in growing windows, so appending stays cheap
/// however long the ledger gets.
fn last_entry(file: &mut File, len: u64) -> std::io::Result<Tail> {
    if len == 0 {
        return Ok(Tail {
            last: None,
            ends_with_newline: true,
        });
    }
    let mut window = TAIL_WINDOW;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        Read::by_ref(file).take(len - start).read_to_end(&mut buf)?;
        let ends_with_newline = buf.last() == Some(&b'\n');
        let (complete, _torn) = split_lines(&buf);
        // Unless the window reaches the start, its first line may begin mid-line.
        let skip = usize::from(start > 0);
        let last = complete
            .iter()
            .skip(skip)
            .rev()
            .find_map(|raw| entry_tail(raw));
        if last.is_some() || start == 0 {
            return Ok(Tail {
                last,
                ends_with_newline,
            });
        }
        window = window.saturating_mul(4);
    }
}

fn entry_tail(raw: &[u8]) -> Option<(u64, String)> {
    let value: Value = serde_json::from_slice(raw).ok()?;
    let seq = value.get("seq")?.as_u64()?;
    let hash = value.get("hash")?.as_str()?;
    is_hash(hash).then(|| (seq, hash.to_string()))
}
