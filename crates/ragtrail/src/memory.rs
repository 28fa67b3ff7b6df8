//! Long-term memory of the asker: facts (key → value) that decide policy answers (a grade, a
//! base city, a start date), each with where it came from and when, kept per tenant and user.
//!
//! One JSON file per (tenant, user) under `DATA_DIR/memory/`, owner-only (0600), replaced
//! atomically (written beside, synced, renamed), so a crash leaves the old file or the new one,
//! never half of either. The file names its tenant and user, and a file that names another
//! asker than the one it is read for is refused: memory never crosses either.
//!
//! Who the asker is comes from the operator (the CLI's `--user`, a server token's name), never
//! from a question or a model.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::access::private;

pub mod learn;

/// Longest key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// Longest value accepted, in characters.
pub const MAX_VALUE_CHARS: usize = 200;
/// Facts kept per asker at most.
pub const MAX_FACTS: usize = 200;

/// The version of the memory file's format.
const FILE_VERSION: u32 = 1;

/// Whose memory: one user within one tenant, both named by the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asker {
    pub tenant: String,
    pub user: String,
}

impl Asker {
    /// An asker; the names are trimmed, and an empty one is refused.
    pub fn new(tenant: &str, user: &str) -> Result<Self, MemoryError> {
        let (tenant, user) = (tenant.trim(), user.trim());
        if tenant.is_empty() || user.is_empty() {
            return Err(MemoryError::NoAsker);
        }
        Ok(Self {
            tenant: tenant.to_string(),
            user: user.to_string(),
        })
    }
}

/// Where a fact came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FactSource {
    /// Set by the asker (`memory set`).
    Asker,
    /// Said by the asker in a question of this run (`ask --remember`).
    Said {
        #[serde(rename = "runId")]
        run_id: String,
    },
}

impl FactSource {
    /// How a person reads it: "set by the asker", "said in run …".
    pub fn describe(&self) -> String {
        match self {
            FactSource::Asker => "set by the asker".to_string(),
            FactSource::Said { run_id } => format!("said in run {run_id}"),
        }
    }
}

/// One remembered fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub key: String,
    pub value: String,
    pub source: FactSource,
    /// When it was set, RFC 3339 UTC.
    #[serde(rename = "setAt")]
    pub set_at: String,
}

/// Why the memory could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("no asker: the tenant and the user must both be named")]
    NoAsker,
    #[error("a fact's key must be 1 to {MAX_KEY_CHARS} characters, without line breaks")]
    BadKey,
    #[error("a fact's value must be 1 to {MAX_VALUE_CHARS} characters, without line breaks")]
    BadValue,
    #[error("at most {MAX_FACTS} facts are kept per asker; forget one first")]
    Full,
    #[error("reading or writing the memory file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the memory file {path} is corrupt ({source}); move it aside to start afresh, or repair it"
    )]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("the memory file {path} belongs to another asker; it is not read")]
    Foreign { path: PathBuf },
    #[error(
        "the memory file {path} is of format version {found}; this ragtrail reads {FILE_VERSION}"
    )]
    Version { path: PathBuf, found: u32 },
}

/// The file on disk.
#[derive(Debug, Serialize, Deserialize)]
struct MemoryFile {
    version: u32,
    tenant: String,
    user: String,
    facts: Vec<Fact>,
}

/// The memories of a data directory: `DATA_DIR/memory/<tenant>/<user>.json`.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    dir: PathBuf,
}

impl MemoryStore {
    /// The memories kept in `data_dir` (nothing is created until a fact is set).
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("memory"),
        }
    }

    /// The file of one asker; names are hex-encoded, so any name is a safe file name and two
    /// names never share a file.
    pub fn path_of(&self, asker: &Asker) -> PathBuf {
        self.dir
            .join(hex(&asker.tenant))
            .join(format!("{}.json", hex(&asker.user)))
    }

    /// The asker's facts, in the order they were first set (none when nothing was remembered).
    pub fn list(&self, asker: &Asker) -> Result<Vec<Fact>, MemoryError> {
        let path = self.path_of(asker);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(MemoryError::Io { path, source }),
        };
        let file: MemoryFile =
            serde_json::from_slice(&bytes).map_err(|source| MemoryError::Corrupt {
                path: path.clone(),
                source,
            })?;
        if file.version != FILE_VERSION {
            return Err(MemoryError::Version {
                path,
                found: file.version,
            });
        }
        if file.tenant != asker.tenant || file.user != asker.user {
            return Err(MemoryError::Foreign { path });
        }
        Ok(file.facts)
    }

    /// Remembers `key` = `value` (replacing the key's earlier value); returns the fact as
    /// stored and the one it replaced.
    pub fn set(
        &self,
        asker: &Asker,
        key: &str,
        value: &str,
        source: FactSource,
    ) -> Result<(Fact, Option<Fact>), MemoryError> {
        let key = clean(key, MAX_KEY_CHARS).ok_or(MemoryError::BadKey)?;
        let value = clean(value, MAX_VALUE_CHARS).ok_or(MemoryError::BadValue)?;
        let mut facts = self.list(asker)?;
        let fact = Fact {
            key: key.clone(),
            value,
            source,
            set_at: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        };
        let previous = match facts.iter_mut().find(|f| same_key(&f.key, &key)) {
            Some(existing) => Some(std::mem::replace(existing, fact.clone())),
            None => {
                if facts.len() >= MAX_FACTS {
                    return Err(MemoryError::Full);
                }
                facts.push(fact.clone());
                None
            }
        };
        self.write(asker, facts)?;
        Ok((fact, previous))
    }

    /// Forgets `key`: the fact is removed from the file (the file too when it was the last);
    /// returns the fact forgotten, `None` when there was none.
    pub fn forget(&self, asker: &Asker, key: &str) -> Result<Option<Fact>, MemoryError> {
        let mut facts = self.list(asker)?;
        let Some(at) = facts.iter().position(|f| same_key(&f.key, key.trim())) else {
            return Ok(None);
        };
        let gone = facts.remove(at);
        if facts.is_empty() {
            let path = self.path_of(asker);
            std::fs::remove_file(&path).map_err(|source| MemoryError::Io { path, source })?;
        } else {
            self.write(asker, facts)?;
        }
        Ok(Some(gone))
    }

    /// Replaces the asker's file atomically: a temporary file beside it, synced, renamed over
    /// it, and the folder synced so the rename itself survives a crash.
    fn write(&self, asker: &Asker, facts: Vec<Fact>) -> Result<(), MemoryError> {
        let path = self.path_of(asker);
        let io = |source| MemoryError::Io {
            path: path.clone(),
            source,
        };
        let folder = path.parent().unwrap_or(&self.dir).to_path_buf();
        private::own_dir(&self.dir).map_err(io)?;
        private::own_dir(&folder).map_err(io)?;
        let file = MemoryFile {
            version: FILE_VERSION,
            tenant: asker.tenant.clone(),
            user: asker.user.clone(),
            facts,
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| io(e.into()))?;
        bytes.push(b'\n');
        let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
        let result = (|| {
            let mut f = private::open(
                &tmp,
                OpenOptions::new().write(true).create(true).truncate(true),
            )?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            if let Ok(dir) = std::fs::File::open(&folder) {
                let _ = dir.sync_all();
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

/// Keys compare without case and surrounding space ("Grade" is "grade").
pub fn same_key(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// A key or value trimmed, inner runs of space made one; `None` when empty, too long or
/// holding a line break.
fn clean(s: &str, max: usize) -> Option<String> {
    if s.contains(['\n', '\r']) {
        return None;
    }
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let n = s.chars().count();
    (n > 0 && n <= max).then_some(s)
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asker(tenant: &str, user: &str) -> Asker {
        Asker::new(tenant, user).expect("asker")
    }

    #[test]
    fn set_list_forget_per_asker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MemoryStore::new(dir.path());
        let alice = asker("default", "alice");
        let (fact, before) = store
            .set(&alice, " grade ", "B", FactSource::Asker)
            .expect("set");
        assert_eq!((fact.key.as_str(), fact.value.as_str()), ("grade", "B"));
        assert!(before.is_none());
        store
            .set(&alice, "base city", "成都", FactSource::Asker)
            .expect("set");
        let (_, before) = store
            .set(&alice, "Grade", "C", FactSource::Asker)
            .expect("set");
        assert_eq!(before.map(|f| f.value), Some("B".to_string()));
        let listed: Vec<(String, String)> = store
            .list(&alice)
            .expect("list")
            .into_iter()
            .map(|f| (f.key, f.value))
            .collect();
        assert_eq!(
            listed,
            [
                ("Grade".to_string(), "C".to_string()),
                ("base city".to_string(), "成都".to_string())
            ]
        );
        // Neither another user of the tenant nor the same user of another tenant sees them.
        assert!(
            store
                .list(&asker("default", "bob"))
                .expect("bob")
                .is_empty()
        );
        assert!(
            store
                .list(&asker("globex", "alice"))
                .expect("globex")
                .is_empty()
        );
        // Forgotten means gone from the file, not hidden.
        let gone = store.forget(&alice, "GRADE").expect("forget");
        assert_eq!(gone.map(|f| f.value), Some("C".to_string()));
        let text = std::fs::read_to_string(store.path_of(&alice)).expect("file");
        assert!(!text.contains("\"C\"") && text.contains("成都"), "{text}");
        assert!(store.forget(&alice, "grade").expect("again").is_none());
        store.forget(&alice, "base city").expect("last");
        assert!(!store.path_of(&alice).exists());
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_private_and_a_corrupt_or_foreign_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MemoryStore::new(dir.path());
        let alice = asker("default", "alice");
        store
            .set(&alice, "grade", "B", FactSource::Asker)
            .expect("set");
        let path = store.path_of(&alice);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A file copied over another asker's is not read for them.
        let bob = asker("default", "bob");
        let bob_path = store.path_of(&bob);
        std::fs::copy(&path, &bob_path).expect("copy");
        assert!(matches!(store.list(&bob), Err(MemoryError::Foreign { .. })));
        std::fs::write(&path, b"{\"version\":1,").expect("corrupt");
        let err = store.list(&alice).expect_err("corrupt");
        assert!(matches!(err, MemoryError::Corrupt { .. }));
        assert!(err.to_string().contains("corrupt"), "{err}");
        // Setting over a corrupt file refuses rather than losing what it held.
        assert!(store.set(&alice, "grade", "C", FactSource::Asker).is_err());
    }

    #[test]
    fn bad_keys_and_values_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MemoryStore::new(dir.path());
        let alice = asker("default", "alice");
        assert!(matches!(
            store.set(&alice, "  ", "B", FactSource::Asker),
            Err(MemoryError::BadKey)
        ));
        assert!(matches!(
            store.set(&alice, "grade", "B\nC", FactSource::Asker),
            Err(MemoryError::BadValue)
        ));
        assert!(matches!(
            Asker::new("default", " "),
            Err(MemoryError::NoAsker)
        ));
    }
}
