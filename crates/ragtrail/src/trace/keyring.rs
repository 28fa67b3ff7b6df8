//! The keyring: the public keys the operator trusts to have signed runs — every key that
//! signed runs from this data directory, retired ones included. A rotation moves the old
//! secret away, but runs signed with it must still verify: their ledger entries name the old
//! key, and its public half stays here. Deleting a line withdraws the operator's trust in a
//! key (its runs then read "signed by a key not at hand").
//!
//! The file holds one public key per line as `ragtrail keys public` prints it; blank lines and
//! lines starting with `#` are comments.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::TraceError;
use super::seal::open_private;
use super::sign::{KeyError, PublicKey};

/// File name of the keyring inside the data directory.
pub const KEYRING_FILE: &str = "keyring";

/// `<data_dir>/keyring`.
pub fn keyring_path(data_dir: &Path) -> PathBuf {
    data_dir.join(KEYRING_FILE)
}

/// The keys in the keyring at `path`, in file order; none when there is no keyring yet.
pub fn read_keyring(path: &Path) -> Result<Vec<PublicKey>, KeyError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(KeyError::Io {
                path: path.to_path_buf(),
                error,
            });
        }
    };
    let mut keys: Vec<PublicKey> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = PublicKey::parse(line).map_err(|why| KeyError::Malformed {
            path: path.to_path_buf(),
            what: "keyring",
            why: format!("line {}: {why}", i + 1),
        })?;
        if !keys.iter().any(|k| k.key_id() == key.key_id()) {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// Adds `key` to the keyring at `path` (created owner-only), after a `# note` line, unless it
/// is there already. Returns whether it was added.
pub fn add_to_keyring(path: &Path, key: &PublicKey, note: &str) -> Result<bool, KeyError> {
    if read_keyring(path)?
        .iter()
        .any(|k| k.key_id() == key.key_id())
    {
        return Ok(false);
    }
    let io = |error| KeyError::Io {
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|error| KeyError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
    }
    let mut file =
        open_private(path, OpenOptions::new().append(true).create(true)).map_err(|e| match e {
            TraceError::Io { path, error } => KeyError::Io { path, error },
            other => KeyError::Io {
                path: path.to_path_buf(),
                error: std::io::Error::other(other.to_string()),
            },
        })?;
    // One write, so two adds at once never interleave within a line.
    let note = note.replace('\n', " ");
    let text = format!("# {} {note}\n{}\n", key.key_id(), key.to_text());
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::SigningKey;

    #[test]
    fn keys_are_added_once_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = keyring_path(dir.path());
        assert!(
            read_keyring(&path).unwrap().is_empty(),
            "no keyring: no keys"
        );
        let (a, b) = (
            SigningKey::generate().unwrap().public_key(),
            SigningKey::generate().unwrap().public_key(),
        );
        assert!(add_to_keyring(&path, &a, "generated 2026-11-30").unwrap());
        assert!(add_to_keyring(&path, &b, "generated 2026-12-04").unwrap());
        assert!(!add_to_keyring(&path, &a, "again").unwrap());
        let ids: Vec<String> = read_keyring(&path)
            .unwrap()
            .iter()
            .map(|k| k.key_id().to_string())
            .collect();
        assert_eq!(ids, vec![a.key_id(), b.key_id()]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(&format!("# {} generated 2026-11-30\n", a.key_id())),
            "{text}"
        );
    }

    #[test]
    fn a_line_that_is_not_a_key_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = keyring_path(dir.path());
        let key = SigningKey::generate().unwrap().public_key();
        std::fs::write(&path, format!("{}\n\nnot a key\n", key.to_text())).unwrap();
        let error = read_keyring(&path).expect_err("malformed").to_string();
        assert!(error.contains("line 3:"), "{error}");
        assert!(error.contains("not a ragtrail keyring key"), "{error}");
    }
}
