//! The audit trail: a hash-chained JSONL trace per run plus a chained ledger of finished runs.
//!
//! Each line is one event with `v`, `runId`, `seq`, `ts`, `type`, `prevHash` and `hash`, where
//! `hash` is SHA-256 (HMAC-SHA-256 with the operator's trace key) over the canonical JSON of the
//! line without `hash`, and `prevHash` is the previous line's `hash` (64 zeros first). Editing,
//! dropping or reordering a line breaks the chain; the ledger entry written by
//! [`TraceWriter::finish`] also catches a trace that was cut short or rewritten whole; with the
//! operator's Ed25519 key ([`SigningKey`]) that entry is signed, so a third party holding only
//! the public key can tell a trace rewritten by someone who could write the folder
//! ([`verify_signed`]).
//! `trace-format.md` describes the format for users.

mod canonical;
mod convert;
mod error;
mod events;
mod integrity;
mod keyring;
mod ledger;
mod reader;
mod records;
mod seal;
mod sign;
mod signed;
mod verify;
mod writer;

#[cfg(test)]
mod pinned;
#[cfg(test)]
mod tests;

pub use canonical::{ZERO_HASH, canonical_json, digest_hex, event_hash};
pub use error::TraceError;
pub use events::{
    AnswerEvent, Citation, ContextFit, EarlierTurn, EmbedderInfo, EventBody, FactProposed, LlmTurn,
    MemoryRead, RefusedCitation, RunFinished, RunStarted, RunStatus, SearchFilters, SearchRound,
    TRACE_VERSION, TokenUsage, TraceEvent, TracedHit,
};
pub use integrity::{CheckedTrace, Integrity, check_integrity, check_integrity_with, check_trace};
pub use keyring::{KEYRING_FILE, add_to_keyring, keyring_path, read_keyring};
pub use ledger::{LEDGER_FILE_NAME, Ledger, LedgerEntry, LedgerLine, ledger_path, read_ledger};
pub use reader::{RawLine, TraceFile, read_trace, run_started};
pub use records::{FactRecord, HitRecord, LegRecord, SufficiencyRecord, WeightsRecord};
pub use sign::{KeyError, PublicKey, SigningKey, entry_message, run_message};
pub use signed::{
    LedgerHead, RunSignature, SignatureState, SignedCheck, SignedReport, check_signature,
    ledger_head, verify_signed,
};
pub use verify::{
    ChainProblem, ChainReport, ChainStatus, LedgerCheck, LedgerPolicy, NOT_IN_LEDGER_NOTE,
    ProblemKind, Verdict, assess, assess_with, check_ledger, verify_chain, verify_ledger,
};
pub use writer::{FinishedTrace, MAX_TRACE_STRING_BYTES, TraceWriter, bound_strings};
