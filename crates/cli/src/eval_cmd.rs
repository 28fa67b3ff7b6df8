//! `ragtrail eval`: retrieval quality on a BEIR-format set, agent quality on a golden set, and
//! multi-round recall on a multi-hop set. Each prints a table, or JSON with `--json`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::ask_cmd::{LlmArgs, PlannerChoice, choose_planner};
use super::output;
use crate::config;
use crate::global::GlobalArgs;
use crate::open::open_ready_engine;
use crate::output::Lang;
use ragtrail::Engine;
use ragtrail::Fusion;
use ragtrail::OfflinePlanner;
use ragtrail::eval::retrieval::{self, BeirSet, ChunkMap, RetrievalOptions, RetrievalReport};
use ragtrail::eval::{agent as agent_eval, golden, multihop};
use ragtrail::{AgentRagOptions, Planner, RunSettings, TraceSettings};

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: EvalCommand,
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Retrieval quality on a BEIR-format set: nDCG@10, recall@10, recall@100 and MRR@10 for
    /// BM25 alone, vector alone, RRF and min-max fusion, in one run.
    ///
    /// The set (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`) is ingested into a
    /// scratch index, one chunk per document with the title as its titlePath; each query's text
    /// is the keywords (one keyword when short). Scoring follows trec_eval / BEIR: graded gain,
    /// log2 discount, ideal ranking from the qrels; queries without a relevant document are
    /// left out and counted.
    ///
    /// Exit status: 0 measured, 3 error.
    Retrieval(RetrievalArgs),
    /// Agent quality on a golden question set, over the knowledge base of --data-dir.
    ///
    /// Evidence recall (in any round and by round), citation precision, answered vs refused,
    /// facts in the answer, mean rounds, latency. Every run's trace is kept under --out and
    /// linked from `report.md` there.
    ///
    /// Exit status: 0 measured, 3 error.
    Agent(AgentArgs),
    /// Multi-round recall on a multi-hop BEIR-format set (e.g. HotpotQA): the share of
    /// questions whose relevant documents were all seen after round 1, 2, 3.
    ///
    /// Exit status: 0 measured, 3 error.
    Multihop(MultihopArgs),
}

#[derive(Debug, Args)]
pub struct BeirArgs {
    /// BEIR-format folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.
    #[arg(long, value_name = "DIR")]
    pub beir: PathBuf,
    /// Which qrels/<NAME>.tsv to score [default: test, or the only split there is].
    #[arg(long, value_name = "NAME")]
    pub split: Option<String>,
    /// Build the scratch index in this folder and keep it [default: a temporary folder].
    #[arg(long, value_name = "DIR")]
    pub index_dir: Option<PathBuf>,
    /// Also put each document's title on the first line of its text, the text the embedder
    /// sees and snippets show; it stays the titlePath too. (BM25 scores a one-chunk document's
    /// title with its text anyway, as bm25s and BEIR's single-field BM25 do.)
    #[arg(long)]
    pub title_in_text: bool,
    /// Read the query embeddings a previous evaluation left in FILE (if it exists) and write
    /// them all back when done: a model embedder need not embed thousands of questions again.
    /// The file names its embedder; another embedder's file is refused.
    #[arg(long, value_name = "FILE")]
    pub query_cache: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RetrievalArgs {
    #[command(flatten)]
    pub set: BeirArgs,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write each query's scores, top 10 and relevant ranks as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    pub per_query: Option<PathBuf>,
    /// Write each query's two legs (document ids and raw scores, `--depth` long) and its
    /// relevant documents as JSON lines to FILE, to study fusions offline.
    #[arg(long, value_name = "FILE")]
    pub legs: Option<PathBuf>,
    /// Modes to score, comma-separated: bm25, vector, rrf[:K], minmax[:W], agree[:W],
    /// confidence[:W] (min-max whose BM25 weight is 1 - W·(1 - c), c the share of the
    /// query's key terms BM25's best hit covers), standout (min-max weighing each leg by how
    /// far its best hit stands out among its hits), standout-coverage (standout, BM25's part
    /// times c).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "bm25,vector,rrf,minmax"
    )]
    pub modes: Vec<Fusion>,
    /// Length of each ranking (at least 100: recall@100 needs it).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub depth: usize,
    /// Also measure single-thread queries per second of each mode (ranking alone and the full
    /// searchDocs call), index build excluded.
    #[arg(long)]
    pub timing: bool,
    /// Weight of a match in a section's heading path against one in the text [default: the
    /// engine's]. A BEIR document is one chunk: its title is scored with its text instead.
    #[arg(long, value_name = "X")]
    pub title_boost: Option<f32>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Searches allowed per question (1 to 10).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = super::ask_cmd::max_rounds_arg())]
    pub max_rounds: u32,
    /// Hits per search (1 to 20).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N", value_parser = super::ask_cmd::top_k_arg())]
    pub top_k: u32,
    /// Who plans the searches [default: llm when a chat endpoint is configured, else offline].
    #[arg(long, value_enum)]
    pub planner: Option<PlannerChoice>,
    /// Today's date for the runs (YYYY-MM-DD) [default: the local date].
    #[arg(long, value_name = "DATE")]
    pub today: Option<chrono::NaiveDate>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub llm: LlmArgs,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Golden question set (JSON lines, see eval/README.md).
    #[arg(long, value_name = "FILE")]
    pub golden: PathBuf,
    /// Folder for report.json, report.md and the runs' traces
    /// [default: eval-runs/agent-<UTC time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fuse every search with this mode instead of the embedder's default (rrf[:K],
    /// minmax[:W], agree[:W], confidence[:W], standout, standout-coverage, bm25, vector): to
    /// measure a fusion on the set.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<Fusion>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct MultihopArgs {
    #[command(flatten)]
    pub set: BeirArgs,
    /// Also keep every run's trace and report.json / report.md in this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
}

pub fn run(global: &GlobalArgs, args: &EvalArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        EvalCommand::Retrieval(a) => retrieval_cmd(global, a),
        EvalCommand::Agent(a) => agent_cmd(global, a),
        EvalCommand::Multihop(a) => multihop_cmd(global, a),
    }
}

/// The scratch engine holding a BEIR corpus, and the folder it lives in.
struct Scratch {
    engine: Engine,
    map: ChunkMap,
    set: BeirSet,
    /// The query embeddings the evaluation made (saved with `--query-cache`).
    memo: std::sync::Arc<retrieval::QueryMemo>,
    _tmp: Option<tempfile::TempDir>,
}

/// Loads the set into a scratch index embedded with the configured embedder (`--embedder`,
/// `RAGTRAIL_EMBED_*`; the hashing one when none is configured).
fn load_and_ingest(global: &GlobalArgs, args: &BeirArgs) -> anyhow::Result<Scratch> {
    let set = retrieval::load(&args.beir, args.split.as_deref())
        .with_context(|| format!("reading the BEIR set {}", args.beir.display()))?;
    let (dir, tmp) = match &args.index_dir {
        Some(d) => (d.clone(), None),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("ragtrail-eval-")
                .tempdir()
                .context("creating a scratch folder for the index")?;
            (tmp.path().to_path_buf(), Some(tmp))
        }
    };
    let embedder = crate::open::embedder_for_new_index(global)?;
    // Each query is ranked once per mode: embed it once.
    let memo = std::sync::Arc::new(retrieval::QueryMemo::new(embedder));
    if let Some(path) = &args.query_cache {
        let n = memo
            .load(path)
            .with_context(|| format!("reading the query embeddings in {}", path.display()))?;
        eprintln!("{n} query embeddings read from {}", path.display());
    }
    let embedder: std::sync::Arc<dyn ragtrail::Embedder> = memo.clone();
    let mut engine = Engine::open_with(&dir, embedder)
        .with_context(|| format!("opening the scratch index {}", dir.display()))?;
    global.apply_search_settings(&mut engine.settings);
    eprintln!("ingesting {} documents of {} …", set.corpus.len(), set.name);
    let started = Instant::now();
    let (summary, map) = retrieval::ingest(
        &mut engine,
        &set,
        retrieval::ChunkShape {
            title_in_text: args.title_in_text,
        },
        &mut |_| {},
    )
    .with_context(|| format!("ingesting {}", args.beir.display()))?;
    eprintln!(
        "ingested {} chunks in {:.2} s",
        summary.chunks,
        started.elapsed().as_secs_f64()
    );
    Ok(Scratch {
        engine,
        map,
        set,
        memo,
        _tmp: tmp,
    })
}

fn retrieval_cmd(global: &GlobalArgs, args: &RetrievalArgs) -> anyhow::Result<ExitCode> {
    let mut scratch = load_and_ingest(global, &args.set)?;
    if let Some(b) = args.title_boost {
        scratch.engine.settings.title_boost = b;
    }
    let options = RetrievalOptions {
        modes: args.modes.clone(),
        depth: args.depth,
        timing: args.timing,
    };
    let report = retrieval::evaluate(&scratch.engine, &scratch.map, &scratch.set, &options)
        .context("evaluating retrieval")?;
    if let Some(path) = &args.legs {
        retrieval::write_legs(
            &scratch.engine,
            &scratch.map,
            &scratch.set,
            args.depth,
            path,
        )?;
    }
    if let Some(path) = &args.set.query_cache {
        scratch
            .memo
            .save(path)
            .with_context(|| format!("writing the query embeddings to {}", path.display()))?;
    }
    if let Some(path) = &args.per_query {
        retrieval::write_per_query(path, &report.per_query)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", retrieval_table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The retrieval report as a text table.
pub fn retrieval_table(r: &RetrievalReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({} split): {} documents, {} queries scored ({} without a relevant document and {} without a text left out); rankings {} deep; vector leg {}; title boost {}",
        output::terminal_safe(&r.dataset),
        output::terminal_safe(&r.split),
        r.documents,
        r.queries,
        r.skipped_no_relevant,
        r.skipped_missing_text,
        r.depth,
        r.embedder,
        r.title_boost
    );
    let timed = r.modes.iter().any(|m| m.timing.is_some());
    let _ = write!(
        out,
        "\n{:<12} {:>8} {:>8} {:>8} {:>8}",
        "mode", "nDCG@10", "R@10", "R@100", "MRR@10"
    );
    if timed {
        let _ = write!(out, " {:>10} {:>14}", "ranked q/s", "searchDocs q/s");
    }
    out.push('\n');
    for m in &r.modes {
        let s = &m.scores;
        let _ = write!(
            out,
            "{:<12} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
            m.mode, s.ndcg_at_10, s.recall_at_10, s.recall_at_100, s.mrr_at_10
        );
        if let Some(t) = &m.timing {
            let _ = write!(out, " {:>10.0} {:>14.0}", t.ranked_qps, t.search_docs_qps);
        }
        out.push('\n');
    }
    out
}

fn run_settings(global: &GlobalArgs, run: &RunArgs, traces: Option<PathBuf>) -> RunSettings {
    let mut settings = RunSettings::new(
        AgentRagOptions {
            max_search_rounds: run.max_rounds,
            top_k_per_round: run.top_k,
            require_source: true,
        },
        config::access_context(global.tenant.as_deref(), &global.roles),
        run.today
            .unwrap_or_else(|| chrono::Local::now().date_naive())
            .format("%Y-%m-%d")
            .to_string(),
    );
    settings.trace = traces.map(|dir| TraceSettings {
        dir,
        key: config::trace_key(),
        // Evaluation traces are measurements, not records of answers given: left unsigned.
        signer: None,
        caller: None,
    });
    settings
}

/// Makes a fresh planner per question. The first one is made (and its configuration checked)
/// before anything runs; should a later one fail, the offline planner stands in and the error
/// is kept in `failure`, to be reported instead of the results.
struct Planners<'a> {
    run: &'a RunArgs,
    first: Option<Box<dyn Planner>>,
    failure: Option<anyhow::Error>,
    /// `offline`, or `llm (model)`.
    label: String,
}

impl<'a> Planners<'a> {
    fn new(run: &'a RunArgs) -> anyhow::Result<Self> {
        let first = choose_planner(run.planner, &run.llm)?;
        let label = match first.model() {
            Some(m) => format!("{} ({m})", first.kind()),
            None => first.kind().to_string(),
        };
        Ok(Self {
            run,
            first: Some(first),
            failure: None,
            label,
        })
    }

    fn make(&mut self) -> Box<dyn Planner> {
        if let Some(p) = self.first.take() {
            return p;
        }
        match choose_planner(self.run.planner, &self.run.llm) {
            Ok(p) => p,
            Err(e) => {
                self.failure.get_or_insert(e);
                Box::new(OfflinePlanner::new())
            }
        }
    }

    fn finish(self) -> anyhow::Result<()> {
        match self.failure {
            Some(e) => Err(e.context("making a planner")),
            None => Ok(()),
        }
    }
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A trace path relative to the report folder, for a Markdown link.
fn relative(out: &Path, trace: &str) -> String {
    Path::new(trace)
        .strip_prefix(out)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| trace.to_string())
}

fn agent_cmd(global: &GlobalArgs, args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let items = golden::load(&args.golden)?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("eval-runs").join(format!(
            "agent-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut planners = Planners::new(&args.run)?;
    let mut engine = open_ready_engine(global, Lang::En)?;
    if let Some(fusion) = args.fusion {
        engine.settings.fusion = fusion;
        engine.settings.agent_fusion = fusion;
    }
    let settings = run_settings(global, &args.run, Some(out.join("traces")));
    let report = agent_eval::evaluate(&engine, &items, &settings, &mut || planners.make())
        .context("running the golden set")?;
    let label = planners.label.clone();
    planners.finish()?;
    write_file(
        &out.join("report.json"),
        &serde_json::to_string_pretty(&report)?,
    )?;
    let summary = agent_summary(&report);
    let mut md = format!(
        "# Agent evaluation\n\nGolden set: `{}` ({} items). Planner: {}; {} rounds, top {}; today {}.\n\n{}\n",
        args.golden.display(),
        items.len(),
        label,
        args.run.max_rounds,
        args.run.top_k,
        settings.today,
        summary
    );
    md.push_str("| item | answerable | status | rounds | recall r1 / r2 / r3 | citation precision | facts | ms | trace |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in &report.items {
        let opt = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.2}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.2} / {:.2} / {:.2} | {} | {} | {:.1} | {} |",
            r.id,
            r.answerable,
            r.status,
            r.rounds,
            r.recall_by_round[0],
            r.recall_by_round[1],
            r.recall_by_round[2],
            opt(r.citation_precision),
            opt(r.facts_found),
            r.latency_ms,
            r.trace
                .as_deref()
                .map(|t| format!("[trace]({})", relative(&out, t)))
                .unwrap_or_default()
        );
    }
    write_file(&out.join("report.md"), &md)?;
    if args.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{summary}");
        println!(
            "\nreport: {}\ntraces: {}",
            out.join("report.md").display(),
            out.join("traces").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The summary table of an agent report (Markdown, readable as text).
pub fn agent_summary(r: &agent_eval::AgentReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| metric | value |\n|---|---|");
    let rows = [
        (
            "evidence recall (expected sections seen in any round)",
            format!("{:.3}", r.evidence_recall),
        ),
        (
            "evidence recall after round 1 / 2 / 3",
            format!(
                "{:.3} / {:.3} / {:.3}",
                r.evidence_recall_by_round[0],
                r.evidence_recall_by_round[1],
                r.evidence_recall_by_round[2]
            ),
        ),
        (
            "citation precision (answers and evidence)",
            format!("{:.3}", r.citation_precision),
        ),
        (
            "facts found in the answer (answerable)",
            format!("{:.3}", r.facts_found),
        ),
        (
            "answerable questions answered",
            format!("{:.3} (of {})", r.answered_answerable, r.answerable),
        ),
        (
            "answerable questions given as evidence",
            format!("{:.3} (of {})", r.evidence_answerable, r.answerable),
        ),
        (
            "answerable questions answered or given as evidence, an expected section cited",
            format!("{:.3} (of {})", r.cited_answerable, r.answerable),
        ),
        (
            "unanswerable questions refused",
            format!("{:.3} (of {})", r.refused_unanswerable, r.unanswerable),
        ),
        (
            "unanswerable questions given as evidence",
            format!("{:.3} (of {})", r.evidence_unanswerable, r.unanswerable),
        ),
        (
            "useful replies (an answer, or evidence in at most 3 passages, quoting an expected section), answerable",
            r.useful_by_lang
                .iter()
                .map(|(lang, s)| format!("{lang} {:.3} (of {})", s.useful, s.of))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "wrong answers (answered, no expected section quoted), of all answers",
            format!(
                "{} of {} ({:.1}%)",
                r.wrong_answers,
                r.answers,
                100.0 * r.wrong_answers as f64 / r.answers.max(1) as f64
            ),
        ),
        (
            "unanswerable questions answered",
            format!("{} (of {})", r.unanswerable_answered, r.unanswerable),
        ),
        ("mean rounds", format!("{:.2}", r.mean_rounds)),
        (
            "latency p50 / p95 (whole run, model calls included)",
            format!("{:.1} / {:.1} ms", r.latency_p50_ms, r.latency_p95_ms),
        ),
        (
            "model calls, prompt + completion tokens, model seconds per question",
            format!(
                "{:.2}, {:.0} + {:.0}, {:.1} s",
                r.model_calls_per_question,
                r.prompt_tokens_per_question,
                r.completion_tokens_per_question,
                r.model_seconds_per_question
            ),
        ),
    ];
    for (name, value) in rows {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    out
}

fn multihop_cmd(global: &GlobalArgs, args: &MultihopArgs) -> anyhow::Result<ExitCode> {
    let mut planners = Planners::new(&args.run)?;
    let scratch = load_and_ingest(global, &args.set)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    }
    let settings = run_settings(
        global,
        &args.run,
        args.out.as_ref().map(|o| o.join("traces")),
    );
    let report = multihop::evaluate(
        &scratch.engine,
        &scratch.map,
        &scratch.set,
        &settings,
        &mut || planners.make(),
    )
    .context("running the multi-hop questions")?;
    let label = planners.label.clone();
    planners.finish()?;
    let table = multihop_table(&report);
    if let Some(out) = &args.out {
        write_file(
            &out.join("report.json"),
            &serde_json::to_string_pretty(&report)?,
        )?;
        let mut md = format!("# Multi-hop evaluation\n\nPlanner: {label}.\n\n{table}\n");
        md.push_str("| question | gold seen by round | single search | rounds | keywords | trace |\n|---|---|---|---|---|---|\n");
        for i in &report.items {
            let _ = writeln!(
                md,
                "| {} | {} of {} | {} | {} | {} | {} |",
                i.query_id,
                i.gold_seen_by_round
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" / "),
                i.gold.len(),
                i.gold_seen_single_search,
                i.rounds,
                i.keywords
                    .iter()
                    .map(|k| format!("[{}]", k.join(", ")).replace('|', "\\|"))
                    .collect::<Vec<_>>()
                    .join(" "),
                i.trace
                    .as_deref()
                    .map(|t| format!("[trace]({})", relative(out, t)))
                    .unwrap_or_default()
            );
        }
        write_file(&out.join("report.md"), &md)?;
    }
    if args.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{table}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The multi-hop totals as a table.
pub fn multihop_table(r: &multihop::MultihopReport) -> String {
    let mut out = format!(
        "{} ({} split): {} questions, up to {} rounds of top {}; mean rounds {:.2}\n\n| after round | all relevant seen (joint recall) | any relevant seen | relevant seen (mean share) |\n|---|---|---|---|\n",
        output::terminal_safe(&r.dataset),
        output::terminal_safe(&r.split),
        r.questions,
        r.max_rounds,
        r.top_k_per_round,
        r.mean_rounds
    );
    for (i, joint) in r.joint_recall_by_round.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} | {:.3} |",
            i + 1,
            joint,
            r.any_recall_by_round[i],
            r.gold_recall_by_round[i]
        );
    }
    let _ = writeln!(
        out,
        "\none search of the whole question, top {}: joint recall {:.3}",
        r.max_rounds * r.top_k_per_round,
        r.joint_recall_single_search
    );
    out
}
