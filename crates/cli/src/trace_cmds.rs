//! `ragtrail replay`, `ragtrail audit` and `ragtrail traces`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::{GlobalArgs, open_ready_engine, output::terminal_safe};
use crate::config;
use ragtrail::agent::{self, AgentRagOptions, RunSettings, TraceSettings};
use ragtrail::review::audit::{AuditReport, audit};
use ragtrail::review::replay::{ReplayReport, RoundVerdict, replay};
use ragtrail::review::runs::{ListedRun, list_runs};
use ragtrail::trace::run_started;
use ragtrail::trace::{EventBody, Integrity, LedgerPolicy, Verdict, check_integrity_with};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace file (`traces/<time>-<runId>.jsonl`).
    pub trace: PathBuf,
    /// Print the comparison as JSON.
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The trace file (`traces/<time>-<runId>.jsonl`).
    pub trace: PathBuf,
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
}

#[derive(Debug, Args)]
pub struct TracesArgs {
    /// How many runs to list.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
}

/// Reads a trace and checks its chain and ledger entry with the operator's trace key (replay and
/// audit both start here).
fn read_checked(
    trace: &std::path::Path,
    no_ledger: bool,
) -> anyhow::Result<(Integrity, Option<ragtrail::trace::TraceFile>)> {
    let key = config::trace_key();
    check_integrity_with(trace, key.as_deref(), ledger_policy(no_ledger))
        .with_context(|| format!("reading {}", trace.display()))
}

fn ledger_policy(no_ledger: bool) -> LedgerPolicy {
    if no_ledger {
        LedgerPolicy::Optional
    } else {
        LedgerPolicy::Required
    }
}

fn integrity_or_exit(integrity: &Integrity) -> Option<ExitCode> {
    if integrity.verdict == Verdict::IntegrityFailure {
        eprintln!("integrity failure: the trace cannot be trusted");
        for p in &integrity.problems {
            eprintln!("  {p}");
        }
        return Some(ExitCode::from(3));
    }
    None
}

pub fn replay_cmd(global: &GlobalArgs, args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let (integrity, file) = read_checked(&args.trace, args.no_ledger)?;
    if let Some(code) = integrity_or_exit(&integrity) {
        return Ok(code);
    }
    let file = file.context("the trace could not be read")?;
    for p in &integrity.problems {
        eprintln!("warning: {p}");
    }
    // Under the caller's access, checked before the index is even opened.
    let caller = config::access_context(global.tenant.as_deref(), &global.roles);
    ragtrail::review::check_access(&file, &caller)?;
    let engine = open_ready_engine(global)?;
    let report = replay(&engine, &file, &caller)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", replay_text(&report));
    }
    if args.live {
        let started = run_started(&file).context("the trace has no run_started line")?;
        let options: AgentRagOptions =
            serde_json::from_value(started.options.clone()).unwrap_or_default();
        let settings = RunSettings {
            options,
            access: caller.clone(),
            today: started.today.clone(),
            trace: Some(TraceSettings {
                dir: global.trace_dir.clone(),
                key: config::trace_key(),
                caller: None,
            }),
            session: None,
            conversation: None,
        };
        let mut planner = super::ask_cmd::choose_planner(None, &Default::default())?;
        let live = agent::run(
            &engine,
            &mut *planner,
            &started.question,
            &settings,
            &mut |_| {},
        )?;
        println!(
            "\nlive re-plan ({}):",
            planner_name(
                planner.kind(),
                &live.trace.as_ref().map(|t| t.path.display().to_string())
            )
        );
        let recorded: Vec<Vec<String>> = report.rounds.iter().map(|r| r.keywords.clone()).collect();
        for i in 0..recorded.len().max(live.rounds.len()) {
            println!(
                "  round {}: recorded [{}] | live [{}]",
                i + 1,
                recorded.get(i).map(|k| k.join(", ")).unwrap_or_default(),
                live.rounds
                    .get(i)
                    .map(|r| r.keywords.join(", "))
                    .unwrap_or_default()
            );
        }
        let recorded_status = file.events().find_map(|e| match &e.body {
            EventBody::RunFinished(f) => Some(format!("{:?}", f.status)),
            _ => None,
        });
        println!(
            "  status: recorded {} | live {:?}",
            recorded_status.unwrap_or_default(),
            live.status
        );
    }
    Ok(ExitCode::from(if report.reproduced { 0 } else { 1 }))
}

fn planner_name(kind: &str, trace: &Option<String>) -> String {
    match trace {
        Some(path) => format!("{kind} planner, trace {path}"),
        None => format!("{kind} planner"),
    }
}

fn replay_text(r: &ReplayReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replay of run {}: {}",
        r.run_id,
        terminal_safe(&r.question)
    );
    let _ = writeln!(
        out,
        "recorded on {} for tenant {} roles [{}]",
        r.today,
        r.access.tenant,
        r.access.roles.join(", ")
    );
    for round in &r.rounds {
        let verdict = match round.verdict {
            RoundVerdict::Identical => "identical",
            RoundVerdict::Reordered => "reordered",
            RoundVerdict::Differs => "differs",
        };
        let _ = writeln!(
            out,
            "round {} [{}]: {verdict} ({} hits then, {} now)",
            round.round,
            terminal_safe(&round.keywords.join(", ")),
            round.recorded.len(),
            round.current.len()
        );
        if let Some(e) = &round.error {
            let _ = writeln!(out, "    error: {e}");
        }
        for id in &round.missing {
            let _ = writeln!(out, "    missing  {id}");
        }
        for id in &round.new {
            let _ = writeln!(out, "    new      {id}");
        }
        for d in &round.drift {
            let _ = writeln!(
                out,
                "    {:<8} {} {}",
                d.state,
                d.chunk_id,
                terminal_safe(&d.title_path)
            );
        }
    }
    for d in &r.cited_drift {
        let _ = writeln!(
            out,
            "cited chunk {} {}: {}",
            d.chunk_id,
            d.state,
            terminal_safe(&d.title_path)
        );
    }
    let _ = writeln!(
        out,
        "{}",
        if r.reproduced {
            "result: reproduced"
        } else {
            "result: differs from the recorded run"
        }
    );
    out
}

pub fn audit_cmd(global: &GlobalArgs, args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let (integrity, file) = read_checked(&args.trace, args.no_ledger)?;
    let format = if args.json {
        AuditFormat::Json
    } else {
        args.format
    };
    let Some(file) = file else {
        integrity_or_exit(&integrity);
        return Ok(ExitCode::from(3));
    };
    let auditor = config::access_context(global.tenant.as_deref(), &global.roles);
    // Another context's run is shown without its evidence: no need for the store then.
    let engine = if integrity.verdict == Verdict::IntegrityFailure
        || ragtrail::review::check_access(&file, &auditor).is_err()
    {
        None
    } else {
        Some(open_ready_engine(global)?)
    };
    let report = audit(&file, integrity, engine.as_ref(), &auditor);
    match format {
        AuditFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        AuditFormat::Text => print!("{}", audit_text(&report)),
        AuditFormat::Markdown => print!("{}", audit_markdown(&report)),
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

/// The audit for people.
pub fn audit_text(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "audit of run {}", r.run_id);
    let _ = writeln!(out, "question: {}", terminal_safe(&r.question));
    let _ = writeln!(
        out,
        "planner: {}   date: {}   status: {} ({})",
        r.planner, r.today, r.status, r.reason
    );
    let _ = writeln!(out, "integrity: {}", r.integrity.status);
    for p in &r.integrity.problems {
        let _ = writeln!(out, "  {p}");
    }
    if let Some(a) = &r.answer {
        let _ = writeln!(out, "answer:\n  {}", terminal_safe(a).replace('\n', "\n  "));
    }
    for (i, c) in r.citations.iter().enumerate() {
        let _ = writeln!(
            out,
            "[{}] {}  {}",
            i + 1,
            c.chunk_id,
            terminal_safe(&c.title_path)
        );
        let _ = writeln!(out, "    source: {}", terminal_safe(&c.source_uri));
        let _ = writeln!(
            out,
            "    quote: “{}” ({})",
            terminal_safe(&c.quote),
            quote_state(c.quote_verified)
        );
        for s in &c.surfaced {
            let _ = writeln!(
                out,
                "    surfaced in round {} [{}] at rank {}, score {:.4} (bm25 rank {}, vector rank {})",
                s.round,
                terminal_safe(&s.keywords.join(", ")),
                s.rank,
                s.score,
                s.bm25_rank.as_deref().unwrap_or("-"),
                s.vector_rank.as_deref().unwrap_or("-")
            );
        }
        let _ = writeln!(out, "    in the store now: {}", c.store_state);
    }
    for f in &r.findings {
        let _ = writeln!(out, "finding: {f}");
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "result: {}",
        match r.exit_code() {
            0 => "clean",
            1 => "findings",
            _ => "integrity failure",
        }
    );
    out
}

fn quote_state(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "verified in the chunk",
        Some(false) => "NOT in the chunk",
        None => "cannot be checked",
    }
}

/// The audit as Markdown, for a ticket (the engine renders it, so the server serves the same).
pub use ragtrail::review::audit_markdown;

pub fn traces_cmd(global: &GlobalArgs, args: &TracesArgs) -> anyhow::Result<ExitCode> {
    let dir = &global.trace_dir;
    // Runs of another tenant, or made with roles this operator lacks, are not listed.
    let access = config::access_context(global.tenant.as_deref(), &global.roles);
    let runs = match list_runs(dir, &access, args.limit) {
        Ok(runs) => runs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "No traces in {} yet: run `ragtrail ask \"…\"`.",
                dir.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for run in runs {
        let run = match run {
            ListedRun::Run(run) => run,
            ListedRun::Unreadable(path) => {
                println!("{}  (unreadable)", path.display());
                continue;
            }
        };
        let status = match run.status {
            Some(status) => format!("{status:?}"),
            None => "Incomplete".to_string(),
        };
        let time = run
            .started
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        println!(
            "{time}  {status:<20} {} rounds  {}\n    {}\n    {}",
            run.rounds,
            terminal_safe(ragtrail::text::truncate_chars(&run.question, 60)),
            terminal_safe(ragtrail::text::truncate_chars(
                &run.answer.unwrap_or_default().replace('\n', " "),
                80
            )),
            run.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
