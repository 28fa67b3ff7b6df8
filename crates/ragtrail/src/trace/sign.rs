//! Operator signatures: an Ed25519 key signs each finished run's final hash and each ledger
//! entry, so anyone with the public key can check a trace without the store or any secret —
//! and nobody without the private key can rewrite a run and its ledger entry consistently
//! (which anyone able to write the trace directory can do to a hash chain alone).
//!
//! Key files are one line of text: `ragtrail-ed25519-secret <64 hex>` (the 32-byte seed) and
//! `ragtrail-ed25519 <64 hex>` (the public key). A key is named by its id, the first 16 hex
//! digits of the SHA-256 of the public key bytes; the ledger records the id of the key that
//! signed each entry, so keys can be rotated and old entries still checked.

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use ed25519_dalek::{Signature, Signer as _, SigningKey as DalekSigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::error::TraceError;
use super::seal::open_private;

const SECRET_TAG: &str = "ragtrail-ed25519-secret";
const PUBLIC_TAG: &str = "ragtrail-ed25519";

/// Why a key file could not be read, written or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{}: {error}", path.display())]
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a ragtrail {what} key ({why})", path.display())]
    Malformed {
        path: std::path::PathBuf,
        what: &'static str,
        why: String,
    },
    #[error("the operating system gave no random bytes for a new key: {0}")]
    Random(String),
    #[error(
        "{}: a signing key is already there; move it away first to replace it (its public \
         key stays in the data directory's keyring, so the runs it signed still verify)",
        path.display()
    )]
    Exists { path: std::path::PathBuf },
}

/// The message signed for a run: its id and the hash of its `run_finished` line.
pub fn run_message(run_id: Uuid, final_hash: &str) -> Vec<u8> {
    format!("ragtrail-run-v1\n{run_id}\n{final_hash}").into_bytes()
}

/// The message signed for a ledger entry: its hash (which covers every other field of it).
pub fn entry_message(entry_hash: &str) -> Vec<u8> {
    format!("ragtrail-ledger-v1\n{entry_hash}").into_bytes()
}

fn key_id_of(public: &VerifyingKey) -> String {
    hex::encode(&Sha256::digest(public.as_bytes())[..8])
}

/// The operator's private signing key.
pub struct SigningKey {
    key: DalekSigningKey,
    id: String,
}

impl fmt::Debug for SigningKey {
    // Hand-written so the secret never ends up in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("key_id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    fn from_seed(seed: &[u8; 32]) -> Self {
        let key = DalekSigningKey::from_bytes(seed);
        let id = key_id_of(&key.verifying_key());
        Self { key, id }
    }

    /// A new key from the operating system's random source.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Self::from_seed(&seed))
    }

    /// Writes a new key to `path` (owner-only, mode 0600; never over an existing file).
    pub fn generate_into(path: &Path) -> Result<Self, KeyError> {
        let key = Self::generate()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|error| KeyError::Io {
                path: dir.to_path_buf(),
                error,
            })?;
        }
        let mut file = match open_private(path, OpenOptions::new().write(true).create_new(true)) {
            Ok(f) => f,
            Err(TraceError::Io { error, .. })
                if error.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                return Err(KeyError::Exists {
                    path: path.to_path_buf(),
                });
            }
            Err(TraceError::Io { path, error }) => return Err(KeyError::Io { path, error }),
            Err(other) => {
                return Err(KeyError::Io {
                    path: path.to_path_buf(),
                    error: std::io::Error::other(other.to_string()),
                });
            }
        };
        let text = format!("{SECRET_TAG} {}\n", hex::encode(key.key.to_bytes()));
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| KeyError::Io {
                path: path.to_path_buf(),
                error,
            })?;
        Ok(key)
    }

    /// Reads a key written by [`SigningKey::generate_into`].
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|error| KeyError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let bytes = parse_tagged(&text, SECRET_TAG).map_err(|why| KeyError::Malformed {
            path: path.to_path_buf(),
            what: "signing",
            why,
        })?;
        Ok(Self::from_seed(&bytes))
    }

    /// The key's id, as the ledger records it.
    pub fn key_id(&self) -> &str {
        &self.id
    }

    /// The public half, to hand to whoever verifies.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            key: self.key.verifying_key(),
            id: self.id.clone(),
        }
    }

    /// Lowercase hex of the Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> String {
        hex::encode(self.key.sign(message).to_bytes())
    }
}

/// A public key that verifies what a [`SigningKey`] signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    id: String,
}

impl PublicKey {
    /// Parses `ragtrail-ed25519 <64 hex>` (or the bare 64 hex digits).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bytes = parse_tagged(text, PUBLIC_TAG)?;
        let key = VerifyingKey::from_bytes(&bytes)
            .map_err(|_| "the 32 bytes are not an Ed25519 public key".to_string())?;
        let id = key_id_of(&key);
        Ok(Self { key, id })
    }

    /// Reads a public key file.
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|error| KeyError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text).map_err(|why| KeyError::Malformed {
            path: path.to_path_buf(),
            what: "public",
            why,
        })
    }

    pub fn key_id(&self) -> &str {
        &self.id
    }

    /// The one-line text form, as `ragtrail keys public` prints it.
    pub fn to_text(&self) -> String {
        format!("{PUBLIC_TAG} {}", hex::encode(self.key.as_bytes()))
    }

    /// Whether `signature_hex` is this key's signature of `message` (strict verification: no
    /// malleable or small-order encodings).
    pub fn verifies(&self, message: &[u8], signature_hex: &str) -> bool {
        let Ok(bytes) = hex::decode(signature_hex) else {
            return false;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(bytes.as_slice()) else {
            return false;
        };
        self.key
            .verify_strict(message, &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

/// 32 bytes from `<tag> <64 hex>`, or from the bare hex.
fn parse_tagged(text: &str, tag: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    let hex_part = match text.split_once(char::is_whitespace) {
        Some((t, rest)) if t == tag => rest.trim(),
        Some((t, _)) => return Err(format!("it starts with {t:?}, not {tag:?}")),
        None => text,
    };
    let bytes = hex::decode(hex_part).map_err(|e| format!("not hex: {e}"))?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| format!("{} bytes, not 32", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_its_files_and_verifies_only_its_own_signatures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/signing-key");
        let key = SigningKey::generate_into(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert!(matches!(
            SigningKey::generate_into(&path),
            Err(KeyError::Exists { .. })
        ));
        let again = SigningKey::read(&path).unwrap();
        assert_eq!(again.key_id(), key.key_id());
        let public = PublicKey::parse(&key.public_key().to_text()).unwrap();
        assert_eq!(public.key_id(), key.key_id());
        let sig = key.sign(b"message");
        assert!(public.verifies(b"message", &sig));
        assert!(!public.verifies(b"massage", &sig));
        let other = SigningKey::generate().unwrap();
        assert_ne!(other.key_id(), key.key_id());
        assert!(!other.public_key().verifies(b"message", &sig));
        assert!(!public.verifies(b"message", "00"));
        // The secret file is not a public key, and says so.
        assert!(PublicKey::read(&path).is_err());
        assert!(!format!("{key:?}").contains(&hex::encode(key.key.to_bytes())));
    }
}
