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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub run_id: Uuid,
    /// The trace's file name inside the trace directory.
    pub file: String,
    #[serde(skip)]
    pub path: PathBuf,
    /// When the first line was written (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub started: Option<DateTime<Utc>>,
    pub question: String,
    /// answered, evidence, insufficient_evidence, error; none (null) while the run has no
    /// `run_finished` line (running, or cut short).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub status: Option<RunStatus>,
    pub reason: String,
    pub rounds: u32,
    /// The last answer's text, if the run answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The tenant and roles the run was made under.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
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

/// Which runs a listing keeps: by how they ended, their conversation, and when they started.
/// One filter for the command line's `traces` and the server's `/v1/traces`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    /// A status name as [`RunFilter::status_name`] normalises it.
    pub status: Option<String>,
    pub session: Option<String>,
    /// Runs started at or after this time (a run without a start time is left out).
    pub since: Option<DateTime<Utc>>,
}

/// The status names a filter accepts (`insufficient` is short for `insufficient_evidence`).
pub const STATUS_NAMES: [&str; 5] = [
    "answered",
    "evidence",
    "insufficient_evidence",
    "error",
    "incomplete",
];

impl RunFilter {
    /// `wanted` as a status name (`Insufficient Evidence`, `insufficient-evidence` and
    /// `insufficient` all name `insufficient_evidence`), or `None` when it names none.
    pub fn status_name(wanted: &str) -> Option<&'static str> {
        let normal = wanted.trim().to_ascii_lowercase().replace([' ', '-'], "_");
        let normal = if normal == "insufficient" {
            "insufficient_evidence".to_string()
        } else {
            normal
        };
        STATUS_NAMES.iter().copied().find(|n| *n == normal)
    }

    /// A run's status as filters name it (`incomplete` without a `run_finished` line).
    pub fn status_of(run: &RunSummary) -> &'static str {
        run.status.map_or("incomplete", |s| s.name())
    }

    /// A `since` bound: a date (2026-11-30, UTC midnight) or an RFC 3339 time.
    pub fn parse_since(s: &str) -> Option<DateTime<Utc>> {
        if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
            return Some(t.with_timezone(&Utc));
        }
        chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc())
    }

    pub fn keeps(&self, run: &RunSummary) -> bool {
        self.status
            .as_deref()
            .is_none_or(|s| Self::status_name(s) == Some(Self::status_of(run)))
            && self
                .session
                .as_deref()
                .is_none_or(|s| run.session_id.as_deref() == Some(s))
            && self
                .since
                .is_none_or(|since| run.started.is_some_and(|t| t >= since))
    }
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
    fn a_filter_keeps_runs_by_status_session_and_start() {
        let t = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
        };
        let run = RunSummary {
            run_id: Uuid::now_v7(),
            file: String::new(),
            path: PathBuf::new(),
            started: t("2026-11-30T09:00:00Z"),
            question: "q".into(),
            status: Some(RunStatus::InsufficientEvidence),
            reason: String::new(),
            rounds: 1,
            answer: None,
            access: AccessContext::default(),
            caller: None,
            session_id: Some("s1".into()),
            turn: Some(1),
        };
        let keeps = |f: RunFilter| f.keeps(&run);
        assert!(keeps(RunFilter::default()));
        for s in [
            "insufficient",
            "Insufficient Evidence",
            "insufficient-evidence",
        ] {
            assert!(
                keeps(RunFilter {
                    status: Some(s.into()),
                    ..Default::default()
                }),
                "{s}"
            );
        }
        assert!(!keeps(RunFilter {
            status: Some("answered".into()),
            ..Default::default()
        }));
        assert!(!keeps(RunFilter {
            status: Some("nonsense".into()),
            ..Default::default()
        }));
        assert!(keeps(RunFilter {
            session: Some("s1".into()),
            ..Default::default()
        }));
        assert!(!keeps(RunFilter {
            session: Some("s2".into()),
            ..Default::default()
        }));
        assert_eq!(
            RunFilter::parse_since("2026-11-30"),
            t("2026-11-30T00:00:00Z")
        );
        assert_eq!(RunFilter::parse_since("yesterday"), None);
        assert!(keeps(RunFilter {
            since: t("2026-11-30T09:00:00Z"),
            ..Default::default()
        }));
        assert!(!keeps(RunFilter {
            since: t("2026-11-30T09:00:01Z"),
            ..Default::default()
        }));
        let unfinished = RunSummary {
            status: None,
            ..run.clone()
        };
        assert!(
            RunFilter {
                status: Some("incomplete".into()),
                ..Default::default()
            }
            .keeps(&unfinished)
        );
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
