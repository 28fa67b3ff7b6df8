//! Writing a trace or ledger line: its hash, its timestamp, its file's permissions. Both the
//! trace writer and the ledger use these, so they sit below both.

use std::fs::{File, OpenOptions};
use std::path::Path;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;

use super::canonical::{HASH_KEY, canonical_json, digest_hex, event_hash, stabilize_with_text};
use super::error::TraceError;

/// Hashes `value` (its `hash` key, if any, replaced) and returns the value as readers will
/// parse it, the line to write (canonical form plus newline) and the hash.
pub(crate) fn seal(
    mut value: Value,
    key: Option<&[u8]>,
) -> Result<(Value, String, String), TraceError> {
    if let Some(map) = value.as_object_mut() {
        map.remove(HASH_KEY);
    }
    let (mut value, text) = stabilize_with_text(value).map_err(TraceError::Encode)?;
    // The stable text is the canonical form of a value without `hash`: what the hash covers.
    let hash = match text {
        Some(text) => digest_hex(text.as_bytes(), key),
        None => event_hash(&value, key),
    };
    match value.as_object_mut() {
        Some(map) => {
            map.insert(HASH_KEY.to_string(), Value::String(hash.clone()));
        }
        None => return Err(TraceError::Misuse("a trace line must be a JSON object")),
    }
    let mut line = canonical_json(&value);
    line.push('\n');
    Ok((value, line, hash))
}

/// Now, cut to the milliseconds the format records, so the returned event equals the read one.
pub(crate) fn now_millis() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// Opens with mode 0600 on unix: traces hold questions and document excerpts.
pub(crate) fn open_private(path: &Path, options: &mut OpenOptions) -> Result<File, TraceError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map_err(|e| TraceError::io(path, e))
}
