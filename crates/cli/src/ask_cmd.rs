//! `ragtrail ask`: answer a question by searching in rounds, with cited sources and a trace.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::output::{self, Lang};
use crate::config;
use crate::global::GlobalArgs;
use crate::open::open_current_engine;
use ragtrail::LlmFlags;
use ragtrail::LlmPlanner;
use ragtrail::OfflinePlanner;
use ragtrail::ReaderPlanner;
use ragtrail::SessionStore;
use ragtrail::trace::RunStatus;
use ragtrail::{
    AgentEvent, AgentOutcome, AgentRagOptions, FinalAnswer, ModelCall, ModelUsage, Planner,
    RoundRecord, RunSettings, TraceSettings,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlannerChoice {
    /// Deterministic keyword heuristics and an extractive answer; no network.
    Offline,
    /// A chat model behind an OpenAI-compatible endpoint, with tool calling.
    Llm,
    /// The offline planner searches; a chat model writes the answer from the passages found, in
    /// one call, citing them by number (checked; the offline reply when it cannot answer).
    Reader,
}

/// The chat endpoint of the LLM planner. The API key is read from `RAGTRAIL_LLM_API_KEY` (or
/// `OPENAI_API_KEY`) only, never from a flag.
#[derive(Debug, Default, Clone, Args)]
#[command(next_help_heading = "Chat model")]
pub struct LlmArgs {
    /// OpenAI-compatible chat endpoint, usually ending in /v1 [env: RAGTRAIL_LLM_BASE_URL, then
    /// OPENAI_BASE_URL].
    #[arg(long, value_name = "URL")]
    pub llm_base_url: Option<String>,
    /// Model name sent to the chat endpoint [env: RAGTRAIL_LLM_MODEL].
    #[arg(long, value_name = "NAME")]
    pub llm_model: Option<String>,
    /// Seconds one chat request may take [env: RAGTRAIL_LLM_TIMEOUT_SECS] [default: 120].
    #[arg(long, value_name = "SECS")]
    pub llm_timeout: Option<f64>,
    /// Seconds all the chat requests of one run may take together, retries included; 0 for no
    /// limit [env: RAGTRAIL_LLM_BUDGET_SECS] [default: 600].
    #[arg(long, value_name = "SECS")]
    pub llm_budget: Option<f64>,
    /// The model's context size in tokens: the oldest search results are trimmed from what is
    /// sent to stay inside it, and the trace says which; 0 for no trimming [env:
    /// RAGTRAIL_LLM_CONTEXT_TOKENS] [default: no trimming].
    #[arg(long, value_name = "TOKENS")]
    pub llm_context_tokens: Option<u32>,
}

impl LlmArgs {
    pub fn flags(&self) -> LlmFlags {
        LlmFlags {
            base_url: self.llm_base_url.clone(),
            model: self.llm_model.clone(),
            timeout_secs: self.llm_timeout,
            budget_secs: self.llm_budget,
            context_tokens: self.llm_context_tokens,
        }
    }
}

/// `--max-rounds`: refused outside 1..=MAX_SEARCH_ROUNDS rather than clamped behind the user's back.
pub(crate) fn max_rounds_arg() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=i64::from(ragtrail::MAX_SEARCH_ROUNDS))
}

/// `-k` / `--top-k` of a planner run: refused outside 1..=MAX_TOP_K_PER_ROUND.
pub(crate) fn top_k_arg() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=i64::from(ragtrail::MAX_TOP_K_PER_ROUND))
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question, in any language of the knowledge base.
    pub question: String,
    /// Searches allowed before the planner must answer (1 to 10).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = max_rounds_arg())]
    pub max_rounds: u32,
    /// Hits per search (1 to 20).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N", value_parser = top_k_arg())]
    pub top_k: u32,
    /// Accept answers whose citations were not returned in this run (not recommended).
    #[arg(long)]
    pub no_require_source: bool,
    /// Who plans the searches [default: llm when a chat endpoint is configured, else offline].
    #[arg(long, value_enum)]
    pub planner: Option<PlannerChoice>,
    /// Today's date for the run (YYYY-MM-DD) [default: the local date].
    #[arg(long, value_name = "DATE")]
    pub today: Option<chrono::NaiveDate>,
    /// Print one JSON object (status, answer, citations, rounds, trace path) instead of text;
    /// on an error, `status: "error"` with the cause in `error`.
    #[arg(long)]
    pub json: bool,
    /// Show each search round as it runs, with its scored hits, before the answer [default:
    /// one line per round after it].
    #[arg(long)]
    pub rounds: bool,
    /// Do not write a trace for this run.
    #[arg(long)]
    pub no_trace: bool,
    /// Ask within a conversation: earlier turns inform this one (follow-ups may omit their
    /// topic). Created on first use; `new` starts a fresh one and prints its id.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Remember what the question says about you ("我是B类员工", "I'm based in Singapore",
    /// "我2023年7月入职"): grade, base city and start date, kept for later questions (see
    /// `ragtrail memory`). Without it nothing is remembered.
    #[arg(long)]
    pub remember: bool,
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// The planner of a run: the one asked for, else the LLM planner when a chat endpoint is
/// configured, else the offline one. Checks the chat configuration before anything is sent.
pub(crate) fn choose_planner(
    choice: Option<PlannerChoice>,
    llm: &LlmArgs,
) -> anyhow::Result<Box<dyn Planner>> {
    let env = |name: &str| std::env::var(name).ok();
    let flags = llm.flags();
    let choice = choice.unwrap_or(if ragtrail::chat_endpoint_configured(&flags, &env) {
        PlannerChoice::Llm
    } else {
        PlannerChoice::Offline
    });
    let config = |name: &str| {
        ragtrail::resolve_chat_config(&flags, &env)?.ok_or_else(|| {
            anyhow::anyhow!(
                "the {name} planner needs a chat endpoint: set RAGTRAIL_LLM_BASE_URL (or OPENAI_BASE_URL, or --llm-base-url) and RAGTRAIL_LLM_MODEL"
            )
        })
    };
    Ok(match choice {
        PlannerChoice::Offline => Box::new(OfflinePlanner::new()),
        PlannerChoice::Llm => Box::new(LlmPlanner::new(&config("llm")?)?),
        PlannerChoice::Reader => Box::new(ReaderPlanner::new(&config("reader")?)?),
    })
}

/// The settings of a run from `ask`/`chat` flags and the operator's configuration.
pub fn run_settings(
    global: &GlobalArgs,
    max_rounds: u32,
    top_k: u32,
    require_source: bool,
    today: Option<chrono::NaiveDate>,
    trace: bool,
) -> anyhow::Result<RunSettings> {
    let signer = if trace {
        config::signing_key(&global.data_dir)?
    } else {
        None
    };
    Ok(RunSettings {
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
            signer,
            caller: None,
        }),
        session: None,
        conversation: None,
        // The asker's remembered facts; a memory file that cannot be read stops the run
        // rather than answering as if nothing were remembered.
        memory: ragtrail::MemoryStore::new(&global.data_dir)
            .list(&global.asker()?)
            .context("reading the asker's memory (`ragtrail memory list` shows it)")?,
        observer: crate::telemetry::observer(),
    })
}

pub fn run(global: &GlobalArgs, args: &AskArgs) -> anyhow::Result<ExitCode> {
    if !args.json {
        return ask(global, args);
    }
    // With --json every failure is an object on stdout too, said once (not again on stderr).
    match ask(global, args) {
        Ok(code) => Ok(code),
        Err(err) => {
            let failed = serde_json::json!({
                "status": "error",
                "reason": SETUP_ERROR,
                "error": format!("{err:#}"),
            });
            println!("{}", serde_json::to_string_pretty(&failed)?);
            Ok(ExitCode::from(crate::output::EXIT_ERROR))
        }
    }
}

/// The `reason` of `ask --json` when the run could not start (the engine, the embedder or the
/// planner could not be set up): no `runId`, no trace.
pub const SETUP_ERROR: &str = "setup_error";

fn ask(global: &GlobalArgs, args: &AskArgs) -> anyhow::Result<ExitCode> {
    let mut planner = choose_planner(args.planner, &args.llm)?;
    let lang = Lang::of(&args.question);
    let engine = open_current_engine(global, lang)?;
    let settings = run_settings(
        global,
        args.max_rounds,
        args.top_k,
        !args.no_require_source,
        args.today,
        !args.no_trace,
    )?;
    let json = args.json;
    let live = args.rounds && !json;
    let mut show = |event: AgentEvent<'_>| {
        if live {
            print!("{}", event_text(&event, lang));
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
            let (outcome, turn) = ragtrail::ask_in_session(
                &engine,
                &mut *planner,
                &sessions,
                &id,
                &args.question,
                &settings,
                &mut show,
            )?;
            if !json {
                eprintln!(
                    "{}",
                    match lang {
                        Lang::Zh => format!("会话 {id}，第 {turn} 问"),
                        Lang::En => format!("session {id}, turn {turn}"),
                    }
                );
            }
            outcome
        }
        None => ragtrail::run_agent(&engine, &mut *planner, &args.question, &settings, &mut show)?,
    };
    let remembered = if args.remember {
        remember_said(global, &args.question, &settings.today, &outcome)?
    } else {
        Vec::new()
    };
    if json {
        let mut value = outcome_json(&outcome)?;
        if args.remember
            && let Some(map) = value.as_object_mut()
        {
            map.insert("remembered".into(), serde_json::to_value(&remembered)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if outcome.status == RunStatus::Error {
        // The cause once, where errors go; the trace still tells what ran before it.
        eprintln!(
            "{}",
            output::terminal_safe(outcome.message.as_deref().unwrap_or("error"))
        );
        if let Some(t) = &outcome.trace {
            print!("{}", output::trace_line(&t.path, lang));
        }
    } else {
        print!("{}", outcome_text(&outcome, lang, !args.rounds));
        if let Some(t) = &outcome.trace {
            print!("{}", output::review_hint(global, &t.path, lang));
        }
    }
    // The process ends after this answer: the OS takes the engine's memory back at once, where
    // freeing every chunk record one by one took a seventh of an `ask` over 100k chunks.
    std::mem::forget(engine);
    Ok(ExitCode::from(exit_status(outcome.status)))
}

/// `--remember`: the facts the question states about the asker (the fixed patterns', and the
/// model's proposals the run kept), kept as said in this run; each is told on stderr.
fn remember_said(
    global: &GlobalArgs,
    question: &str,
    today: &str,
    outcome: &AgentOutcome,
) -> anyhow::Result<Vec<ragtrail::Fact>> {
    let store = ragtrail::MemoryStore::new(&global.data_dir);
    let asker = global.asker()?;
    let lang = Lang::of(question);
    let mut kept = Vec::new();
    for (key, value) in outcome.facts_said(question, today) {
        let source = ragtrail::FactSource::Said {
            run_id: outcome.run_id.to_string(),
        };
        let (fact, _) = store.set(&asker, &key, &value, source)?;
        eprintln!(
            "{}",
            output::terminal_safe(&match lang {
                Lang::Zh => format!("已记住：{} = {}", fact.key, fact.value),
                Lang::En => format!("remembered: {} = {}", fact.key, fact.value),
            })
        );
        kept.push(fact);
    }
    Ok(kept)
}

/// `ask`'s exit status for a run's status: 0 answered, 1 insufficient evidence, 3 error, 4
/// evidence (as `ask --help` lists them).
pub fn exit_status(status: RunStatus) -> u8 {
    match status {
        RunStatus::Answered => 0,
        RunStatus::InsufficientEvidence => 1,
        RunStatus::Evidence => EXIT_EVIDENCE,
        _ => crate::output::EXIT_ERROR,
    }
}

/// A live event of `ask --rounds`: a round with its hits, a search skipped or refused, citations
/// refused.
fn event_text(event: &AgentEvent<'_>, lang: Lang) -> String {
    match event {
        AgentEvent::Round(r) => round_text(r, lang),
        AgentEvent::Repeated { keywords } => {
            let keywords = output::terminal_safe(&keywords.join(", "));
            match lang {
                Lang::Zh => format!("跳过：[{keywords}] 已检索过\n"),
                Lang::En => format!("skipped: [{keywords}] was already searched\n"),
            }
        }
        AgentEvent::Rejected { message } => format!(
            "{} {}\n",
            lang.pick("rejected:", "未执行："),
            output::terminal_safe(message)
        ),
        AgentEvent::Refused(refused) => refused
            .iter()
            .map(|r| {
                let reason = output::terminal_safe(&r.reason);
                match lang {
                    Lang::Zh => format!("引用 {} 被拒：{reason}\n", r.chunk_id),
                    Lang::En => format!("refused citation {}: {reason}\n", r.chunk_id),
                }
            })
            .collect(),
    }
}

/// `ask`'s exit status when it gives passages as evidence instead of an answer.
pub const EXIT_EVIDENCE: u8 = 4;

/// The `--json` result object (the engine's, so the server's `/v1/ask` answers the same): the
/// outcome's serialisation as a `Value`, whose keys print sorted as they always have.
pub fn outcome_json(o: &AgentOutcome) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(o)
}

/// One line adding up the model calls, when a model was called: "model: 3 calls, 2431 prompt +
/// 96 completion tokens, 9.4 s".
pub fn model_usage_line(calls: &[ModelCall], lang: Lang) -> Option<String> {
    if calls.is_empty() {
        return None;
    }
    let u = ModelUsage::of(calls);
    let tokens = match (u.prompt_tokens, u.completion_tokens) {
        (Some(p), Some(c)) => {
            let missing = match (u.calls_without_usage, lang) {
                (0, _) => String::new(),
                (n, Lang::En) => format!(" ({n} calls reported none)"),
                (n, Lang::Zh) => format!("（{n} 次未报告）"),
            };
            match lang {
                Lang::En => format!("{p} prompt + {c} completion tokens{missing}"),
                Lang::Zh => format!("提示 {p} + 生成 {c} 个 token{missing}"),
            }
        }
        _ => lang
            .pick("tokens not reported by the server", "服务器未报告 token 数")
            .to_string(),
    };
    let secs = u.latency_ms / 1e3;
    Some(match lang {
        Lang::En => format!(
            "model: {} call{}, {tokens}, {secs:.1} s",
            u.calls,
            if u.calls == 1 { "" } else { "s" }
        ),
        Lang::Zh => format!("模型：{} 次调用，{tokens}，{secs:.1} 秒", u.calls),
    })
}

/// Hits listed per round before "… and N more": every hit a default run (top 5) can cite.
const HITS_SHOWN: usize = 10;

/// One search round as it happens: its keywords, why, and its hits numbered as the answer's
/// sources refer to them ("round 1 #4").
fn round_text(r: &RoundRecord, lang: Lang) -> String {
    let mut out = format!(
        "{} [{}] — {}\n",
        match lang {
            Lang::Zh => format!("第 {} 轮：", r.round),
            Lang::En => format!("round {}:", r.round),
        },
        output::terminal_safe(&r.keywords.join(", ")),
        output::terminal_safe(&r.reason)
    );
    for (i, hit) in r.hits.iter().take(HITS_SHOWN).enumerate() {
        out.push_str(&format!(
            "    #{:<2} {:.4}  {}\n",
            i + 1,
            hit.score,
            output::terminal_safe(&hit.title_path)
        ));
    }
    if r.hits.len() > HITS_SHOWN {
        let more = r.hits.len() - HITS_SHOWN;
        out.push_str(&match lang {
            Lang::Zh => format!("    …… 另有 {more} 条（--json 可见全部）\n"),
            Lang::En => format!("    … and {more} more (--json shows all)\n"),
        });
    }
    if r.hits.is_empty() {
        out.push_str(lang.pick("    (no hits)\n", "    （无结果）\n"));
    }
    out
}

/// What a person reads after the run: the answer or the evidence first, then its sources,
/// then (`summary`) one line per search round; or, without either, what the run says.
fn outcome_text(o: &AgentOutcome, lang: Lang, summary: bool) -> String {
    let mut out = String::new();
    if !summary {
        out.push('\n');
    }
    match &o.answer {
        // Evidence: the statement that this is not an answer, then the passages themselves.
        Some(answer) if o.status == RunStatus::Evidence => {
            let statement = answer.text.lines().next().unwrap_or_default();
            out.push_str(&output::terminal_safe(statement));
            out.push_str("\n\n");
            out.push_str(&sources_text(o, answer, lang, !summary));
        }
        Some(answer) if answer.unsourced => {
            out.push_str(&output::terminal_safe(&answer.text));
            out.push_str(lang.pick(
                "\n(conversational reply: unsourced, nothing was searched)\n",
                "\n（寒暄回复：没有检索，也没有出处）\n",
            ));
        }
        Some(answer) => {
            out.push_str(&output::terminal_safe(&answer.text));
            out.push_str("\n\n");
            out.push_str(&sources_text(o, answer, lang, !summary));
        }
        None => {
            out.push_str(&output::terminal_safe(
                o.message
                    .as_deref()
                    .unwrap_or(lang.pick("No answer.", "没有回答。")),
            ));
            out.push('\n');
        }
    }
    if summary && o.answer.as_ref().is_some_and(|a| !a.unsourced) {
        out.push('\n');
        out.push_str(&rounds_summary(&o.rounds, lang));
    }
    if let Some(line) = model_usage_line(&o.model_calls, lang) {
        out.push('\n');
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(t) = &o.trace {
        out.push('\n');
        out.push_str(&output::trace_line(&t.path, lang));
    }
    out
}

/// The searches behind a reply, one line each: their keywords and how many hits they gave
/// (`ask --rounds` shows the hits themselves).
fn rounds_summary(rounds: &[RoundRecord], lang: Lang) -> String {
    let n = rounds.len();
    let mut out = match lang {
        Lang::Zh => format!("检索 {n} 轮（--rounds 显示各轮结果）：\n"),
        Lang::En => format!(
            "{} (--rounds shows the hits):\n",
            output::count(n, "search", "searches")
        ),
    };
    for r in rounds {
        let keywords = output::terminal_safe(&r.keywords.join(", "));
        let hits = r.hits.len();
        out.push_str(&match lang {
            Lang::Zh => format!("  第 {} 轮：[{keywords}]，{hits} 条结果\n", r.round),
            Lang::En => format!(
                "  round {}: [{keywords}], {}\n",
                r.round,
                output::count(hits, "hit", "hits")
            ),
        });
    }
    out
}

/// The cited passages, numbered as the text cites them; with `seen`, where the run first found
/// each (the rounds shown above it).
fn sources_text(o: &AgentOutcome, answer: &FinalAnswer, lang: Lang, seen: bool) -> String {
    let mut out = lang.pick("Sources:\n", "来源：\n").to_string();
    for (i, c) in answer.citations.iter().enumerate() {
        let seen = match output::first_seen(&o.rounds, &c.chunk_id).filter(|_| seen) {
            Some((round, n)) => match lang {
                Lang::Zh => format!("  第 {round} 轮 #{n}"),
                Lang::En => format!("  round {round} #{n}"),
            },
            None => String::new(),
        };
        out.push_str(&format!(
            "  [{}] {}{seen}\n      {}  ({})\n      “{}”\n",
            i + 1,
            output::terminal_safe(&c.title_path),
            output::terminal_safe(&c.source_uri),
            c.chunk_id,
            output::quote_lines(&c.quote, "      ")
        ));
    }
    out
}
