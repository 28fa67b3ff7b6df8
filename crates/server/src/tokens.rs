//! Bearer tokens: made by the operator (`ragtrail tokens add`), each mapped to one tenant and
//! its roles. The file in the data directory keeps only each token's SHA-256, so reading it
//! gives nobody a token; the token itself is shown once, when it is made.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use ragtrail::{AccessContext, private_files as private};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// File name of the token list inside the data directory.
pub const TOKENS_FILE_NAME: &str = "tokens.json";

/// Every token starts with this, so a leaked one is easy to recognise (and to scan for).
pub const TOKEN_PREFIX: &str = "rtk_";

/// Version of the file format written.
const TOKENS_VERSION: u32 = 1;

/// Longest token name: names appear in traces and listings.
pub const MAX_NAME_CHARS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a token file: {message}")]
    Malformed { path: PathBuf, message: String },
    #[error("a token named {0:?} exists already: pick another name")]
    Exists(String),
    #[error(
        "a token named {0:?} was revoked on {1}; traces name their caller by token name, so a \
         name is never given to another token: pick another name"
    )]
    Revoked(String, String),
    #[error("no token named {0:?}")]
    NotFound(String),
    #[error("token name {0:?}: use 1 to {MAX_NAME_CHARS} letters, digits, '-', '_', '.' or '@'")]
    BadName(String),
    #[error("tenant {0:?}: give a non-empty name without control characters or commas")]
    BadTenant(String),
    #[error("role {0:?}: give a non-empty name without control characters or commas")]
    BadRole(String),
    #[error("the operating system gave no random bytes: {0}")]
    Random(String),
}

/// One token as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenEntry {
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    pub tenant: String,
    #[serde(default)]
    pub roles: Vec<String>,
    pub created: DateTime<Utc>,
    /// Set by `tokens revoke`; a revoked token is refused from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<DateTime<Utc>>,
}

impl TokenEntry {
    pub fn access(&self) -> AccessContext {
        AccessContext::new(self.tenant.clone(), self.roles.clone())
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    v: u32,
    tokens: Vec<TokenEntry>,
}

/// Who a valid token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token's name: recorded in the traces of the caller's runs.
    pub name: String,
    pub access: AccessContext,
}

/// The token file of a data directory. Changes are made under a lock file and written whole
/// to a temporary file then renamed, so a reader never sees half a list; a running server
/// re-reads the file when it changed, so a revoked token is refused at once.
#[derive(Debug)]
pub struct TokenStore {
    path: PathBuf,
    cache: Mutex<Option<Cached>>,
}

#[derive(Debug)]
struct Cached {
    stamp: (Option<SystemTime>, u64),
    tokens: Vec<TokenEntry>,
}

fn sha256_hex(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn valid_label(s: &str) -> bool {
    !s.trim().is_empty() && !s.chars().any(|c| c.is_control() || c == ',')
}

impl TokenStore {
    /// The token file of `data_dir` (it need not exist yet).
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self::at(data_dir.join(TOKENS_FILE_NAME))
    }

    pub fn at(path: PathBuf) -> Self {
        Self {
            path,
            cache: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> TokenError {
        TokenError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Every token, revoked ones included, in the order they were made.
    pub fn list(&self) -> Result<Vec<TokenEntry>, TokenError> {
        self.read().map(|f| f.tokens)
    }

    fn read(&self) -> Result<TokenFile, TokenError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TokenFile {
                    v: TOKENS_VERSION,
                    tokens: Vec::new(),
                });
            }
            Err(e) => return Err(self.io(e)),
        };
        let file: TokenFile =
            serde_json::from_slice(&bytes).map_err(|e| TokenError::Malformed {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        if file.v > TOKENS_VERSION {
            return Err(TokenError::Malformed {
                path: self.path.clone(),
                message: format!("format version {} is newer than this ragtrail", file.v),
            });
        }
        Ok(file)
    }

    /// Runs `change` on the list under an exclusive lock and writes the result.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<TokenEntry>) -> Result<T, TokenError>,
    ) -> Result<T, TokenError> {
        if let Some(dir) = self.path.parent() {
            private::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let lock_path = self.path.with_extension("lock");
        let lock = private::open(
            &lock_path,
            OpenOptions::new().create(true).truncate(false).write(true),
        )
        .map_err(|e| self.io(e))?;
        lock.lock().map_err(|e| self.io(e))?;
        let mut file = self.read()?;
        let out = change(&mut file.tokens)?;
        file.v = TOKENS_VERSION;
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| TokenError::Malformed {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        text.push('\n');
        let tmp = self.path.with_extension("json.tmp");
        let mut out_file = private::open(
            &tmp,
            OpenOptions::new().write(true).create(true).truncate(true),
        )
        .map_err(|e| self.io(e))?;
        out_file
            .write_all(text.as_bytes())
            .and_then(|()| out_file.sync_all())
            .map_err(|e| self.io(e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        drop(lock);
        Ok(out)
    }

    /// Makes a token for `name`, granting `tenant` and `roles`; returns the token, which is
    /// stored nowhere (only its SHA-256 is).
    pub fn add(&self, name: &str, tenant: &str, roles: &[String]) -> Result<String, TokenError> {
        let name = name.trim();
        if name.is_empty()
            || name.chars().count() > MAX_NAME_CHARS
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        {
            return Err(TokenError::BadName(name.to_string()));
        }
        if !valid_label(tenant) {
            return Err(TokenError::BadTenant(tenant.to_string()));
        }
        if let Some(bad) = roles.iter().find(|r| !valid_label(r)) {
            return Err(TokenError::BadRole(bad.clone()));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| TokenError::Random(e.to_string()))?;
        let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
        let access = AccessContext::new(tenant.trim(), roles.iter().map(|r| r.trim()));
        let entry = TokenEntry {
            name: name.to_string(),
            sha256: sha256_hex(&token),
            tenant: access.tenant,
            roles: access.roles,
            created: Utc::now(),
            revoked: None,
        };
        self.update(|tokens| {
            // A revoked token's name stays taken: a trace's caller must name one token only.
            if let Some(taken) = tokens.iter().find(|t| t.name == entry.name) {
                return Err(match taken.revoked {
                    None => TokenError::Exists(entry.name.clone()),
                    Some(when) => TokenError::Revoked(
                        entry.name.clone(),
                        when.format("%Y-%m-%d %H:%M UTC").to_string(),
                    ),
                });
            }
            tokens.push(entry);
            Ok(())
        })?;
        Ok(token)
    }

    /// Revokes the live token named `name`.
    pub fn revoke(&self, name: &str) -> Result<(), TokenError> {
        self.update(|tokens| {
            let entry = tokens
                .iter_mut()
                .find(|t| t.name == name && t.revoked.is_none())
                .ok_or_else(|| TokenError::NotFound(name.to_string()))?;
            entry.revoked = Some(Utc::now());
            Ok(())
        })
    }

    /// The grant of a presented token, or `None` when it is unknown or revoked. The file is
    /// re-read whenever its modification time or size changed.
    pub fn verify(&self, presented: &str) -> Result<Option<Grant>, TokenError> {
        let hash = sha256_hex(presented.trim());
        let stamp = match std::fs::metadata(&self.path) {
            Ok(m) => (m.modified().ok(), m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.as_ref().is_none_or(|c| c.stamp != stamp) {
            *cache = Some(Cached {
                stamp,
                tokens: self.read()?.tokens,
            });
        }
        Ok(cache.as_ref().and_then(|c| {
            c.tokens
                .iter()
                .find(|t| t.revoked.is_none() && t.sha256 == hash)
                .map(|t| Grant {
                    name: t.name.clone(),
                    access: t.access(),
                })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, TokenStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TokenStore::in_data_dir(dir.path());
        (dir, store)
    }

    #[test]
    fn a_token_is_stored_as_its_hash_only_and_verifies_until_revoked() {
        let (_dir, store) = store();
        let token = store
            .add("alice", "acme", &["hr".into(), "finance".into()])
            .expect("add");
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == TOKEN_PREFIX.len() + 64);
        let text = std::fs::read_to_string(store.path()).expect("file");
        assert!(!text.contains(&token[TOKEN_PREFIX.len()..]), "{text}");
        assert!(text.contains(&sha256_hex(&token)));
        let grant = store.verify(&token).expect("verify").expect("valid");
        assert_eq!(grant.name, "alice");
        assert_eq!(grant.access, AccessContext::new("acme", ["finance", "hr"]));
        assert_eq!(store.verify("rtk_nope").expect("verify"), None);
        store.revoke("alice").expect("revoke");
        assert_eq!(store.verify(&token).expect("verify"), None);
        assert!(matches!(
            store.revoke("alice"),
            Err(TokenError::NotFound(_))
        ));
        // The name stays taken once revoked; the old token stays refused.
        match store.add("alice", "globex", &[]) {
            Err(e @ TokenError::Revoked(..)) => {
                assert!(
                    e.to_string().contains("never given to another token"),
                    "{e}"
                )
            }
            other => panic!("a revoked name was given again: {other:?}"),
        }
        assert_eq!(store.verify(&token).expect("verify"), None);
        assert_eq!(store.list().expect("list").len(), 1);
    }

    #[test]
    fn names_tenants_and_duplicates_are_checked() {
        let (_dir, store) = store();
        assert!(matches!(
            store.add("../x", "acme", &[]),
            Err(TokenError::BadName(_))
        ));
        assert!(matches!(
            store.add("bob", " ", &[]),
            Err(TokenError::BadTenant(_))
        ));
        assert!(matches!(
            store.add("bob", "acme", &["a,b".into()]),
            Err(TokenError::BadRole(_))
        ));
        store.add("bob", "acme", &[]).expect("add");
        assert!(matches!(
            store.add("bob", "globex", &[]),
            Err(TokenError::Exists(_))
        ));
    }
}
