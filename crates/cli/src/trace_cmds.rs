//! `ragtrail replay`, `ragtrail audit` and `ragtrail traces`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::output::{self, terminal_safe};
use crate::config;
use crate::global::GlobalArgs;
use crate::open::open_ready_engine;
use crate::output::Lang;
use ragtrail::OfflinePlanner;
use ragtrail::TraceSettings;
use ragtrail::review::audit::audit;
use ragtrail::review::replay::{ReplayOptions, replay_with};
use ragtrail::review::runs::{ListedRun, RunFilter, RunSummary, list_runs, may_see, trace_files};
use ragtrail::review::{audit_markdown, audit_text, live_json, live_text, replay_text, rerun_text};
use ragtrail::trace::{CheckedTrace, LedgerPolicy, Verdict, check_trace};
use ragtrail::trace::{read_trace, run_started};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace: a file (`traces/<time>-<runId>.jsonl`), a runId (or its first 8 or more
    /// characters) in --trace-dir, or `last` for your newest run there.
    pub trace: String,
    /// Print the comparison as one JSON object (with `--live`, the re-plan is its `live` field:
    /// planner, trace, rounds side by side, recordedStatus, liveStatus, recordedAnswer,
    /// liveAnswer).
    #[arg(long)]
    pub json: bool,
    /// Also re-plan the recorded question with the configured planner (writes a new trace) and
    /// show both runs side by side.
    #[arg(long)]
    pub live: bool,
    /// Accept a trace folder without a ledger (judged on the hash chain alone). Without it, a
    /// finished trace with no `ledger.jsonl` beside it is an integrity failure: the ledger is
    /// what catches a trace rewritten whole.
    #[arg(long)]
    pub no_ledger: bool,
    /// Compare even when the trace was recorded against another knowledge base (another data
    /// directory or database) than the one opened now.
    #[arg(long)]
    pub force: bool,
    /// What if: re-run every recorded keyword set with this fusion instead of the recorded one
    /// (rrf, minmax:W, agree:W, confidence:W, standout, standout-coverage, bm25, vector) and
    /// show the hits gained, lost and moved.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<ragtrail::Fusion>,
    /// What if: re-run every recorded keyword set asking for N hits.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub top_k: Option<u32>,
    /// Re-run the planner itself (the offline planner) on today's index, with the recorded
    /// question, date, options and earlier turns under your access, and compare keywords,
    /// hits and answer round by round (JSON: `rerun`). Deterministic: two re-runs print the
    /// same bytes. Writes no trace unless --rerun-trace.
    #[arg(long, conflicts_with = "live")]
    pub rerun: bool,
    /// With --rerun: write the re-run's trace to --trace-dir (signed like any run).
    #[arg(long, requires = "rerun")]
    pub rerun_trace: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The trace: a file (`traces/<time>-<runId>.jsonl`), a runId (or its first 8 or more
    /// characters) in --trace-dir, or `last` for your newest run there.
    pub trace: String,
    /// Report format; Markdown is ready to paste into a ticket.
    #[arg(long, value_enum, default_value_t = AuditFormat::Text)]
    pub format: AuditFormat,
    /// Same as `--format json`.
    #[arg(long)]
    pub json: bool,
    /// Accept a trace folder without a ledger (judged on the hash chain alone). Without it, a
    /// finished trace with no `ledger.jsonl` beside it is an integrity failure: the ledger is
    /// what catches a trace rewritten whole.
    #[arg(long)]
    pub no_ledger: bool,
    /// Check the run's signature with this public key (`ragtrail keys public`); repeat for
    /// rotated keys. Without it, the data directory's signing key and its keyring (retired
    /// keys) are used. The verdict says signature valid, invalid (exit 3), unsigned or signed
    /// by a key not at hand (findings).
    #[arg(long = "public-key", value_name = "FILE")]
    pub public_keys: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TracesArgs {
    /// How many runs to list.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
    /// One JSON object per run, newest first, as a JSON array: runId, started, status,
    /// reason, rounds, question, answer, tenant, roles, session, turn, trace.
    #[arg(long)]
    pub json: bool,
    /// Only runs that ended so: answered, insufficient_evidence (or insufficient), error,
    /// incomplete.
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
    /// Only the turns of this conversation (`ask --session ID`, `chat`).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only runs started at or after this time: a date (2026-11-30, UTC midnight) or an RFC
    /// 3339 time (2026-11-30T09:00:00Z).
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
}

fn parse_since(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    RunFilter::parse_since(s).ok_or_else(|| {
        format!("`{s}` is neither a date (2026-11-30) nor an RFC 3339 time (2026-11-30T09:00:00Z)")
    })
}

/// The trace a `replay`/`audit` argument names: an existing file, `last` (the caller's newest
/// run in --trace-dir), or a runId or its prefix (at least 8 characters) found there.
pub fn resolve_trace(global: &GlobalArgs, arg: &str) -> anyhow::Result<PathBuf> {
    let as_path = PathBuf::from(arg);
    if as_path.is_file() {
        return Ok(as_path);
    }
    let dir = &global.trace_dir;
    let looks_like_id = arg.len() >= 8 && arg.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if arg != "last" && !looks_like_id {
        anyhow::bail!(
            "no trace file {arg}: give a trace file, a runId from `ragtrail traces`, or `last`"
        );
    }
    let files = match trace_files(dir) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "no trace {arg}: the trace directory {} does not exist (pass the --trace-dir the run was written to)",
            dir.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    if arg == "last" {
        let caller = config::access_context(global.tenant.as_deref(), &global.roles);
        return files
            .into_iter()
            .find(|p| {
                read_trace(p)
                    .ok()
                    .is_some_and(|f| run_started(&f).is_some_and(|s| may_see(&s.access, &caller)))
            })
            .with_context(|| {
                format!(
                    "no run of yours in {} yet (tenant {}): run `ragtrail ask \"…\"` first",
                    dir.display(),
                    caller.tenant
                )
            });
    }
    let wanted = arg.to_ascii_lowercase();
    let matching: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.split_once('-'))
                .is_some_and(|(_, id)| id.starts_with(&wanted))
        })
        .collect();
    match matching.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!("no trace of run {arg} in {}", dir.display()),
        many => anyhow::bail!(
            "{} traces in {} start with {arg}: give more of the runId",
            many.len(),
            dir.display()
        ),
    }
}

/// Reads a trace and checks its chain and ledger entry with the operator's trace key, and its
/// signature with `keys` (replay and audit both start here).
fn read_checked(
    trace: &Path,
    no_ledger: bool,
    keys: &[ragtrail::trace::PublicKey],
) -> anyhow::Result<CheckedTrace> {
    let key = config::trace_key();
    // The trace error names the file already.
    Ok(check_trace(
        trace,
        key.as_deref(),
        ledger_policy(no_ledger),
        keys,
    )?)
}

fn ledger_policy(no_ledger: bool) -> LedgerPolicy {
    if no_ledger {
        LedgerPolicy::Optional
    } else {
        LedgerPolicy::Required
    }
}

fn integrity_or_exit(checked: &CheckedTrace) -> Option<ExitCode> {
    if checked.verdict() == Verdict::IntegrityFailure {
        eprintln!("integrity failure: the trace cannot be trusted");
        for p in checked.problems() {
            eprintln!("  {p}");
        }
        return Some(ExitCode::from(3));
    }
    None
}

pub fn replay_cmd(global: &GlobalArgs, args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let trace = resolve_trace(global, &args.trace)?;
    // An invalid signature refuses the replay like any other tampering.
    let checked = read_checked(
        &trace,
        args.no_ledger,
        &config::trusted_keys(&global.data_dir)?,
    )?;
    if let Some(code) = integrity_or_exit(&checked) {
        return Ok(code);
    }
    for p in &checked.integrity.problems {
        eprintln!("warning: {p}");
    }
    if let Some(s) = checked
        .signature
        .as_ref()
        .filter(|s| s.state.verdict() == Verdict::Findings)
    {
        eprintln!("warning: signature {}: {}", s.state.name(), s.detail);
    }
    let file = checked
        .file
        .filter(|f| !f.lines.is_empty())
        .context("the trace holds no run to replay")?;
    // Under the caller's access, checked before the index is even opened.
    let caller = config::access_context(global.tenant.as_deref(), &global.roles);
    ragtrail::review::check_access(&file, &caller)?;
    let engine = open_ready_engine(global, Lang::En)?;
    if let Err(mismatch) = ragtrail::review::check_knowledge_base(&file, &engine) {
        if !args.force {
            eprintln!("error: {mismatch}");
            return Ok(ExitCode::from(crate::output::EXIT_ERROR));
        }
        eprintln!("warning (--force): {mismatch}");
    }
    let options = ReplayOptions {
        fusion: args.fusion,
        top_k: args.top_k.map(|k| k as usize),
    };
    let report = replay_with(&engine, &file, &caller, &options)?;
    // The run's trace settings, for a re-plan that writes one.
    let trace_settings = || -> anyhow::Result<TraceSettings> {
        Ok(TraceSettings {
            dir: global.trace_dir.clone(),
            key: config::trace_key(),
            signer: config::signing_key(&global.data_dir)?,
            caller: None,
        })
    };
    // `--live`: the configured planner, and a new trace; `--rerun`: the offline planner.
    let live = if args.live {
        let mut planner = super::ask_cmd::choose_planner(None, &Default::default())?;
        Some(ragtrail::review::rerun(
            &engine,
            &file,
            &caller,
            &mut *planner,
            Some(trace_settings()?),
        )?)
    } else {
        None
    };
    let rerun = if args.rerun {
        let trace = if args.rerun_trace {
            Some(trace_settings()?)
        } else {
            None
        };
        Some(ragtrail::review::rerun(
            &engine,
            &file,
            &caller,
            &mut OfflinePlanner::new(),
            trace,
        )?)
    } else {
        None
    };
    // What the asker's memory today would change: said beside the re-run, never its verdict.
    let memory_today = if args.rerun {
        let today = ragtrail::MemoryStore::new(&global.data_dir).list(&global.asker()?)?;
        ragtrail::review::memory_today(&engine, &file, &caller, &today)?
    } else {
        None
    };
    if args.json {
        // One JSON document on stdout: the replay report, with the re-plan under `live`.
        let mut value = serde_json::to_value(&report)?;
        if let (Some(m), Some(obj)) = (&memory_today, value.as_object_mut()) {
            obj.insert("memoryToday".into(), serde_json::to_value(m)?);
        }
        if let (Some(live), Some(obj)) = (&live, value.as_object_mut()) {
            obj.insert("live".into(), live_json(live));
        }
        if let (Some(rerun), Some(obj)) = (&rerun, value.as_object_mut()) {
            obj.insert("rerun".into(), serde_json::to_value(rerun)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", replay_text(&report));
        if let Some(live) = &live {
            print!("{}", live_text(live));
        }
        if let Some(rerun) = &rerun {
            print!("{}", rerun_text(rerun));
        }
        if let Some(m) = &memory_today {
            print!("{}", memory_today_text(m));
        }
    }
    let same = report.reproduced && rerun.as_ref().is_none_or(|r| r.same);
    Ok(ExitCode::from(if same { 0 } else { 1 }))
}

/// `replay --rerun`'s lines on today's memory: what changed since the run, and whether the
/// offline planner answers otherwise with it.
fn memory_today_text(m: &ragtrail::review::MemoryToday) -> String {
    let mut out = format!(
        "\ntoday's memory differs from the run's: {}\n",
        crate::output::terminal_safe(&m.changes.join("; "))
    );
    if m.answer_same {
        out.push_str("  with it the offline planner answers the same\n");
    } else {
        let answer = m.answer.as_deref().unwrap_or("(no answer)");
        let first = answer.lines().next().unwrap_or_default();
        out.push_str(&format!(
            "  with it the offline planner answers differently: {}\n",
            crate::output::terminal_safe(first)
        ));
    }
    out
}

pub fn audit_cmd(global: &GlobalArgs, args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let trace = resolve_trace(global, &args.trace)?;
    // The signature is checked as `verify --public-key` checks it (the same code).
    let keys = audit_keys(global, &args.public_keys)?;
    let checked = read_checked(&trace, args.no_ledger, &keys)?;
    let format = if args.json {
        AuditFormat::Json
    } else {
        args.format
    };
    let Some(file) = &checked.file else {
        integrity_or_exit(&checked);
        return Ok(ExitCode::from(3));
    };
    let auditor = config::access_context(global.tenant.as_deref(), &global.roles);
    // Another context's run is shown without its evidence, and a trace that cannot be trusted
    // is not compared with the store: no need for the store then.
    let engine = if checked.verdict() == Verdict::IntegrityFailure
        || ragtrail::review::check_access(file, &auditor).is_err()
    {
        None
    } else {
        Some(open_ready_engine(global, Lang::En)?)
    };
    let mut report = audit(file, checked.integrity.clone(), engine.as_ref(), &auditor);
    report.trace = trace.display().to_string();
    if let Some(signed) = &checked.signature {
        report.add_signature(signed);
    }
    match format {
        AuditFormat::Json => println!("{}", serde_json::to_string_pretty(&report.to_json())?),
        AuditFormat::Text => print!("{}", audit_text(&report)),
        AuditFormat::Markdown => print!("{}", audit_markdown(&report)),
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

/// The public keys an audit checks the signature with: those given, else the data
/// directory's signing key's and its keyring's (none: the signature is not checked).
fn audit_keys(
    global: &GlobalArgs,
    given: &[PathBuf],
) -> anyhow::Result<Vec<ragtrail::trace::PublicKey>> {
    if !given.is_empty() {
        return Ok(given
            .iter()
            .map(|p| ragtrail::trace::PublicKey::read(p))
            .collect::<Result<_, _>>()?);
    }
    config::trusted_keys(&global.data_dir)
}

/// One run as `traces` lists it.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TraceSummary {
    run_id: String,
    started: String,
    /// `answered`, `insufficient_evidence`, `error`, or `incomplete`.
    status: String,
    /// The status for people, in text output.
    #[serde(skip)]
    label: &'static str,
    reason: String,
    rounds: u32,
    question: String,
    answer: String,
    tenant: String,
    roles: Vec<String>,
    session: Option<String>,
    turn: Option<u32>,
    trace: String,
}

pub fn traces_cmd(global: &GlobalArgs, args: &TracesArgs) -> anyhow::Result<ExitCode> {
    let dir = &global.trace_dir;
    if let Some(wanted) = &args.status
        && RunFilter::status_name(wanted).is_none()
    {
        anyhow::bail!(
            "unknown --status {wanted}: use answered, evidence, insufficient_evidence, error or incomplete"
        );
    }
    let filter = RunFilter {
        status: args.status.clone(),
        session: args.session.clone(),
        since: args.since,
    };
    let keep = |r: &RunSummary| filter.keeps(r);
    // Runs of another tenant, or made with roles this operator lacks, are not listed.
    let access = config::access_context(global.tenant.as_deref(), &global.roles);
    let runs = match list_runs(dir, &access, args.limit, &keep) {
        Ok(runs) => runs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if args.json {
                println!("[]");
            } else {
                println!(
                    "No traces in {} yet: run `ragtrail ask \"…\"`.",
                    dir.display()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut listed = Vec::new();
    let mut unreadable = Vec::new();
    for run in runs {
        let run = match run {
            ListedRun::Run(run) => run,
            ListedRun::Unreadable(path) => {
                unreadable.push(path);
                continue;
            }
        };
        listed.push(TraceSummary {
            run_id: run.run_id.to_string(),
            started: run
                .started
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_default(),
            status: RunFilter::status_of(&run).to_string(),
            label: run.status.map_or("incomplete", |s| s.label()),
            reason: run.reason.clone(),
            rounds: run.rounds,
            question: run.question.clone(),
            answer: run.answer.clone().unwrap_or_default(),
            tenant: run.access.tenant.clone(),
            roles: run.access.roles.clone(),
            session: run.session_id.clone(),
            turn: run.turn,
            trace: run.path.display().to_string(),
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    if listed.is_empty() {
        println!("No runs of yours in {} match.", dir.display());
    }
    for t in &listed {
        let time = t.started.get(..16).unwrap_or(&t.started).replace('T', " ");
        println!(
            "{time}  {:<22} {:<9} {}\n    {}\n    {}",
            t.label,
            output::count(t.rounds as usize, "round", "rounds"),
            terminal_safe(ragtrail::truncate_chars(&t.question, 60)),
            terminal_safe(ragtrail::truncate_chars(&t.answer.replace('\n', " "), 80)),
            t.trace
        );
    }
    for path in unreadable {
        eprintln!("warning: {} is not a readable trace", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_trace_read_error_names_the_os_error_once() {
        let error = ragtrail::trace::read_trace(std::path::Path::new("/nonexistent/t.jsonl"))
            .expect_err("no such file");
        let shown = format!("{:#}", anyhow::Error::from(error));
        assert_eq!(shown.matches("os error 2").count(), 1, "{shown}");
        assert!(shown.starts_with("/nonexistent/t.jsonl: "), "{shown}");
    }
}
