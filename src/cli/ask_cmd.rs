//! `ragtrail ask`: answer a question by searching in rounds, with cited sources and a trace.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{GlobalArgs, open_ready_engine, output};
use crate::agent::offline::OfflinePlanner;
use crate::agent::{self, AgentEvent, AgentOutcome, AgentRagOptions, RunSettings, TraceSettings};
use crate::config;
use crate::session::{self, SessionStore};
use crate::trace::RunStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlannerChoice {
    /// Deterministic keyword heuristics and an extractive answer; no network.
    Offline,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question, in any language of the knowledge base.
    pub question: String,
    /// Searches allowed before the planner must answer.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub max_rounds: u32,
    /// Hits per search (at most 20).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N")]
    pub top_k: u32,
    /// Accept answers whose citations were not returned in this run (not recommended).
    #[arg(long)]
    pub no_require_source: bool,
    /// Who plans the searches.
    #[arg(long, value_enum, default_value_t = PlannerChoice::Offline)]
    pub planner: PlannerChoice,
    /// Today's date for the run (YYYY-MM-DD) [default: the local date].
    #[arg(long, value_name = "DATE")]
    pub today: Option<chrono::NaiveDate>,
    /// Print one JSON object (status, answer, citations, rounds, trace path) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Do not write a trace for this run.
    #[arg(long)]
    pub no_trace: bool,
    /// Ask within a conversation: earlier turns inform this one (follow-ups may omit their
    /// topic). Created on first use; `new` starts a fresh one and prints its id.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// The settings of a run from `ask`/`chat` flags and the operator's configuration.
pub fn run_settings(
    global: &GlobalArgs,
    max_rounds: u32,
    top_k: u32,
    require_source: bool,
    today: Option<chrono::NaiveDate>,
    trace: bool,
) -> RunSettings {
    RunSettings {
        options: AgentRagOptions {
            max_search_rounds: max_rounds,
            top_k_per_round: top_k,
            require_source,
        },
        access: config::access_context(global.tenant.as_deref(), &global.roles),
        today: today
            .unwrap_or_else(|| chrono::Local::now().date_naive())
            .format("%Y-%m-%d")
            .to_string(),
        trace: trace.then(|| TraceSettings {
            dir: global.trace_dir.clone(),
            key: config::trace_key(),
        }),
        session: None,
        conversation: None,
    }
}

pub fn run(global: &GlobalArgs, args: &AskArgs) -> anyhow::Result<ExitCode> {
    let engine = open_ready_engine(global)?;
    let settings = run_settings(
        global,
        args.max_rounds,
        args.top_k,
        !args.no_require_source,
        args.today,
        !args.no_trace,
    );
    let mut planner = match args.planner {
        PlannerChoice::Offline => OfflinePlanner::new(),
    };
    let json = args.json;
    let mut show = |event: AgentEvent<'_>| {
        if json {
            return;
        }
        match event {
            AgentEvent::Round(r) => {
                println!(
                    "round {}: [{}] — {}",
                    r.round,
                    output::terminal_safe(&r.keywords.join(", ")),
                    output::terminal_safe(&r.reason)
                );
                for hit in r.hits.iter().take(3) {
                    println!(
                        "    {:.4}  {}",
                        hit.score,
                        output::terminal_safe(&hit.title_path)
                    );
                }
                if r.hits.is_empty() {
                    println!("    (no hits)");
                }
            }
            AgentEvent::Repeated { keywords } => {
                println!("skipped: [{}] was already searched", keywords.join(", "))
            }
            AgentEvent::Rejected { message } => {
                println!("rejected: {}", output::terminal_safe(message))
            }
            AgentEvent::Refused(refused) => {
                for r in refused {
                    println!("refused citation {}: {}", r.chunk_id, r.reason);
                }
            }
        }
    };
    let outcome = match &args.session {
        Some(id) => {
            let id = if id == "new" {
                SessionStore::new_id()
            } else {
                id.clone()
            };
            let sessions = SessionStore::new(&global.data_dir);
            let (outcome, turn) = session::ask(
                &engine,
                &mut planner,
                &sessions,
                &id,
                &args.question,
                &settings,
                &mut show,
            )?;
            if !json {
                eprintln!("session {id}, turn {turn}");
            }
            outcome
        }
        None => agent::run(&engine, &mut planner, &args.question, &settings, &mut show)?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome_json(&outcome))?);
    } else {
        print!("{}", outcome_text(&outcome));
    }
    Ok(ExitCode::from(match outcome.status {
        RunStatus::Answered => 0,
        RunStatus::InsufficientEvidence => 1,
        _ => super::EXIT_ERROR,
    }))
}

fn status_name(status: &RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The `--json` result object.
pub fn outcome_json(o: &AgentOutcome) -> serde_json::Value {
    json!({
        "runId": o.run_id.to_string(),
        "status": status_name(&o.status),
        "reason": o.reason,
        "answer": o.answer.as_ref().map(|a| a.text.clone()).or_else(|| o.message.clone()),
        "citations": o.answer.as_ref().map(|a| a.citations.clone()).unwrap_or_default(),
        "rounds": o.rounds.iter().map(|r| json!({
            "round": r.round,
            "keywords": r.keywords,
            "reason": r.reason,
            "hits": r.hits,
            "sufficiency": r.sufficiency,
        })).collect::<Vec<_>>(),
        "trace": o.trace.as_ref().map(|t| t.path.display().to_string()),
    })
}

fn outcome_text(o: &AgentOutcome) -> String {
    let mut out = String::from("\n");
    match &o.answer {
        Some(answer) if answer.unsourced => {
            out.push_str(&output::terminal_safe(&answer.text));
            out.push_str("\n(conversational reply: unsourced, nothing was searched)\n");
        }
        Some(answer) => {
            out.push_str(&output::terminal_safe(&answer.text));
            out.push_str("\n\nSources:\n");
            for (i, c) in answer.citations.iter().enumerate() {
                out.push_str(&format!(
                    "  [{}] {}\n      {}  ({})\n      “{}”\n",
                    i + 1,
                    output::terminal_safe(&c.title_path),
                    output::terminal_safe(&c.source_uri),
                    c.chunk_id,
                    output::terminal_safe(&c.quote)
                ));
            }
        }
        None => {
            out.push_str(&output::terminal_safe(
                o.message.as_deref().unwrap_or("No answer."),
            ));
            out.push('\n');
        }
    }
    if let Some(t) = &o.trace {
        let path = t.path.display();
        out.push_str(&format!(
            "\ntrace: {path}\nnext:  ragtrail replay {path}\n       ragtrail audit {path}\n"
        ));
    }
    out
}
