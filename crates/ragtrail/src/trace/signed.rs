//! Verifying a trace as a third party: the hash chain and the ledger entry (as `audit` does),
//! the operator's signatures with nothing but the public key, and — against a ledger head
//! pinned elsewhere — that no run was removed from the ledger's end. Needs neither the store
//! nor any secret.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

use super::canonical::is_hash;
use super::error::TraceError;
use super::integrity::check_integrity;
use super::ledger::{Ledger, ledger_path, read_ledger};
use super::reader::TraceFile;
use super::sign::{PublicKey, entry_message, run_message};
use super::verify::Verdict;

/// The last entry of a ledger, as `ragtrail ledger head` prints it: `SEQ:HASH`. Kept somewhere
/// the trace directory's writers cannot reach, it shows later whether entries were removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerHead {
    pub seq: u64,
    pub hash: String,
}

impl fmt::Display for LedgerHead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

impl FromStr for LedgerHead {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("`{s}` is not a ledger head: expected SEQ:HASH (from `ragtrail ledger head`)")
        };
        let (seq, hash) = s.trim().split_once(':').ok_or_else(bad)?;
        let seq = seq.parse().map_err(|_| bad())?;
        if !is_hash(hash) {
            return Err(bad());
        }
        Ok(Self {
            seq,
            hash: hash.to_string(),
        })
    }
}

/// The head of the ledger in `dir` (a trace directory or a ledger file); `None` when it has
/// no entries.
pub fn ledger_head(dir: &Path) -> Result<Option<LedgerHead>, TraceError> {
    let ledger = read_ledger(&ledger_path(dir))?;
    Ok(ledger.entries.last().map(|l| LedgerHead {
        seq: l.entry.seq,
        hash: l.entry.hash.clone(),
    }))
}

/// One check of [`verify_signed`] and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignedCheck {
    /// `chain and ledger`, `signature`, `ledger signatures`, `pinned head`.
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Everything [`verify_signed`] checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignedReport {
    pub run_id: Option<String>,
    pub checks: Vec<SignedCheck>,
}

impl SignedReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// Checks `trace`: its chain and ledger entry (with the HMAC `key` when the traces are keyed),
/// then, when `keys` are given, that the run's ledger entry is signed by one of them (the run's
/// final hash and the entry both), and every other entry signed by one of them verifies; with
/// a `pinned` head, that the ledger still reaches it unchanged.
pub fn verify_signed(
    trace: &Path,
    keys: &[PublicKey],
    pinned: Option<&LedgerHead>,
    key: Option<&[u8]>,
) -> Result<SignedReport, TraceError> {
    let mut checks = Vec::new();
    let (integrity, file) = check_integrity(trace, key)?;
    checks.push(SignedCheck {
        name: "chain and ledger",
        ok: integrity.verdict == Verdict::Clean,
        detail: if integrity.problems.is_empty() {
            format!(
                "{} lines chain to the final hash the ledger recorded",
                file.as_ref().map_or(0, |f| f.lines.len())
            )
        } else {
            integrity.problems.join("; ")
        },
    });
    let run_id = file.as_ref().and_then(|f| f.run_id());
    let ledger = ledger_beside(trace)?;
    if !keys.is_empty() {
        let name = file_name(trace);
        let final_hash = file.as_ref().and_then(|f| f.final_hash());
        checks.push(run_signature(
            ledger.as_ref(),
            run_id,
            &name,
            final_hash,
            keys,
        ));
        if let Some(ledger) = &ledger {
            checks.push(entry_signatures(ledger, keys));
        }
    }
    if let Some(pinned) = pinned {
        checks.push(pinned_head(ledger.as_ref(), pinned));
    }
    Ok(SignedReport {
        run_id: run_id.map(|u| u.to_string()),
        checks,
    })
}

/// The ledger in the trace's folder; `None` when it is missing or unreadable, which the chain
/// and ledger check reports already.
fn ledger_beside(trace: &Path) -> Result<Option<Ledger>, TraceError> {
    let dir = trace
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match read_ledger(&ledger_path(dir)) {
        Ok(l) => Ok(Some(l)),
        Err(TraceError::Io { .. } | TraceError::Malformed { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn file_name(trace: &Path) -> String {
    trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn key_list(keys: &[PublicKey]) -> String {
    keys.iter()
        .map(|k| k.key_id().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the run's own ledger entry says about its signature, as `audit` and `replay` judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SignatureState {
    /// Signed by a key at hand, over this trace's final hash and over the entry.
    #[serde(rename = "valid")]
    Valid,
    /// Names a key at hand, but a signature does not verify: the trace or its ledger entry was
    /// rewritten after signing (an integrity failure).
    #[serde(rename = "invalid")]
    Invalid,
    /// The entry carries no signature: made before a signing key existed, or rewritten by
    /// someone without it (a finding).
    #[serde(rename = "unsigned")]
    Unsigned,
    /// Signed by a key that is not at hand (not the signing key, not in the keyring, not
    /// given): nothing can be said either way, so a finding, never tampering.
    #[serde(rename = "key not at hand")]
    KeyNotAtHand,
    /// The run has no ledger entry to carry a signature (it did not finish, or there is no
    /// ledger); the chain and ledger check already judges that.
    #[serde(rename = "not checked")]
    NotChecked,
}

impl SignatureState {
    /// The state as `audit` prints it.
    pub fn name(self) -> &'static str {
        match self {
            SignatureState::Valid => "valid",
            SignatureState::Invalid => "invalid",
            SignatureState::Unsigned => "unsigned",
            SignatureState::KeyNotAtHand => "key not at hand",
            SignatureState::NotChecked => "not checked",
        }
    }

    /// What the state alone makes of the trace: only an invalid signature is a failure.
    pub fn verdict(self) -> Verdict {
        match self {
            SignatureState::Valid | SignatureState::NotChecked => Verdict::Clean,
            SignatureState::Unsigned | SignatureState::KeyNotAtHand => Verdict::Findings,
            SignatureState::Invalid => Verdict::IntegrityFailure,
        }
    }
}

/// The run's signature as checked against the keys at hand ([`check_signature`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSignature {
    pub state: SignatureState,
    /// The key the entry names, if any.
    pub key_id: Option<String>,
    /// What was found, for people.
    pub detail: String,
}

/// The signature on the ledger entry of `trace` (read as `file`), checked with `keys`. The
/// ledger beside the trace is read; a missing or unreadable one leaves nothing to check
/// ([`SignatureState::NotChecked`]: the chain and ledger check reports it).
pub fn check_signature(
    trace: &Path,
    file: &TraceFile,
    keys: &[PublicKey],
) -> Result<RunSignature, TraceError> {
    let ledger = ledger_beside(trace)?;
    Ok(signature_of(
        ledger.as_ref(),
        file.run_id(),
        &file_name(trace),
        file.final_hash(),
        keys,
    ))
}

/// The run's own entry: signed, by a key at hand, over this trace's final hash.
fn signature_of(
    ledger: Option<&Ledger>,
    run_id: Option<uuid::Uuid>,
    file_name: &str,
    final_hash: Option<&str>,
    keys: &[PublicKey],
) -> RunSignature {
    let found = |state, key_id: Option<&String>, detail| RunSignature {
        state,
        key_id: key_id.cloned(),
        detail,
    };
    let (Some(ledger), Some(run_id), Some(final_hash)) = (ledger, run_id, final_hash) else {
        return found(
            SignatureState::NotChecked,
            None,
            "no ledger entry of this run to check a signature on".to_string(),
        );
    };
    let Some(line) = ledger.find(run_id, file_name) else {
        return found(
            SignatureState::NotChecked,
            None,
            "the ledger has no entry of this run".to_string(),
        );
    };
    let entry = &line.entry;
    let Some(key_id) = &entry.key_id else {
        return found(
            SignatureState::Unsigned,
            None,
            format!(
                "the run's ledger entry (seq {}) is not signed: it was written without a signing key, or rewritten by someone without it",
                entry.seq
            ),
        );
    };
    let Some(key) = keys.iter().find(|k| k.key_id() == key_id) else {
        return found(
            SignatureState::KeyNotAtHand,
            Some(key_id),
            format!(
                "the run was signed by key {key_id}, not by the given key ({})",
                key_list(keys)
            ),
        );
    };
    let run_ok = entry
        .run_signature
        .as_deref()
        .is_some_and(|s| key.verifies(&run_message(run_id, final_hash), s));
    let entry_ok = entry
        .signature
        .as_deref()
        .is_some_and(|s| key.verifies(&entry_message(&entry.hash), s));
    match (run_ok, entry_ok) {
        (true, true) => found(
            SignatureState::Valid,
            Some(key_id),
            format!(
                "the final hash and ledger entry seq {} are signed by key {key_id}",
                entry.seq
            ),
        ),
        (false, _) => found(
            SignatureState::Invalid,
            Some(key_id),
            format!(
                "the signature of the run's final hash does not verify with key {key_id}: the trace or its ledger entry was rewritten after signing"
            ),
        ),
        (true, false) => found(
            SignatureState::Invalid,
            Some(key_id),
            format!(
                "the signature of ledger entry seq {} does not verify with key {key_id}: the entry was rewritten after signing",
                entry.seq
            ),
        ),
    }
}

/// [`signature_of`] as one of `verify`'s checks: anything but valid fails it.
fn run_signature(
    ledger: Option<&Ledger>,
    run_id: Option<uuid::Uuid>,
    file_name: &str,
    final_hash: Option<&str>,
    keys: &[PublicKey],
) -> SignedCheck {
    let signature = signature_of(ledger, run_id, file_name, final_hash, keys);
    SignedCheck {
        name: "signature",
        ok: signature.state == SignatureState::Valid,
        detail: signature.detail,
    }
}

/// Every entry signed by one of `keys` verifies (entries of other keys or unsigned ones are
/// counted, not judged: keys rotate, and runs made before a key existed are unsigned).
fn entry_signatures(ledger: &Ledger, keys: &[PublicKey]) -> SignedCheck {
    let (mut checked, mut other) = (0usize, 0usize);
    for line in &ledger.entries {
        let entry = &line.entry;
        let Some(key) = entry
            .key_id
            .as_deref()
            .and_then(|id| keys.iter().find(|k| k.key_id() == id))
        else {
            other += 1;
            continue;
        };
        let ok = entry
            .signature
            .as_deref()
            .is_some_and(|s| key.verifies(&entry_message(&entry.hash), s));
        if !ok {
            return SignedCheck {
                name: "ledger signatures",
                ok: false,
                detail: format!(
                    "ledger line {} (seq {}) names key {} but its signature does not verify",
                    line.line_no,
                    entry.seq,
                    key.key_id()
                ),
            };
        }
        checked += 1;
    }
    SignedCheck {
        name: "ledger signatures",
        ok: true,
        detail: format!(
            "{checked} of {} ledger entries signed by the given key verify{}",
            ledger.entries.len(),
            if other > 0 {
                format!("; {other} unsigned or signed by another key")
            } else {
                String::new()
            }
        ),
    }
}

/// The ledger still holds the pinned head, unchanged.
fn pinned_head(ledger: Option<&Ledger>, pinned: &LedgerHead) -> SignedCheck {
    let check = |ok, detail| SignedCheck {
        name: "pinned head",
        ok,
        detail,
    };
    let Some(ledger) = ledger else {
        return check(
            false,
            format!("no ledger to compare with the pinned head {pinned}"),
        );
    };
    let last = ledger.entries.last().map(|l| l.entry.seq);
    match ledger.entries.iter().find(|l| l.entry.seq == pinned.seq) {
        None => check(
            false,
            match last {
                Some(last) => format!(
                    "the ledger ends at seq {last}, before the pinned head {pinned}: entries were removed from its end (runs deleted after they were recorded)"
                ),
                None => format!(
                    "the ledger is empty, but the pinned head is {pinned}: every entry was removed"
                ),
            },
        ),
        Some(l) if l.entry.hash != pinned.hash => check(
            false,
            format!(
                "ledger entry seq {} has hash {}, the pinned head says {}: the ledger was rewritten up to there",
                pinned.seq, l.entry.hash, pinned.hash
            ),
        ),
        Some(_) => check(
            true,
            format!(
                "the ledger holds the pinned head {pinned} ({} entries after it)",
                last.unwrap_or(pinned.seq) - pinned.seq
            ),
        ),
    }
}
