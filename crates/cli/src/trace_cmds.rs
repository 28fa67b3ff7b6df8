//! `ragtrail replay`, `ragtrail audit` and `ragtrail traces`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::output::{self, terminal_safe};
use super::{GlobalArgs, open_ready_engine};
use crate::config;
use ragtrail::access::AccessContext;
use ragtrail::agent::{self, AgentRagOptions, RunSettings, TraceSettings};
use ragtrail::review::audit::{AuditReport, audit};
pub use ragtrail::review::markdown::audit_markdown;
use ragtrail::review::markdown::{decision_text, header, one_line, quote_state};
use ragtrail::review::replay::{ReplayOptions, ReplayReport, RoundVerdict, replay_with};
use ragtrail::review::runs::{ListedRun, RunFilter, RunSummary, list_runs, may_see, trace_files};
use ragtrail::trace::{CheckedTrace, EventBody, LedgerPolicy, Verdict, check_trace};
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
    pub fusion: Option<ragtrail::search::fusion::Fusion>,
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
    let engine = open_ready_engine(global)?;
    if let Err(mismatch) = ragtrail::review::check_knowledge_base(&file, &engine) {
        if !args.force {
            eprintln!("error: {mismatch}");
            return Ok(ExitCode::from(super::EXIT_ERROR));
        }
        eprintln!("warning (--force): {mismatch}");
    }
    let options = ReplayOptions {
        fusion: args.fusion,
        top_k: args.top_k.map(|k| k as usize),
    };
    let report = replay_with(&engine, &file, &caller, &options)?;
    let live = if args.live {
        Some(live_replan(global, &engine, &file, &caller, &report)?)
    } else {
        None
    };
    let rerun = if args.rerun {
        let trace = if args.rerun_trace {
            Some(TraceSettings {
                dir: global.trace_dir.clone(),
                key: config::trace_key(),
                signer: config::signing_key(&global.data_dir)?,
                caller: None,
            })
        } else {
            None
        };
        Some(ragtrail::review::rerun::rerun(
            &engine, &file, &caller, trace,
        )?)
    } else {
        None
    };
    if args.json {
        // One JSON document on stdout: the replay report, with the re-plan under `live`.
        let mut value = serde_json::to_value(&report)?;
        if let (Some(live), Some(obj)) = (&live, value.as_object_mut()) {
            obj.insert("live".into(), serde_json::to_value(live)?);
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
    }
    let same = report.reproduced && rerun.as_ref().is_none_or(|r| r.same);
    Ok(ExitCode::from(if same { 0 } else { 1 }))
}

/// `replay --live`: the recorded question planned again, now, beside the recorded run.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveReplan {
    planner: String,
    /// The new run's trace.
    trace: Option<String>,
    rounds: Vec<LiveRound>,
    recorded_status: Option<ragtrail::trace::RunStatus>,
    live_status: ragtrail::trace::RunStatus,
    /// The recorded run's last answer text (or refusal message), and the new run's.
    recorded_answer: Option<String>,
    live_answer: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct LiveRound {
    round: usize,
    recorded: Option<Vec<String>>,
    live: Option<Vec<String>>,
}

fn live_replan(
    global: &GlobalArgs,
    engine: &ragtrail::engine::Engine,
    file: &ragtrail::trace::TraceFile,
    caller: &AccessContext,
    report: &ReplayReport,
) -> anyhow::Result<LiveReplan> {
    let started = run_started(file).context("the trace has no run_started line")?;
    let options: AgentRagOptions =
        serde_json::from_value(started.options.clone()).unwrap_or_default();
    let settings = RunSettings {
        options,
        access: caller.clone(),
        today: started.today.clone(),
        trace: Some(TraceSettings {
            dir: global.trace_dir.clone(),
            key: config::trace_key(),
            signer: config::signing_key(&global.data_dir)?,
            caller: None,
        }),
        session: None,
        conversation: None,
    };
    let mut planner = super::ask_cmd::choose_planner(None, &Default::default())?;
    let live = agent::run(
        engine,
        &mut *planner,
        &started.question,
        &settings,
        &mut |_| {},
    )?;
    let recorded: Vec<Vec<String>> = report.rounds.iter().map(|r| r.keywords.clone()).collect();
    let rounds = (0..recorded.len().max(live.rounds.len()))
        .map(|i| LiveRound {
            round: i + 1,
            recorded: recorded.get(i).cloned(),
            live: live.rounds.get(i).map(|r| r.keywords.clone()),
        })
        .collect();
    let recorded_status = file.events().find_map(|e| match &e.body {
        EventBody::RunFinished(f) => Some(f.status),
        _ => None,
    });
    let recorded_answer = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.text.clone()),
            _ => None,
        })
        .last();
    let live_answer = live
        .answer
        .as_ref()
        .map(|a| a.text.clone())
        .or_else(|| live.message.clone());
    Ok(LiveReplan {
        planner: planner.kind().to_string(),
        trace: live.trace.as_ref().map(|t| t.path.display().to_string()),
        rounds,
        recorded_status,
        live_status: live.status,
        recorded_answer,
        live_answer,
    })
}

fn live_text(live: &LiveReplan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nlive re-plan ({}):",
        planner_name(&live.planner, &live.trace)
    );
    for r in &live.rounds {
        let _ = writeln!(
            out,
            "  round {}: recorded [{}] | live [{}]",
            r.round,
            r.recorded
                .as_ref()
                .map(|k| k.join(", "))
                .unwrap_or_default(),
            r.live.as_ref().map(|k| k.join(", ")).unwrap_or_default()
        );
    }
    let _ = writeln!(
        out,
        "  status: recorded {} | live {}",
        live.recorded_status
            .map(|s| s.label())
            .unwrap_or("incomplete"),
        live.live_status.label()
    );
    for (side, answer) in [
        ("recorded", &live.recorded_answer),
        ("live", &live.live_answer),
    ] {
        let _ = writeln!(
            out,
            "  {side} answer:\n    {}",
            terminal_safe(answer.as_deref().unwrap_or("(none)")).replace('\n', "\n    ")
        );
    }
    out
}

/// `replay --rerun` for people: each round's keywords and hits, recorded beside re-run.
fn rerun_text(r: &ragtrail::review::rerun::RerunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nre-run of the planner ({}) on today's index:",
        planner_name(&r.planner, &r.trace)
    );
    for n in &r.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    let keywords = |k: &Option<Vec<String>>| match k {
        Some(k) => format!("[{}]", terminal_safe(&k.join(", "))),
        None => "(no such round)".to_string(),
    };
    for round in &r.rounds {
        if round.keywords_same {
            let _ = write!(
                out,
                "  round {}: keywords same {}",
                round.round,
                keywords(&round.recorded_keywords)
            );
        } else {
            let _ = write!(
                out,
                "  round {}: keywords recorded {} | re-run {}",
                round.round,
                keywords(&round.recorded_keywords),
                keywords(&round.rerun_keywords)
            );
        }
        if round.hits_same {
            let _ = writeln!(out, "; hits same ({})", round.rerun_hits.len());
        } else {
            let _ = writeln!(
                out,
                "; hits differ ({} then, {} now)",
                round.recorded_hits.len(),
                round.rerun_hits.len()
            );
        }
        for (hits, what) in [(&round.lost, "lost"), (&round.gained, "gained")] {
            for h in hits {
                let _ = writeln!(
                    out,
                    "    {what:<7} #{} {}  ({})",
                    h.rank,
                    terminal_safe(&h.title_path),
                    h.chunk_id
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "  status: recorded {} | re-run {}",
        r.recorded_status, r.rerun_status
    );
    if r.answer_same {
        let _ = writeln!(
            out,
            "  answer: same, citing [{}]",
            r.rerun_citations.join(", ")
        );
    } else {
        for (side, answer, cited) in [
            ("recorded", &r.recorded_answer, &r.recorded_citations),
            ("re-run", &r.rerun_answer, &r.rerun_citations),
        ] {
            let _ = writeln!(
                out,
                "  {side} answer (citing [{}]):\n    {}",
                cited.join(", "),
                terminal_safe(answer.as_deref().unwrap_or("(none)")).replace('\n', "\n    ")
            );
        }
    }
    let _ = writeln!(
        out,
        "  re-run: {}",
        if r.same {
            "the planner planned and answered the same"
        } else {
            "differs from the recorded run"
        }
    );
    out
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
    if r.recorded_knowledge_base != r.current_knowledge_base
        && !r.recorded_knowledge_base.is_empty()
    {
        let _ = writeln!(
            out,
            "compared against another knowledge base: recorded {}, now {}",
            r.recorded_knowledge_base, r.current_knowledge_base
        );
    }
    if let Some(cf) = &r.counterfactual {
        let mut what = Vec::new();
        if let Some(f) = &cf.fusion {
            what.push(format!("fusion {f}"));
        }
        if let Some(k) = cf.top_k {
            what.push(format!("topK {k}"));
        }
        let _ = writeln!(
            out,
            "what if: the recorded keywords searched again with {} (instead of what the run used)",
            what.join(", ")
        );
    }
    for round in &r.rounds {
        let verdict = match round.verdict {
            RoundVerdict::Identical => "identical",
            RoundVerdict::Reordered => "reordered",
            RoundVerdict::Differs => "differs",
        };
        let _ = writeln!(
            out,
            "round {} [{}]: {verdict} ({} then, {} now)",
            round.round,
            terminal_safe(&round.keywords.join(", ")),
            output::count(round.recorded.len(), "hit", "hits"),
            round.current.len()
        );
        if let Some(e) = &round.error {
            let _ = writeln!(out, "    error: {e}");
        }
        for d in &round.drift {
            let _ = writeln!(
                out,
                "    {:<8} {}  ({})",
                d.state,
                terminal_safe(&d.title_path),
                d.chunk_id
            );
            let _ = writeln!(out, "        was: {}", one_line(&d.recorded_text));
            match &d.current_text {
                Some(now) => {
                    let _ = writeln!(out, "        now: {}", one_line(now));
                }
                None => {
                    let _ = writeln!(out, "        now: (no longer in the knowledge base)");
                }
            }
        }
        // A lost hit shows the text the run saw, a gained one the text there is now.
        for (hits, what, when) in [
            (&round.missing, "missing", "was"),
            (&round.new, "new", "now"),
        ] {
            for h in hits {
                let _ = writeln!(
                    out,
                    "    {what:<8} #{} {}  ({})\n        {when}: {}",
                    h.rank,
                    terminal_safe(&h.title_path),
                    h.chunk_id,
                    one_line(&h.text)
                );
            }
        }
        for m in &round.moved {
            let _ = writeln!(
                out,
                "    moved    #{} → #{} {}  ({})",
                m.from,
                m.to,
                terminal_safe(&m.title_path),
                m.chunk_id
            );
        }
    }
    let found = |f: &Option<ragtrail::review::replay::Found>| match f {
        Some(f) => format!("round {} #{}", f.round, f.rank),
        None => "not found".to_string(),
    };
    for (i, c) in r.citations.iter().enumerate() {
        let _ = writeln!(
            out,
            "citation [{}] {}  ({}): recorded {}, now {}",
            i + 1,
            terminal_safe(&c.title_path),
            c.chunk_id,
            found(&c.recorded),
            found(&c.now)
        );
    }
    for d in &r.cited_drift {
        let _ = writeln!(
            out,
            "cited chunk {}: {}  ({})",
            d.state,
            terminal_safe(&d.title_path),
            d.chunk_id
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
        Some(open_ready_engine(global)?)
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

/// The audit for people.
pub fn audit_text(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "audit of run {}", r.run_id);
    for (name, value) in header(r) {
        let _ = writeln!(out, "{name}: {}", terminal_safe(&value));
    }
    for t in &r.earlier_turns {
        let _ = writeln!(
            out,
            "  turn {}: {}\n    answered: {}",
            t.turn,
            one_line(&t.question),
            one_line(&t.answer)
        );
    }
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
        seen_text_lines(&mut out, c);
    }
    // Without a grounded answer the hits are the evidence there is: list them.
    let list_hits = !r.decision.sufficient;
    for round in &r.rounds {
        let _ = writeln!(
            out,
            "round {} [{}]: {}, keywords covered {:.0}%{}",
            round.round,
            terminal_safe(&round.keywords.join(", ")),
            output::count(round.hits, "hit", "hits"),
            round.keyword_coverage * 100.0,
            if round.cited { ", cited" } else { "" }
        );
        if list_hits {
            for h in &round.hit_list {
                let _ = writeln!(
                    out,
                    "    #{:<2} {:.4}  {}  ({})\n        {}",
                    h.rank,
                    h.score,
                    terminal_safe(&h.title_path),
                    h.chunk_id,
                    one_line(&h.snippet)
                );
            }
        }
    }
    let _ = writeln!(out, "decision: {}", decision_text(r));
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
            _ if r.signature.as_ref().is_some_and(|s| s.state == "invalid") => {
                "integrity failure (invalid signature)"
            }
            _ => "integrity failure",
        }
    );
    out
}

/// The text a citation's chunk held when the run saw it, and today's against it.
fn seen_text_lines(out: &mut String, c: &ragtrail::review::audit::CitationAudit) {
    let (seen, store_state) = (&c.seen, c.store_state);
    let indent = |t: &str| terminal_safe(t).replace('\n', "\n        ");
    match (seen.version, &seen.text) {
        ("not checked", _) => {
            let _ = writeln!(out, "    in the store now: {store_state}");
            return;
        }
        ("kept", Some(text)) => {
            let _ = writeln!(
                out,
                "    text the run was shown ({}@{}, indexed {}):\n        {}",
                c.chunk_id,
                ragtrail::text::truncate_chars(c.recorded_hash.as_deref().unwrap_or("-"), 16),
                seen.first_indexed.as_deref().unwrap_or("-"),
                indent(text)
            );
        }
        ("pruned", _) => {
            let _ = writeln!(
                out,
                "    text the run was shown: pruned on {} (ingest --keep-versions); only the quote and the recorded snippet remain",
                seen.pruned_at.as_deref().unwrap_or("-")
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "    text the run was shown: not kept (indexed before this knowledge base kept versions)"
            );
        }
    }
    match seen.today {
        "changed" => {
            let _ = writeln!(out, "    in the store now: changed");
            match (&seen.diff, &seen.current_text) {
                (Some(diff), _) => {
                    let _ = writeln!(out, "    word diff, then → now:\n        {}", indent(diff));
                }
                (None, Some(now)) => {
                    let _ = writeln!(out, "    now:\n        {}", indent(now));
                }
                _ => {}
            }
        }
        "deleted" => {
            let _ = writeln!(
                out,
                "    in the store now: deleted (no longer in the knowledge base)"
            );
        }
        other => {
            let _ = writeln!(out, "    in the store now: {other}");
        }
    }
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
            terminal_safe(ragtrail::text::truncate_chars(&t.question, 60)),
            terminal_safe(ragtrail::text::truncate_chars(
                &t.answer.replace('\n', " "),
                80
            )),
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
