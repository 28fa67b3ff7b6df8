//! Verification: the hash chain of a trace, the ledger's own chain, and whether the ledger
//! recorded this trace as it is now. Findings come back as reports, not errors, and
//! [`assess`] folds them into a [`Verdict`] that maps to the `audit` exit codes.

use std::fmt;
use std::path::Path;

use uuid::Uuid;

use super::canonical::{ZERO_HASH, event_hash};
use super::error::TraceError;
use super::events::EventBody;
use super::ledger::{Ledger, ledger_path, read_ledger, unsigned};
use super::reader::TraceFile;

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// The line's content does not hash to its `hash`: the line was edited.
    HashMismatch { recorded: String, computed: String },
    /// A trace key was given but the line carries a plain SHA-256: written without the key, or
    /// rewritten by someone who does not hold it.
    WrittenWithoutKey,
    /// `prevHash` is not the previous line's `hash`: a line was removed, inserted, reordered
    /// or re-hashed on its own (the break shows on the line after it).
    BrokenLink { expected: String, found: String },
    /// `seq` is not the line's 0-based position (only possible in a re-hashed chain).
    SeqGap { expected: u64, found: u64 },
    /// A line from another run was spliced in.
    RunIdChanged { expected: Uuid, found: Uuid },
    /// The first line is not `run_started`.
    MissingRunStarted { found: String },
    /// A `run_finished` line with lines after it.
    RunFinishedNotLast,
    /// `run_finished.lines` differs from the lines in the file.
    LineCountMismatch { recorded: u64, actual: u64 },
    /// No `run_finished` at the end: the run did not finish (crash) or its tail was cut off.
    MissingRunFinished,
    /// A torn line after `run_finished`; a writer never appends after finishing.
    DataAfterFinish,
    /// A ledger line that is JSON but not a ledger entry.
    Unreadable { message: String },
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemKind::HashMismatch { recorded, computed } => {
                write!(
                    f,
                    "content does not match its hash (recorded {recorded}, computed {computed})"
                )
            }
            ProblemKind::WrittenWithoutKey => {
                write!(
                    f,
                    "hash is plain SHA-256 but a trace key was given \
                     (written or rewritten without the key)"
                )
            }
            ProblemKind::BrokenLink { expected, found } => write!(
                f,
                "prevHash {found} does not link to the previous line's hash {expected} \
                 (a line was removed, inserted, reordered or re-hashed)"
            ),
            ProblemKind::SeqGap { expected, found } => {
                write!(f, "seq {found}, expected {expected}")
            }
            ProblemKind::RunIdChanged { expected, found } => {
                write!(f, "runId {found} differs from the trace's runId {expected}")
            }
            ProblemKind::MissingRunStarted { found } => {
                write!(f, "first event is {found:?}, not run_started")
            }
            ProblemKind::RunFinishedNotLast => write!(f, "run_finished is followed by more lines"),
            ProblemKind::LineCountMismatch { recorded, actual } => {
                write!(
                    f,
                    "run_finished records {recorded} lines, the trace has {actual}"
                )
            }
            ProblemKind::MissingRunFinished => {
                write!(
                    f,
                    "no run_finished: the run did not finish or the end of the trace is missing"
                )
            }
            ProblemKind::DataAfterFinish => write!(f, "a torn line follows run_finished"),
            ProblemKind::Unreadable { message } => write!(f, "not a ledger entry: {message}"),
        }
    }
}

/// The first problem found and where (1-based line number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainProblem {
    pub line: usize,
    pub kind: ProblemKind,
}

impl fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.kind)
    }
}

/// Result of [`verify_chain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    /// Complete lines checked.
    pub lines: usize,
    pub torn_tail: Option<usize>,
    /// The first bad line; later lines are not trusted once the chain breaks.
    pub problem: Option<ChainProblem>,
}

/// What a [`ChainReport`] amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStatus {
    /// Every line verifies and the run finished.
    Valid,
    /// Every line verifies but the run never finished (or the tail is gone): a crash looks
    /// like this; only the ledger can tell a crash from a cut.
    Incomplete,
    /// A line was changed, removed, inserted or reordered.
    Tampered,
}

impl ChainReport {
    pub fn status(&self) -> ChainStatus {
        match &self.problem {
            None => ChainStatus::Valid,
            Some(ChainProblem {
                kind: ProblemKind::MissingRunFinished,
                ..
            }) => ChainStatus::Incomplete,
            Some(_) => ChainStatus::Tampered,
        }
    }
}

/// Checks every line of `file`: its hash (keyed when `key` is given), the link to the line
/// before, `seq`, `runId`, that it opens with `run_started` and ends with a `run_finished`
/// whose `lines` is the line count. Stops at the first problem.
pub fn verify_chain(file: &TraceFile, key: Option<&[u8]>) -> ChainReport {
    let report = |problem| ChainReport {
        lines: file.lines.len(),
        torn_tail: file.torn_tail,
        problem,
    };
    let total = file.lines.len();
    let mut expected_prev = ZERO_HASH;
    let first_run_id = file.run_id();
    for (index, line) in file.lines.iter().enumerate() {
        let event = &line.event;
        let at = |kind| {
            Some(ChainProblem {
                line: line.line_no,
                kind,
            })
        };
        if let Some(kind) = hash_problem(&line.value, &event.hash, key) {
            return report(at(kind));
        }
        if event.prev_hash != expected_prev {
            return report(at(ProblemKind::BrokenLink {
                expected: expected_prev.to_string(),
                found: event.prev_hash.clone(),
            }));
        }
        let expected_seq = index as u64;
        if event.seq != expected_seq {
            return report(at(ProblemKind::SeqGap {
                expected: expected_seq,
                found: event.seq,
            }));
        }
        if let Some(expected) = first_run_id.filter(|id| *id != event.run_id) {
            return report(at(ProblemKind::RunIdChanged {
                expected,
                found: event.run_id,
            }));
        }
        if index == 0 && !matches!(event.body, EventBody::RunStarted(_)) {
            return report(at(ProblemKind::MissingRunStarted {
                found: event.body.type_name().to_string(),
            }));
        }
        if let EventBody::RunFinished(finished) = &event.body {
            if index + 1 != total {
                return report(at(ProblemKind::RunFinishedNotLast));
            }
            if u64::from(finished.lines) != total as u64 {
                return report(at(ProblemKind::LineCountMismatch {
                    recorded: u64::from(finished.lines),
                    actual: total as u64,
                }));
            }
        }
        expected_prev = &event.hash;
    }
    match (file.is_finished(), file.torn_tail) {
        (true, None) => report(None),
        (true, Some(torn)) => report(Some(ChainProblem {
            line: torn,
            kind: ProblemKind::DataAfterFinish,
        })),
        (false, torn) => report(Some(ChainProblem {
            line: torn.unwrap_or(total + 1),
            kind: ProblemKind::MissingRunFinished,
        })),
    }
}

fn hash_problem(
    value: &serde_json::Value,
    recorded: &str,
    key: Option<&[u8]>,
) -> Option<ProblemKind> {
    let computed = event_hash(value, key);
    if computed == recorded {
        return None;
    }
    if key.is_some() && event_hash(value, None) == recorded {
        return Some(ProblemKind::WrittenWithoutKey);
    }
    Some(ProblemKind::HashMismatch {
        recorded: recorded.to_string(),
        computed,
    })
}

/// Checks the ledger's own chain: hashes, links and `seq` continuity across its entries.
pub fn verify_ledger(ledger: &Ledger, key: Option<&[u8]>) -> Option<ChainProblem> {
    let mut expected_prev = ZERO_HASH;
    for (index, line) in ledger.entries.iter().enumerate() {
        let entry = &line.entry;
        let at = |kind| {
            Some(ChainProblem {
                line: line.line_no,
                kind,
            })
        };
        if let Some(kind) = hash_problem(&unsigned(&line.value), &entry.hash, key) {
            return at(kind);
        }
        if entry.prev_hash != expected_prev {
            return at(ProblemKind::BrokenLink {
                expected: expected_prev.to_string(),
                found: entry.prev_hash.clone(),
            });
        }
        if entry.seq != index as u64 {
            return at(ProblemKind::SeqGap {
                expected: index as u64,
                found: entry.seq,
            });
        }
        expected_prev = &entry.hash;
    }
    None
}

/// Why a trace can be missing from the ledger; shown with [`LedgerCheck::NotInLedger`].
pub const NOT_IN_LEDGER_NOTE: &str = "a run that crashed before finishing has no ledger entry; \
     a finished run always has one. A trace whose lines were cut off at the end, or that was \
     replaced by a rewritten chain, does not match its entry.";

/// How the trace compares with the ledger's record of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerCheck {
    /// The ledger recorded this trace with these lines and this final hash.
    Matches { ledger_line: usize },
    /// No entry for the trace's runId (see [`NOT_IN_LEDGER_NOTE`]).
    NotInLedger { note: &'static str },
    /// There is no ledger file to compare with.
    LedgerMissing,
    /// The ledger recorded this file name for another run: the file was replaced by another
    /// run's trace (a swap), which verifies on its own.
    RunIdDiffers { ledger: Uuid, actual: Uuid },
    /// The ledger recorded this run under another file name: the trace was copied or renamed.
    FileDiffers { ledger: String, actual: String },
    /// The ledger recorded a different number of lines: the trace was cut or extended.
    LinesDiffer { ledger: u64, actual: u64 },
    /// Same length, different final hash: the trace was rewritten with a new chain.
    FinalHashDiffers { ledger: String, actual: String },
    /// The ledger itself fails verification at `line`, so it cannot vouch for anything.
    LedgerBroken { line: usize, problem: ProblemKind },
}

/// Compares `trace` (named `trace_file_name`) with its entry in the ledger at `ledger` (the
/// trace directory or the ledger file), after verifying the ledger's own chain.
///
/// I/O errors other than a missing ledger are returned as errors: they say nothing about
/// integrity.
pub fn check_ledger(
    ledger: &Path,
    trace: &TraceFile,
    trace_file_name: &str,
    key: Option<&[u8]>,
) -> Result<LedgerCheck, TraceError> {
    let path = ledger_path(ledger);
    let ledger = match read_ledger(&path) {
        Ok(ledger) => ledger,
        Err(TraceError::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LedgerCheck::LedgerMissing);
        }
        Err(TraceError::Malformed { line, message }) => {
            return Ok(LedgerCheck::LedgerBroken {
                line,
                problem: ProblemKind::Unreadable { message },
            });
        }
        Err(other) => return Err(other),
    };
    if let Some(ChainProblem { line, kind }) = verify_ledger(&ledger, key) {
        return Ok(LedgerCheck::LedgerBroken {
            line,
            problem: kind,
        });
    }
    let not_in_ledger = LedgerCheck::NotInLedger {
        note: NOT_IN_LEDGER_NOTE,
    };
    if trace.lines.is_empty() {
        // No line to take a run id from: the ledger's entry for this file name decides. One
        // there means the run finished and its trace was emptied or cut inside its first line.
        return Ok(
            match ledger
                .entries
                .iter()
                .rev()
                .find(|l| l.entry.file == trace_file_name)
            {
                Some(line) => LedgerCheck::LinesDiffer {
                    ledger: line.entry.lines,
                    actual: 0,
                },
                None => not_in_ledger,
            },
        );
    }
    let (Some(run_id), Some(actual_hash)) = (trace.run_id(), trace.final_hash()) else {
        return Ok(not_in_ledger);
    };
    // The entry of this file name decides: it must name this run, and this run must be
    // recorded under this name. Both are compared, so neither a swap nor a copy passes.
    let by_file = ledger
        .entries
        .iter()
        .rev()
        .find(|l| l.entry.file == trace_file_name);
    if let Some(line) = by_file.filter(|l| l.entry.run_id != run_id) {
        return Ok(LedgerCheck::RunIdDiffers {
            ledger: line.entry.run_id,
            actual: run_id,
        });
    }
    let Some(found) = ledger.find(run_id, trace_file_name) else {
        return Ok(not_in_ledger);
    };
    if found.entry.file != trace_file_name {
        return Ok(LedgerCheck::FileDiffers {
            ledger: found.entry.file.clone(),
            actual: trace_file_name.to_string(),
        });
    }
    let actual_lines = trace.lines.len() as u64;
    Ok(if found.entry.lines != actual_lines {
        LedgerCheck::LinesDiffer {
            ledger: found.entry.lines,
            actual: actual_lines,
        }
    } else if found.entry.final_hash != actual_hash {
        LedgerCheck::FinalHashDiffers {
            ledger: found.entry.final_hash.clone(),
            actual: actual_hash.to_string(),
        }
    } else {
        LedgerCheck::Matches {
            ledger_line: found.line_no,
        }
    })
}

/// Overall outcome of checking a trace, ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Chain valid and the ledger recorded exactly this trace.
    Clean,
    /// Nothing was tampered with, but something is missing: the run did not finish, or there
    /// is no ledger to compare with.
    Findings,
    /// The trace or the ledger was changed, cut or replaced, or the trace has a malformed line
    /// (see [`Verdict::for_read_error`]).
    IntegrityFailure,
}

impl Verdict {
    /// `audit`'s exit code: 0 clean, 1 findings, 3 integrity failure (2 is clap's usage error).
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Clean => 0,
            Verdict::Findings => 1,
            Verdict::IntegrityFailure => 3,
        }
    }

    /// The verdict for a trace that [`read_trace`](super::read_trace) rejected, if the error is
    /// about the trace's content; `None` for I/O and usage errors, which are reported as such.
    pub fn for_read_error(error: &TraceError) -> Option<Verdict> {
        match error {
            TraceError::Malformed { .. }
            | TraceError::Empty { .. }
            | TraceError::UnsupportedVersion { .. } => Some(Verdict::IntegrityFailure),
            _ => None,
        }
    }
}

/// Whether a trace directory without a ledger is acceptable to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LedgerPolicy {
    /// A finished run always leaves a ledger, so a finished trace without one is an integrity
    /// failure (the ledger was deleted, or the trace was fabricated elsewhere).
    #[default]
    Required,
    /// The caller accepts a missing ledger (`--no-ledger`): the trace is judged on its chain
    /// alone, which is a finding, not clean.
    Optional,
}

/// Folds the chain report and the ledger check into one verdict ([`LedgerPolicy::Required`]).
pub fn assess(chain: &ChainReport, ledger: &LedgerCheck) -> Verdict {
    assess_with(chain, ledger, LedgerPolicy::Required)
}

/// Folds the chain report and the ledger check into one verdict.
///
/// An incomplete chain is only a finding when the ledger agrees the run never finished (or
/// there is no ledger, as when the first run in a folder crashed); if the ledger holds an entry,
/// the trace lost lines after the fact.
pub fn assess_with(chain: &ChainReport, ledger: &LedgerCheck, policy: LedgerPolicy) -> Verdict {
    let status = chain.status();
    if status == ChainStatus::Tampered {
        return Verdict::IntegrityFailure;
    }
    match ledger {
        LedgerCheck::LedgerMissing
            if status == ChainStatus::Valid && policy == LedgerPolicy::Required =>
        {
            Verdict::IntegrityFailure
        }
        LedgerCheck::RunIdDiffers { .. }
        | LedgerCheck::FileDiffers { .. }
        | LedgerCheck::LinesDiffer { .. }
        | LedgerCheck::FinalHashDiffers { .. }
        | LedgerCheck::LedgerBroken { .. } => Verdict::IntegrityFailure,
        // A finished run is always recorded; an unrecorded one is either a fabricated trace or a
        // crash, and only the crash leaves no run_finished.
        LedgerCheck::NotInLedger { .. } if status == ChainStatus::Valid => {
            Verdict::IntegrityFailure
        }
        LedgerCheck::NotInLedger { .. } | LedgerCheck::LedgerMissing => Verdict::Findings,
        LedgerCheck::Matches { .. } if status == ChainStatus::Valid => Verdict::Clean,
        LedgerCheck::Matches { .. } => Verdict::Findings,
    }
}
