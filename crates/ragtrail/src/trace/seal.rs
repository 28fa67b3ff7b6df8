//! Writing a trace or ledger line: its hash, its timestamp, its file's permissions. Both the
//! trace writer and the ledger use these, so they sit below both.

use std::fs::{File, OpenOptions};
use std::path::Path;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;

use super::canonical::{CanonicalObject, HASH_KEY, digest_hex, numbers_round_trip, stabilize};
use super::error::TraceError;

/// Hashes `value` (its `hash` key, if any, replaced) and returns the value as readers will
/// parse it, the line to write (canonical form plus newline) and the hash.
///
/// Every event of every run passes here, so the object is written once: the hash covers its
/// canonical text and the line is that text with the `hash` entry put in its place.
pub(crate) fn seal(
    mut value: Value,
    key: Option<&[u8]>,
) -> Result<(Value, String, String), TraceError> {
    if let Some(map) = value.as_object_mut() {
        map.remove(HASH_KEY);
    }
    if !numbers_round_trip(&value) {
        value = stabilize(value).map_err(TraceError::Encode)?;
    }
    let Some(map) = value.as_object_mut() else {
        return Err(TraceError::Misuse("a trace line must be a JSON object"));
    };
    let object = CanonicalObject::new(map);
    let hash = digest_hex(object.text().as_bytes(), key);
    let hash_value = Value::String(hash.clone());
    let mut line = object.text_with(HASH_KEY, &hash_value);
    line.push('\n');
    map.insert(HASH_KEY.to_string(), hash_value);
    Ok((value, line, hash))
}

/// Now, cut to the milliseconds the format records, so the returned event equals the read one.
pub(crate) fn now_millis() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// Opens owner-only (`access::private`): traces hold questions and document excerpts.
pub(crate) fn open_private(path: &Path, options: &mut OpenOptions) -> Result<File, TraceError> {
    crate::access::private::open(path, options).map_err(|e| TraceError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::canonical::{awkward_floats, canonical_json, event_hash};
    use serde_json::json;

    #[test]
    fn the_line_is_the_canonical_sealed_value_and_the_hash_covers_it_without_its_hash() {
        for (i, x) in awkward_floats(0.3).take(2_000).enumerate() {
            let value = json!({
                "seq": i, "hash": "stale", "hits": [{"score": x, "titlePath": "出差 / 住宿"}],
                "prevHash": "p", "a": null, "z": [x * 1e300, -x],
            });
            for key in [None, Some(&b"operator key"[..])] {
                let (sealed, line, hash) = seal(value.clone(), key).expect("seal");
                assert_eq!(line, format!("{}\n", canonical_json(&sealed)));
                assert_eq!(hash, event_hash(&sealed, key));
                assert_eq!(sealed["hash"], json!(hash));
                let back: Value = serde_json::from_str(&line).expect("parse");
                assert_eq!(back, sealed);
            }
        }
    }

    #[test]
    fn only_objects_are_sealed() {
        assert!(matches!(
            seal(json!([1, 2]), None),
            Err(TraceError::Misuse(_))
        ));
    }
}
