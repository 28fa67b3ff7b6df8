//! The runs of a trace directory: listing them with what a person needs to pick one, finding
//! one by its id, and whose runs a viewer may see. One place for the command line's `traces`
//! and the server's `/v1/traces`, so both show the same runs to the same people.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::access::AccessContext;
use crate::trace::{EventBody, LEDGER_FILE_NAME, RunStatus, TraceFile, read_trace, run_started};

/// One run as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: Uuid,
    /// File name inside the trace directory.
    pub file: String,
    #[serde(skip)]
    pub path: PathBuf,
    /// When the first line was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<DateTime<Utc>>,
    pub question: String,
    /// `None` while the run has no `run_finished` line (running, or cut short).
    pub status: Option<RunStatus>,
    pub reason: String,
    pub rounds: u32,
    /// The last answer's text, if the run answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    pub access: AccessContext,
    /// Name of the server token the run was started with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The run's turn in its conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
}

/// A trace file of the directory, read or not.
#[derive(Debug, Clone, PartialEq)]
pub enum ListedRun {
    Run(Box<RunSummary>),
    /// Not a readable trace (shown by name to the operator, never to a server's callers).
    Unreadable(PathBuf),
}

/// Whether a viewer may see a run recorded under `recorded`: same tenant, and every role the
/// run had is one the viewer holds (so nobody learns what a wider role was shown).
pub fn may_see(recorded: &AccessContext, viewer: &AccessContext) -> bool {
    recorded.tenant == viewer.tenant && recorded.roles.iter().all(|r| viewer.roles.contains(r))
}

/// The trace files of `dir` (the ledger excluded), newest first: their names start with the
/// run's UTC start time.
pub fn trace_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && p.file_name().is_some_and(|n| n != LEDGER_FILE_NAME)
        })
        .collect();
    files.sort();
    files.reverse();
    Ok(files)
}

/// The trace of `run_id` in `dir`, found by its file name (`<time>-<runId>.jsonl`); the id is a
/// parsed UUID, so no path can be smuggled in through it.
pub fn find_run(dir: &Path, run_id: Uuid) -> std::io::Result<Option<PathBuf>> {
    let suffix = format!("-{run_id}.jsonl");
    let files = match trace_files(dir) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(files.into_iter().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(&suffix))
    }))
}

/// The summary of a trace as read, or `None` without a `run_started` line.
pub fn summarize(path: &Path, file: &TraceFile) -> Option<RunSummary> {
    let started = run_started(file)?;
    let finished = file.events().find_map(|e| match &e.body {
        EventBody::RunFinished(f) => Some(f),
        _ => None,
    });
    let answer = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.text.clone()),
            _ => None,
        })
        .last();
    Some(RunSummary {
        run_id: file.run_id()?,
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: path.to_path_buf(),
        started: file.lines.first().map(|l| l.event.ts),
        question: started.question.clone(),
        status: finished.map(|f| f.status),
        reason: finished.map(|f| f.reason.clone()).unwrap_or_default(),
        rounds: finished.map(|f| f.rounds).unwrap_or(0),
        answer,
        access: started.access.clone(),
        caller: started.caller.clone(),
        session_id: started.session_id.clone(),
        turn: started.turn,
    })
}

/// Up to `limit` runs of `dir` that `viewer` may see and `keep` accepts, newest first, plus the
/// files that could not be read. A missing directory is `NotFound`.
pub fn list_runs(
    dir: &Path,
    viewer: &AccessContext,
    limit: usize,
    keep: &dyn Fn(&RunSummary) -> bool,
) -> std::io::Result<Vec<ListedRun>> {
    let mut out = Vec::new();
    for path in trace_files(dir)? {
        if out.len() >= limit {
            break;
        }
        let Ok(file) = read_trace(&path) else {
            out.push(ListedRun::Unreadable(path));
            continue;
        };
        let Some(summary) = summarize(&path, &file) else {
            continue;
        };
        if may_see(&summary.access, viewer) && keep(&summary) {
            out.push(ListedRun::Run(Box::new(summary)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_viewer_sees_its_tenant_and_no_wider_role() {
        let staff = AccessContext::new("acme", Vec::<String>::new());
        let hr = AccessContext::new("acme", ["hr"]);
        let other = AccessContext::new("globex", ["hr"]);
        assert!(may_see(&staff, &hr));
        assert!(may_see(&hr, &hr));
        assert!(!may_see(&hr, &staff));
        assert!(!may_see(&hr, &other));
        assert!(!may_see(&staff, &other));
    }

    #[test]
    fn find_run_matches_the_whole_id_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = Uuid::now_v7();
        let name = format!("20261201T000000Z-{id}.jsonl");
        std::fs::write(dir.path().join(&name), "").expect("write");
        assert_eq!(
            find_run(dir.path(), id).expect("read"),
            Some(dir.path().join(name))
        );
        assert_eq!(find_run(dir.path(), Uuid::now_v7()).expect("read"), None);
        assert_eq!(
            find_run(&dir.path().join("absent"), id).expect("missing dir"),
            None
        );
    }
}
