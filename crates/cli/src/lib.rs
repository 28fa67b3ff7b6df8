//! Command-line interface: clap definitions, output formatting and progress. No business logic:
//! every command calls the library.

mod ask_cmd;
mod chat_cmd;
mod config;
mod db_cmd;
mod eval_cmd;
mod output;
mod search_cmd;
mod serve_cmd;
mod sign_cmds;
mod status_cmd;
pub mod trace_cmds;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::config::{DEFAULT_DATA_DIR, DEFAULT_KNOWLEDGE_DIR, DEFAULT_TRACE_DIR};
use ragtrail::embed::{self, EmbedConfig, EmbedderChoice};
use ragtrail::engine::{Engine, IngestOptions, IngestProgress, IngestSummary};

/// Exit status for errors (2 is clap's usage error and is not reused).
pub const EXIT_ERROR: u8 = 3;

/// Agentic retrieval over policy documents, with a replayable, auditable trace.
///
/// Put Markdown or text files in `knowledge/`, then ask or search. The first command that needs
/// the index builds it from `knowledge/`.
#[derive(Debug, Parser)]
#[command(name = "ragtrail", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Where the index and the embedded store live.
    #[arg(long, global = true, env = "RAGTRAIL_DATA_DIR", default_value = DEFAULT_DATA_DIR, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Knowledge folder ingested on first use when the index is empty.
    #[arg(long, global = true, env = "RAGTRAIL_KNOWLEDGE_DIR", default_value = DEFAULT_KNOWLEDGE_DIR, value_name = "DIR")]
    pub knowledge: PathBuf,
    /// Where traces and the trace ledger are written.
    #[arg(long, global = true, env = "RAGTRAIL_TRACE_DIR", default_value = DEFAULT_TRACE_DIR, value_name = "DIR")]
    pub trace_dir: PathBuf,
    /// Tenant whose documents may be searched (set by the operator, never by the model).
    #[arg(long, global = true, env = "RAGTRAIL_TENANT", value_name = "NAME")]
    pub tenant: Option<String>,
    /// Role granted to the asker; repeat or separate with commas (e.g. `--role hr`).
    #[arg(
        long = "role",
        global = true,
        env = "RAGTRAIL_ROLES",
        value_name = "ROLE",
        value_delimiter = ','
    )]
    pub roles: Vec<String>,
    /// PostgreSQL + pgvector as the system of record (unset: the embedded store in --data-dir).
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database_url: Option<String>,
    /// Re-ingest the knowledge folder first when its files changed since the last ingest
    /// (`ask`, `search`, `chat`); without it they only say so.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_AUTO_INGEST",
        action = clap::ArgAction::SetTrue,
        // The variable is on unless it says 0, false, no or off.
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub auto_ingest: bool,
    /// Where a document without `tenant:` in its front matter goes when ingested: `default`
    /// (the default tenant) or `deny` (an error naming the file), for a multi-tenant folder.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_DEFAULT_ACCESS",
        value_enum,
        default_value_t = DefaultAccessArg::Default,
        value_name = "RULE"
    )]
    pub default_access: DefaultAccessArg,
    /// How a search that names no fusion fuses the two legs (`search`, HTTP and MCP
    /// `searchDocs`, and the agent's searches unless `--agent-fusion` says otherwise), in
    /// `search --fusion`'s terms; default: `agree:0.5` with the hashing embedder, `standout`
    /// with a model. With a model that knows the askers' languages, `standout-coverage` lets
    /// its meaning lead where BM25's best hit holds little of the question
    /// (`scripts/embed-server.sh` prints it for multilingual-e5-small).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_SEARCH_FUSION",
        value_name = "FUSION"
    )]
    pub search_fusion: Option<ragtrail::search::fusion::Fusion>,
    /// How the agent's own searches fuse the two legs (`ask`, `chat`, `serve`, `mcp`, `eval`),
    /// in `search --fusion`'s terms; default: as `searchDocs` does (`--search-fusion`). To try
    /// a fusion on the agent alone, e.g. `coverage:1` (BM25 weighed by its best hit's share
    /// of the question's key terms).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_AGENT_FUSION",
        value_name = "FUSION"
    )]
    pub agent_fusion: Option<ragtrail::search::fusion::Fusion>,
    #[command(flatten)]
    pub embed: EmbedArgs,
}

/// `--default-access`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DefaultAccessArg {
    Default,
    Deny,
}

impl GlobalArgs {
    /// The search settings the operator chose on the command line (`--search-fusion`,
    /// `--agent-fusion`).
    pub(crate) fn apply_search_settings(&self, settings: &mut ragtrail::search::SearchSettings) {
        if let Some(fusion) = self.search_fusion {
            settings.fusion = fusion;
            settings.agent_fusion = fusion;
        }
        if let Some(fusion) = self.agent_fusion {
            settings.agent_fusion = fusion;
        }
    }

    /// Ingest options from the global flags.
    pub fn ingest_options(&self) -> IngestOptions {
        let mut options = IngestOptions::default();
        options.scan.default_access = match self.default_access {
            DefaultAccessArg::Default => ragtrail::knowledge::DefaultAccess::DefaultTenant,
            DefaultAccessArg::Deny => ragtrail::knowledge::DefaultAccess::Deny,
        };
        options
    }

    /// The database URL, if one is set and not blank.
    pub fn database_url(&self) -> Option<&str> {
        self.database_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }
}

/// Which embedder computes the vectors (see docs/embeddings.md).
#[derive(Debug, Args)]
#[command(next_help_heading = "Embeddings")]
pub struct EmbedArgs {
    /// `hashing` (offline, lexical), `local` (a model folder) or `http` (an OpenAI-compatible
    /// endpoint) [default: local if a model folder is set, else http if an endpoint is set,
    /// else hashing].
    #[arg(long, global = true, env = "RAGTRAIL_EMBEDDER", value_name = "KIND")]
    pub embedder: Option<EmbedderChoice>,
    /// Local sentence-transformers model folder (config.json, tokenizer.json, model.safetensors).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MODEL_DIR",
        value_name = "DIR"
    )]
    pub embed_model_dir: Option<PathBuf>,
    /// OpenAI-compatible embeddings endpoint, usually ending in /v1.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_BASE_URL",
        value_name = "URL"
    )]
    pub embed_base_url: Option<String>,
    /// API key of the embeddings endpoint (sent as a bearer token, never logged).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub embed_api_key: Option<String>,
    /// Model name sent to the embeddings endpoint.
    #[arg(long, global = true, env = "RAGTRAIL_EMBED_MODEL", value_name = "NAME")]
    pub embed_model: Option<String>,
    /// Expected vector length of the endpoint [default: learnt from its first answer].
    #[arg(long, global = true, env = "RAGTRAIL_EMBED_DIMS", value_name = "N")]
    pub embed_dims: Option<u32>,
    /// Inputs per request (http, default 64) or per forward pass (local, default 32).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_BATCH_SIZE",
        value_name = "N"
    )]
    pub embed_batch_size: Option<usize>,
    /// Embedding requests in flight at once (http) [default: 2].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_CONCURRENCY",
        value_name = "N"
    )]
    pub embed_concurrency: Option<usize>,
    /// Longest text sent to the endpoint, in characters; longer ones are cut and counted
    /// [default: 6000].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MAX_CHARS",
        value_name = "N"
    )]
    pub embed_max_chars: Option<usize>,
    /// How queries and passages are marked for the endpoint: none, input-type (an input_type
    /// field "query"/"passage", as scripts/embed-server.sh's server wants), e5 (text prefixes
    /// "query: "/"passage: "), bge, nomic, input-type:QUERY,PASSAGE or prefix:QUERY|PASSAGE.
    /// Part of the index: changing it needs `ingest --rebuild` [default: none].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MARKING",
        value_name = "MARKING"
    )]
    pub embed_marking: Option<embed::Marking>,
}

impl EmbedArgs {
    pub fn config(&self) -> EmbedConfig {
        EmbedConfig {
            choice: self.embedder.unwrap_or_default(),
            base_url: self.embed_base_url.clone(),
            api_key: self.embed_api_key.clone(),
            model: self.embed_model.clone(),
            model_dir: self.embed_model_dir.clone(),
            dims: self.embed_dims,
            batch_size: self.embed_batch_size,
            concurrency: self.embed_concurrency,
            max_input_chars: self.embed_max_chars,
            marking: self.embed_marking.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer a question from the knowledge base, citing its sources, and write a trace.
    ///
    /// The planner searches in rounds (keywords, not sentences), then answers only from the hits
    /// it was shown, each claim cited with a verbatim quote. Without evidence it says so and lists
    /// the keywords it tried. Exit status: 0 answered, 1 insufficient evidence, 3 error.
    Ask(ask_cmd::AskArgs),
    /// Talk with the knowledge base: follow-up questions may omit their topic.
    ///
    /// Each turn is answered like `ask` (cited, traced); the last turns and a cache of searches
    /// are kept per session in the data directory, so `--session ID` resumes after a restart.
    Chat(chat_cmd::ChatArgs),
    /// Read a knowledge folder into the index: only what changed since the last ingest.
    ///
    /// `.md`, `.txt`, `.html`/`.htm`, `.docx` and `.pdf` files, recursively; a `NAME.pdf.yaml`
    /// (or `.docx.yaml`, `.html.yaml`) beside a file is its front matter (tenant, roles, status,
    /// version, updated, title). Unchanged files are skipped, changed ones replaced, deleted ones
    /// removed. Every file that is not read is named with its reason (unsupported type, empty,
    /// encrypted or broken PDF, no text layer, corrupt .docx…) and keeps its previous version in
    /// the index; the summary counts files per format. Malformed front matter stops the ingest
    /// (the index is left as it was).
    Ingest(IngestArgs),
    /// Re-run a recorded run's searches against the current index and show what changed.
    ///
    /// The recorded keywords, topK, fusion and date are reused; no model is called. It runs under
    /// your access context (--tenant, --role), which must be the run's: a trace recorded for
    /// another tenant or other roles is refused. `--rerun` also re-plans the question with the
    /// offline planner on today's index. Exit status: 0 reproduced, 1 differs, 3 invalid or
    /// tampered trace (an invalid signature included, checked with the data directory's
    /// signing key and keyring), or refused.
    Replay(trace_cmds::ReplayArgs),
    /// Show which evidence produced a run's answer, and whether the trace can be trusted.
    ///
    /// Verifies the hash chain and the ledger first (and the run's signature, with
    /// --public-key or the data directory's signing key and keyring), then for each citation:
    /// where it surfaced, whether its quote is in the chunk, the exact text the run was shown
    /// (kept even after its document was edited or removed) and whether today's chunk is the
    /// same, changed (with a word diff) or deleted, as your --tenant and --role see it. A run of another
    /// access context shows its integrity only. Never calls a model. Exit status: 0 clean, 1
    /// findings (a run unsigned or signed by a key not at hand included), 3 integrity failure
    /// (an invalid signature included).
    Audit(trace_cmds::AuditArgs),
    /// List recent runs, newest first (yours only: your --tenant, and roles you hold).
    Traces(trace_cmds::TracesArgs),
    /// Check a trace as a third party: hash chain, ledger entry and the operator's signature,
    /// with the public key only (no store, no secret).
    ///
    /// With --ledger-head (pinned earlier from `ragtrail ledger head`), also that the ledger
    /// still holds that head, which shows runs removed from its end. Exit status: 0 verified,
    /// 3 failed.
    Verify(sign_cmds::VerifyArgs),
    /// The operator's Ed25519 signing key and the keyring of keys trusted to have signed runs:
    /// `keys generate`, `keys public`, `keys list`, `keys trust FILE`.
    Keys(sign_cmds::KeysArgs),
    /// The trace ledger: `ledger head` prints its last entry, to pin elsewhere.
    Ledger(sign_cmds::LedgerArgs),
    /// Search the knowledge base with keywords (terms, not query syntax) and show the hits.
    Search(search_cmd::SearchArgs),
    /// Print a chunk: today's text (`show c_…`) or a past one (`show c_…@HASH`, the content
    /// hash `audit` prints), kept even after its document was edited or removed.
    ///
    /// Under your access (--tenant, --role): a chunk you may not see is reported exactly as one
    /// that does not exist. Exit status: 0 shown, 1 no such chunk or version (or pruned), 3 bad
    /// input.
    Show(search_cmd::ShowArgs),
    /// Apply pending database migrations (needs DATABASE_URL).
    Migrate,
    /// Rebuild the BM25 index from the system of record (PostgreSQL when DATABASE_URL is set).
    Reindex,
    /// Show the data directory, the embedder of the index and the configured one, counts and
    /// the index's age.
    Status(status_cmd::StatusArgs),
    /// Measure retrieval and agent quality: BEIR-format sets, golden questions, multi-hop sets.
    Eval(eval_cmd::EvalArgs),
    /// Serve the HTTP API: /v1/search, /v1/ask, /v1/traces (and audit, replay), /healthz, /readyz.
    ///
    /// Every /v1 request needs `Authorization: Bearer <token>` (see `ragtrail tokens`); the
    /// token alone decides the tenant and roles, and each run's trace records its name.
    Serve(serve_cmd::ServeArgs),
    /// Serve MCP over stdin/stdout: tools `searchDocs` and `ask`, each call traced.
    ///
    /// Access is the operator's (--tenant, --role), as for `ask`; no tool argument changes it.
    Mcp(serve_cmd::McpArgs),
    /// Make, list and revoke the bearer tokens of `ragtrail serve`.
    Tokens(serve_cmd::TokensArgs),
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Folder to ingest [default: the --knowledge folder].
    pub dir: Option<PathBuf>,
    /// Re-read and re-index every document, even unchanged ones.
    #[arg(long)]
    pub rebuild: bool,
    /// Skip files larger than this many bytes.
    #[arg(long, env = "RAGTRAIL_MAX_FILE_BYTES", default_value_t = 5 * 1024 * 1024, value_name = "BYTES")]
    pub max_file_bytes: u64,
    /// How many past texts of each chunk to keep: N (0 keeps only today's text) or `forever`.
    /// Every chunk text ever indexed is kept by its content hash, so `audit` can show what a
    /// run was shown after its document changed; with N, older ones are pruned at the end of
    /// this ingest, and audits of runs that saw them say "pruned" (see docs/evidence-versions.md).
    #[arg(
        long,
        env = "RAGTRAIL_KEEP_VERSIONS",
        default_value = "forever",
        value_name = "N"
    )]
    pub keep_versions: ragtrail::store::KeepVersions,
    /// Print the summary as JSON: added, changed, removed (source paths), unchanged, chunks,
    /// generation, versionsPruned, formats ({"pdf": {"read": 2, "skipped": 1}, …}) and skipped ([{"path",
    /// "reason"}]).
    #[arg(long)]
    pub json: bool,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    config::load_dotenv();
    let cli = Cli::parse();
    init_logging();
    match run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::from(EXIT_CLOSED_PIPE),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Exit status when the reader of stdout went away (`ragtrail audit … | head`): 128 + SIGPIPE,
/// what a shell reports for a command a closed pipe stopped.
pub const EXIT_CLOSED_PIPE: u8 = 141;

/// `println!` panics when stdout is a pipe whose reader has gone. That is the reader's choice,
/// not a fault: end quietly instead of printing a panic and a backtrace. Any other panic goes to
/// the usual hook. (Restoring SIGPIPE's default action would do the same for stdout, but would
/// also kill the process on a write to a socket an HTTP or database peer closed.)
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(i32::from(EXIT_CLOSED_PIPE));
        }
        default_hook(info);
    }));
}

/// An error that is a write to a closed stdout (`chat` writes with `writeln!(out, …)?`): a bare
/// I/O error with no context. A broken pipe deeper in a chain (a server that closed its socket)
/// is a real error and is reported.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().count() == 1
        && err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Ask(args) => ask_cmd::run(&cli.global, &args),
        Command::Chat(args) => chat_cmd::run(&cli.global, &args),
        Command::Ingest(args) => ingest_cmd(&cli.global, &args),
        Command::Search(args) => search_cmd::run(&cli.global, &args),
        Command::Show(args) => search_cmd::show(&cli.global, &args),
        Command::Replay(args) => trace_cmds::replay_cmd(&cli.global, &args),
        Command::Audit(args) => trace_cmds::audit_cmd(&cli.global, &args),
        Command::Traces(args) => trace_cmds::traces_cmd(&cli.global, &args),
        Command::Verify(args) => sign_cmds::verify_cmd(&args),
        Command::Keys(args) => sign_cmds::keys_cmd(&cli.global, &args),
        Command::Ledger(args) => sign_cmds::ledger_cmd(&cli.global, &args),
        Command::Migrate => db_cmd::migrate(&cli.global),
        Command::Reindex => db_cmd::reindex(&cli.global),
        Command::Status(args) => status_cmd::run(&cli.global, &args),
        Command::Eval(args) => eval_cmd::run(&cli.global, &args),
        Command::Serve(args) => serve_cmd::serve(&cli.global, &args),
        Command::Mcp(args) => serve_cmd::mcp(&cli.global, &args),
        Command::Tokens(args) => serve_cmd::tokens(&cli.global, &args),
    }
}

fn open_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    open_engine_as(global, false)
}

/// `for_rebuild`: an index written in an older format opens empty, to be rebuilt.
fn open_engine_as(global: &GlobalArgs, for_rebuild: bool) -> anyhow::Result<Engine> {
    let embedder = embed::from_config(&global.embed.config()).context("setting up the embedder")?;
    let mut engine = if let Some(url) = global.database_url() {
        Engine::open_postgres(&global.data_dir, url, embedder)
            .context("opening the knowledge base in PostgreSQL")?
    } else if for_rebuild {
        Engine::open_for_rebuild(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    } else {
        Engine::open_with(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    };
    global.apply_search_settings(&mut engine.settings);
    Ok(engine)
}

/// Opens the engine, ingesting the knowledge folder first if nothing was ingested yet.
pub(crate) fn open_ready_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    let mut engine = open_engine(global)?;
    if engine.is_empty() {
        eprintln!(
            "The index is empty: ingesting {} first.",
            global.knowledge.display()
        );
        let summary = run_ingest(&mut engine, &global.knowledge, &global.ingest_options())?;
        eprintln!("{}", output::ingest_summary_line(&summary));
    }
    Ok(engine)
}

/// [`open_ready_engine`] for a command that answers from the index (`ask`, `search`, `chat`):
/// knowledge files edited, added or removed since the last ingest are re-ingested first with
/// `--auto-ingest`, and otherwise named on stderr with the command that brings the index up
/// to date, so nobody is answered from an old text without knowing it.
pub(crate) fn open_current_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    let mut engine = open_ready_engine(global)?;
    let Some(changes) = engine.knowledge_changes().filter(|c| !c.is_empty()) else {
        return Ok(engine);
    };
    if global.auto_ingest && !changes.root_missing {
        eprintln!(
            "{}; re-ingesting first (--auto-ingest).",
            output::knowledge_changes_line(&changes)
        );
        let summary = run_ingest(&mut engine, &changes.root, &global.ingest_options())?;
        eprintln!("{}", output::ingest_summary_line(&summary));
    } else {
        eprintln!(
            "note: {}; answers come from the text as it was then. {}",
            output::knowledge_changes_line(&changes),
            output::knowledge_refresh_hint(&changes, &global.data_dir)
        );
    }
    Ok(engine)
}

fn run_ingest(
    engine: &mut Engine,
    dir: &Path,
    options: &IngestOptions,
) -> anyhow::Result<IngestSummary> {
    let style = |unit: &str| {
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} {{pos}}/{{len}} {unit} [{{elapsed}}, {{per_sec}}, eta {{eta}}]"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(style("chunks"));
        bar
    });
    let resumed = |kept: usize| {
        format!("resuming: {kept} vectors kept from an ingest that stopped before it finished")
    };
    let mut progress = |p: IngestProgress| {
        if let (IngestProgress::Resumed { kept }, None) = (&p, &bar) {
            eprintln!("{}", resumed(*kept));
        }
        if let Some(bar) = &bar {
            match p {
                // A long file's pages (a PDF of a hundred pages and more), so a big file does
                // not look stuck.
                IngestProgress::Reading { file, done, pages } if pages >= 100 => {
                    if done == 1 {
                        bar.reset();
                        bar.set_style(style("pages"));
                        bar.set_length(pages as u64);
                        bar.set_message(format!("reading {file}"));
                    }
                    bar.set_position(done as u64);
                    if done == pages {
                        bar.set_style(style("chunks"));
                    }
                }
                IngestProgress::Reading { .. } => {}
                IngestProgress::Indexing { total } => {
                    bar.reset();
                    bar.set_message("indexing");
                    bar.set_length(total as u64);
                }
                IngestProgress::Indexed { done } => bar.set_position(done as u64),
                IngestProgress::Embedding { total } => {
                    // A fresh start, so chunks/s and the ETA measure embedding alone.
                    bar.reset();
                    bar.set_message("embedding");
                    bar.set_length(total as u64);
                }
                IngestProgress::Embedded { done } => bar.set_position(done as u64),
                IngestProgress::Resumed { kept } => bar.println(resumed(kept)),
            }
        }
    };
    let summary = engine
        .ingest(dir, options, &mut progress)
        .with_context(|| format!("ingesting {}", dir.display()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    for skipped in &summary.skipped {
        eprintln!("warning: skipped {}: {}", skipped.path, skipped.reason);
    }
    let truncated = engine.embedder().truncated_inputs();
    if truncated > 0 {
        eprintln!(
            "note: {truncated} chunk texts were longer than the embedder accepts and were embedded from their beginning only"
        );
    }
    Ok(summary)
}

fn ingest_cmd(global: &GlobalArgs, args: &IngestArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| global.knowledge.clone());
    let mut engine = open_engine_as(global, args.rebuild)?;
    let mut options = IngestOptions {
        rebuild: args.rebuild,
        ..global.ingest_options()
    };
    options.scan.max_file_bytes = args.max_file_bytes;
    options.keep_versions = args.keep_versions;
    let summary = run_ingest(&mut engine, &dir, &options)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&output::ingest_summary_json(&summary))?
        );
    } else {
        println!("{}", output::ingest_summary_line(&summary));
    }
    Ok(ExitCode::SUCCESS)
}
