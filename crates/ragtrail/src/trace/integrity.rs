//! Integrity first: read a trace, verify its chain and compare it with the ledger in its folder.
//! Replay and audit both start here and stop at an integrity failure (exit 3).

use std::path::Path;

use serde::Serialize;

use super::error::TraceError;
use super::reader::{TraceFile, read_trace};
use super::sign::PublicKey;
use super::signed::{RunSignature, SignatureState, check_signature};
use super::verify::{
    ChainReport, LedgerCheck, LedgerPolicy, Verdict, assess_with, check_ledger, verify_chain,
};

/// What the integrity check found: the trace's hash chain and the ledger's record of it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Integrity {
    /// `clean`, `incomplete` (nothing tampered, but the run did not finish or cannot be
    /// compared with a ledger) or `failed`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub status: &'static str,
    /// The first line that cannot be trusted, if any.
    pub first_bad_line: Option<usize>,
    /// What is wrong, for people.
    pub problems: Vec<String>,
    #[serde(skip)]
    pub verdict: Verdict,
}

impl Integrity {
    fn from(verdict: Verdict, first_bad_line: Option<usize>, problems: Vec<String>) -> Self {
        let status = match verdict {
            Verdict::Clean => "clean",
            Verdict::Findings => "incomplete",
            Verdict::IntegrityFailure => "failed",
        };
        Self {
            status,
            first_bad_line,
            problems,
            verdict,
        }
    }
}

/// What an audit of a trace with no whole line and no ledger entry says.
pub const WRITE_FAILED: &str = "incomplete: the write failed — the trace holds no whole line \
     (the disk was full, or the writer stopped, before its first line was on disk) and the \
     ledger has no entry for it, so nothing of the run was recorded";

/// A trace checked as replay and audit trust it: its chain and ledger entry, and its signature
/// when public keys are at hand.
#[derive(Debug, Clone)]
pub struct CheckedTrace {
    pub integrity: Integrity,
    /// The run's signature; `None` when no key was at hand or the trace could not be read.
    pub signature: Option<RunSignature>,
    pub file: Option<TraceFile>,
}

impl CheckedTrace {
    /// The worse of the integrity verdict and the signature's: an invalid signature is an
    /// integrity failure even when the chain and the ledger agree (a re-chained forgery).
    pub fn verdict(&self) -> Verdict {
        let signed = self
            .signature
            .as_ref()
            .map_or(Verdict::Clean, |s| s.state.verdict());
        self.integrity.verdict.max(signed)
    }

    /// Why the trace cannot be trusted: the integrity problems, then an invalid signature.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.integrity.problems.clone();
        if let Some(s) = self
            .signature
            .as_ref()
            .filter(|s| s.state == SignatureState::Invalid)
        {
            problems.push(format!("invalid signature: {}", s.detail));
        }
        problems
    }
}

/// [`check_integrity_with`], then the run's signature with `keys` (none: not checked).
pub fn check_trace(
    path: &Path,
    key: Option<&[u8]>,
    policy: LedgerPolicy,
    keys: &[PublicKey],
) -> Result<CheckedTrace, TraceError> {
    let (integrity, file) = check_integrity_with(path, key, policy)?;
    let signature = match &file {
        Some(f) if !keys.is_empty() => Some(check_signature(path, f, keys)?),
        _ => None,
    };
    Ok(CheckedTrace {
        integrity,
        signature,
        file,
    })
}

/// Reads `path` and checks it, a ledger required ([`LedgerPolicy::Required`]). The trace is
/// returned when it could be read, even if tampered (callers decide what they still show); I/O
/// errors are errors.
pub fn check_integrity(
    path: &Path,
    key: Option<&[u8]>,
) -> Result<(Integrity, Option<TraceFile>), TraceError> {
    check_integrity_with(path, key, LedgerPolicy::Required)
}

/// [`check_integrity`] with the caller's [`LedgerPolicy`].
pub fn check_integrity_with(
    path: &Path,
    key: Option<&[u8]>,
    policy: LedgerPolicy,
) -> Result<(Integrity, Option<TraceFile>), TraceError> {
    let file = match read_trace(path) {
        Ok(f) => f,
        // What a failed first write leaves (a full disk): judged below like a trace with no
        // whole line, by whether the ledger recorded the file.
        Err(TraceError::Empty { .. }) => TraceFile {
            lines: Vec::new(),
            torn_tail: None,
        },
        Err(e) => match Verdict::for_read_error(&e) {
            Some(verdict) => {
                let line = match &e {
                    TraceError::Malformed { line, .. } => Some(*line),
                    _ => None,
                };
                return Ok((Integrity::from(verdict, line, vec![e.to_string()]), None));
            }
            None => return Err(e),
        },
    };
    let chain = verify_chain(&file, key);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let ledger = check_ledger(dir, &file, &name, key)?;
    let verdict = assess_with(&chain, &ledger, policy);
    let (line, mut problems) = describe(&chain, &ledger, &name, policy);
    if file.lines.is_empty() && verdict == Verdict::Findings {
        // Not one whole line and no ledger entry: the writer's first write failed, which a
        // tamperer cannot pass off as anything (there is no run to show).
        problems = vec![WRITE_FAILED.to_string()];
    }
    Ok((Integrity::from(verdict, line, problems), Some(file)))
}

fn describe(
    chain: &ChainReport,
    ledger: &LedgerCheck,
    name: &str,
    policy: LedgerPolicy,
) -> (Option<usize>, Vec<String>) {
    let mut problems = Vec::new();
    let mut line = None;
    if let Some(p) = &chain.problem {
        line = Some(p.line);
        problems.push(p.to_string());
    }
    if let Some(torn) = chain.torn_tail {
        problems.push(format!(
            "line {torn}: torn last line (the writer stopped mid-line); ignored"
        ));
    }
    match ledger {
        LedgerCheck::Matches { .. } => {}
        LedgerCheck::NotInLedger { note } => problems.push(format!("not in the ledger: {note}")),
        LedgerCheck::LedgerMissing => problems.push(match policy {
            LedgerPolicy::Required if chain.problem.is_none() => "no ledger.jsonl beside the trace: a finished run always writes one, so it was deleted or the trace was made elsewhere; pass --no-ledger to accept a trace without one".to_string(),
            _ => "no ledger.jsonl beside the trace to compare with".to_string(),
        }),
        LedgerCheck::RunIdDiffers { ledger, actual } => problems.push(format!(
            "the ledger recorded {name} for run {ledger}, but it holds run {actual}: the file was replaced by another run's trace"
        )),
        LedgerCheck::FileDiffers { ledger, actual } => problems.push(format!(
            "the ledger recorded this run as {ledger}, not {actual}: the trace was copied or renamed"
        )),
        LedgerCheck::LinesDiffer { ledger, actual } => {
            line = line.or(Some((*ledger.min(actual) + 1) as usize));
            problems.push(format!(
                "the ledger recorded {ledger} lines, the trace has {actual}: lines were {} after the run finished",
                if actual < ledger { "removed" } else { "added" }
            ));
        }
        LedgerCheck::FinalHashDiffers { ledger, actual } => problems.push(format!(
            "the trace's final hash {actual} differs from the one the ledger recorded ({ledger}): the trace was rewritten with a new chain"
        )),
        LedgerCheck::LedgerBroken { line: l, problem } => {
            problems.push(format!("the ledger itself is broken at its line {l}: {problem}"))
        }
    }
    (line, problems)
}
