//! Canonical JSON and the line hash.
//!
//! Both the writer and the verifier hash the canonical form of a parsed `serde_json::Value`, so
//! a line's hash depends only on its data, never on how the bytes happen to be laid out, and
//! fields added by newer writers are covered without this version knowing them.

use std::fmt::Write as _;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `prevHash` of the first line of a trace or ledger: nothing comes before it.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Name of the key that holds a line's own hash; it is left out of what is hashed.
pub(crate) const HASH_KEY: &str = "hash";

/// How often [`stabilize_with_text`] re-parses before giving up on a fixed point.
const STABILIZE_ROUNDS: usize = 4;

/// Serialises `value` as canonical JSON: object keys sorted bytewise, no insignificant
/// whitespace, strings escaped and numbers formatted as `serde_json` does.
///
/// Keys are sorted here rather than relying on the map type, so the output stays canonical even if
/// some crate in the build turns on `serde_json/preserve_order`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, None);
    out
}

/// Lowercase hex hash of `value` without its top-level `hash` key: SHA-256 of the canonical
/// form, or HMAC-SHA-256 of it when the operator's trace `key` is given.
pub fn event_hash(value: &Value, key: Option<&[u8]>) -> String {
    let mut text = String::new();
    write_value(&mut text, value, Some(HASH_KEY));
    digest_hex(text.as_bytes(), key)
}

/// Hash of already canonical bytes; split out so tests can check it against `sha256sum`.
pub fn digest_hex(bytes: &[u8], key: Option<&[u8]>) -> String {
    match key {
        Some(key) => {
            let mut mac = <Hmac<Sha256> as Mac>::new(&hmac_block_key(key).into());
            mac.update(bytes);
            hex::encode(mac.finalize().into_bytes())
        }
        None => hex::encode(Sha256::digest(bytes)),
    }
}

/// The key as HMAC uses it (RFC 2104): hashed when longer than a SHA-256 block, then padded with
/// zeros to the block size. Doing it here keeps hashing total, with no "invalid length" error
/// path for a key that HMAC accepts at any length.
fn hmac_block_key(key: &[u8]) -> [u8; 64] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        let digest = Sha256::digest(key);
        block[..digest.len()].copy_from_slice(&digest);
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    block
}

/// Whether `s` looks like one of our hashes: 64 lowercase hex digits.
pub(crate) fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether every non-integer number of `value` reads back, from the text it prints as, as the
/// same number: then the value's canonical text is a fixed point and [`stabilize`] has nothing
/// to do. Checking the numbers alone spares the writer a parse of the whole line; strings and
/// integers always read back as written.
pub(crate) fn numbers_round_trip(value: &Value) -> bool {
    match value {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            serde_json::from_str::<serde_json::Number>(&n.to_string()).is_ok_and(|back| back == *n)
        }
        Value::Array(items) => items.iter().all(numbers_round_trip),
        Value::Object(map) => map.values().all(numbers_round_trip),
        _ => true,
    }
}

/// Returns a value whose canonical text parses back to itself.
///
/// `serde_json` parses floats without the `float_roundtrip` feature, which can land one ulp away
/// from the number that was printed; a score hashed before that drift would then fail to verify.
/// Re-parsing until the text is a fixed point makes the writer hash exactly what readers see.
pub(crate) fn stabilize(value: Value) -> Result<Value, serde_json::Error> {
    let mut current = value;
    let mut text = canonical_json(&current);
    for _ in 0..STABILIZE_ROUNDS {
        let parsed: Value = serde_json::from_str(&text)?;
        let again = canonical_json(&parsed);
        if again == text {
            return Ok(parsed);
        }
        current = parsed;
        text = again;
    }
    // Still drifting: fall back to 15 significant digits, which parse exactly.
    let rounded = round_floats(current);
    serde_json::from_str(&canonical_json(&rounded))
}

/// A JSON object's canonical text, its entries written once: a line's hash covers the text
/// without the `hash` entry and the line holds the text with it, and neither needs the object
/// written again.
pub(crate) struct CanonicalObject<'a> {
    /// (key, `"key":value`), sorted bytewise by key.
    entries: Vec<(&'a str, String)>,
}

impl<'a> CanonicalObject<'a> {
    pub(crate) fn new(map: &'a serde_json::Map<String, Value>) -> Self {
        let mut entries: Vec<(&str, String)> = map
            .iter()
            .map(|(k, v)| (k.as_str(), entry_text(k, v)))
            .collect();
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        Self { entries }
    }

    /// The object's canonical text.
    pub(crate) fn text(&self) -> String {
        join_entries(self.entries.iter().map(|(_, e)| e.as_str()))
    }

    /// The canonical text of the object with one more entry, `key` not already among its keys.
    pub(crate) fn text_with(&self, key: &str, value: &Value) -> String {
        let at = self
            .entries
            .partition_point(|(k, _)| k.as_bytes() < key.as_bytes());
        let (before, after) = self.entries.split_at(at);
        let extra = entry_text(key, value);
        join_entries(
            before
                .iter()
                .map(|(_, e)| e.as_str())
                .chain(std::iter::once(extra.as_str()))
                .chain(after.iter().map(|(_, e)| e.as_str())),
        )
    }
}

/// `{` + the entries, comma-separated + `}`.
fn join_entries<'a>(entries: impl Iterator<Item = &'a str> + Clone) -> String {
    let len = entries.clone().map(|e| e.len() + 1).sum::<usize>() + 1;
    let mut out = String::with_capacity(len);
    out.push('{');
    for (i, entry) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(entry);
    }
    out.push('}');
    out
}

fn entry_text(key: &str, value: &Value) -> String {
    let mut out = String::new();
    write_string(&mut out, key);
    out.push(':');
    write_value(&mut out, value, None);
    out
}

/// Rounds every non-integer number to 15 significant digits (`f64::DIGITS`).
fn round_floats(value: Value) -> Value {
    match value {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            let rounded = n
                .as_f64()
                .and_then(|f| format!("{f:.14e}").parse::<f64>().ok())
                .and_then(serde_json::Number::from_f64);
            rounded.map_or(Value::Number(n), Value::Number)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(round_floats).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, round_floats(v))).collect())
        }
        other => other,
    }
}

fn write_value(out: &mut String, value: &Value, skip_key: Option<&str>) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // `Number`'s Display is serde_json's own number formatting.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, None);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(k, _)| Some(k.as_str()) != skip_key)
                .collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, v, None);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    // Serialising a &str into JSON cannot fail; the fallback keeps this total anyway.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// Scores like RRF sums, printed with 17 digits, where a parser without `float_roundtrip` may
/// drift: what the round-trip tests feed the writer.
#[cfg(test)]
pub(crate) fn awkward_floats(seed: f64) -> impl Iterator<Item = f64> {
    (0..).scan(seed, |x, i: u32| {
        *x = (*x * 1.618_033_988_749_895 + f64::from(i) / 7.0).fract() / 61.0 + 1e-3;
        Some(*x)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_dropped() {
        let v = json!({"b": 1, "a": {"d": [1, 2, {"z": null, "y": true}], "c": "x"}, "B": 0.5});
        assert_eq!(
            canonical_json(&v),
            r#"{"B":0.5,"a":{"c":"x","d":[1,2,{"y":true,"z":null}]},"b":1}"#
        );
    }

    #[test]
    fn strings_are_escaped_and_unicode_kept() {
        let v = json!({"q": "line\n\"quoted\" \\ 年假 \u{1}"});
        assert_eq!(
            canonical_json(&v),
            "{\"q\":\"line\\n\\\"quoted\\\" \\\\ 年假 \\u0001\"}"
        );
    }

    #[test]
    fn hash_matches_sha256sum_of_hand_written_canonical_text() {
        // printf '%s' '{"a":1,"b":[true,null],"c":"x"}' | sha256sum
        let expected = "b4d9bb599eed5aa88d49671502b834be9d301293f1054c252deae8d0b5b54c57";
        let v = json!({"c": "x", "hash": "ignored", "b": [true, null], "a": 1});
        assert_eq!(
            canonical_json(&json!({"c": "x", "b": [true, null], "a": 1})),
            r#"{"a":1,"b":[true,null],"c":"x"}"#
        );
        assert_eq!(event_hash(&v, None), expected);
        assert_eq!(
            digest_hex(br#"{"a":1,"b":[true,null],"c":"x"}"#, None),
            expected
        );
    }

    #[test]
    fn keyed_hash_matches_openssl_hmac() {
        // printf '%s' '{"a":1,"b":[true,null],"c":"x"}' | openssl dgst -sha256 -hmac secret
        let expected = "fc16a79fe00b5244a3446aa58b816403af2c19b253954929d2fa11f5e8689cce";
        let v = json!({"c": "x", "b": [true, null], "a": 1});
        assert_eq!(event_hash(&v, Some(b"secret")), expected);
        assert_ne!(event_hash(&v, Some(b"secret")), event_hash(&v, None));
        assert_ne!(
            event_hash(&v, Some(b"secret")),
            event_hash(&v, Some(b"other"))
        );
        // A key longer than the SHA-256 block is hashed first, as openssl does:
        // ... | openssl dgst -sha256 -mac HMAC -macopt hexkey:<hex of 100 × 'k'>
        let long_key = vec![b'k'; 100];
        assert_eq!(
            event_hash(&v, Some(&long_key)),
            "ec0d47acb67ef9dbf62b4ea4e5c51454e843d2543a268176e36082e7852e3558"
        );
    }

    #[test]
    fn hash_key_only_skipped_at_top_level() {
        let with_nested = json!({"a": {"hash": 1}});
        let without_nested = json!({"a": {}});
        assert_ne!(
            event_hash(&with_nested, None),
            event_hash(&without_nested, None)
        );
        assert_eq!(
            event_hash(&json!({"a": 1, "hash": "x"}), None),
            event_hash(&json!({"a": 1}), None)
        );
    }

    #[test]
    fn stabilized_floats_survive_a_text_round_trip() {
        // Scores like RRF sums print with 17 digits, where default float parsing may drift.
        for (i, x) in awkward_floats(0.1).take(20_000).enumerate() {
            let v = stabilize(json!({ "score": x, "i": i })).unwrap();
            let text = canonical_json(&v);
            let back: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(canonical_json(&back), text, "unstable at {x:e}");
            // The writer skips `stabilize` when the numbers read back: then the text must be a
            // fixed point as it stands.
            if numbers_round_trip(&v) {
                assert_eq!(back, v, "{x:e} said to round-trip but did not");
            }
        }
    }

    #[test]
    fn numbers_round_trip_looks_into_arrays_and_objects() {
        assert!(numbers_round_trip(
            &json!({"a": [1, -2, 0.5, {"b": 1e-7}], "c": "0.1"})
        ));
        assert!(numbers_round_trip(&json!(f64::MAX)));
        assert!(numbers_round_trip(&json!(5e-324)));
    }

    #[test]
    fn canonical_object_inserts_a_key_where_sorting_puts_it() {
        let map = json!({"seq": 1, "b": [2.5, null], "ts": "x", "A": {"z": 1, "y": 2}});
        let Value::Object(map) = map else {
            unreachable!()
        };
        let object = CanonicalObject::new(&map);
        assert_eq!(object.text(), canonical_json(&Value::Object(map.clone())));
        for key in ["hash", "0", "zz", "b0", "seq0"] {
            let mut with = map.clone();
            with.insert(key.to_string(), json!("h"));
            assert_eq!(
                object.text_with(key, &json!("h")),
                canonical_json(&Value::Object(with)),
                "{key}"
            );
        }
        let no_entries = serde_json::Map::new();
        let empty = CanonicalObject::new(&no_entries);
        assert_eq!(empty.text(), "{}");
        assert_eq!(empty.text_with("hash", &json!("h")), r#"{"hash":"h"}"#);
    }

    #[test]
    fn is_hash_accepts_only_lowercase_hex_of_length_64() {
        assert!(is_hash(ZERO_HASH));
        assert!(!is_hash(&"A".repeat(64)));
        assert!(!is_hash(&"a".repeat(63)));
    }
}
