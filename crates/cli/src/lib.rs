//! Command-line interface: the command line and its dispatch to one module per command. No
//! business logic: every command calls the library. The global flags are `global`, opening
//! the engine (and ingesting on first use) is `open`.

mod ask_cmd;
mod chat_cmd;
mod config;
mod db_cmd;
mod eval_cmd;
mod global;
mod ingest_cmd;
mod memory_cmd;
mod model_cmd;
mod open;
mod output;
mod search_cmd;
mod serve_cmd;
mod sign_cmds;
mod status_cmd;
mod telemetry;
pub mod trace_cmds;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use global::{DefaultAccessArg, EmbedArgs, GlobalArgs};
pub use ingest_cmd::IngestArgs;
pub use output::{EXIT_CLOSED_PIPE, EXIT_ERROR};

/// Agentic retrieval over policy documents, with a replayable, auditable trace.
///
/// Put Markdown or text files in `knowledge/`, then ask or search. The first command that needs
/// the index builds it from `knowledge/`, installing the embedding model first (`ragtrail model
/// install`; `--embedder hashing` needs none).
#[derive(Debug, Parser)]
#[command(
    name = "ragtrail",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = "Exit status: each command's --help lists its own; 2 is a usage error, 141 a reader of stdout that went away (`| head`)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer a question from the knowledge base, citing its sources, and write a trace.
    ///
    /// The planner searches in rounds (keywords, not sentences), then answers only from the hits
    /// it was shown, each claim cited with a verbatim quote. Without an answer it quotes the
    /// passages that bear on the question as evidence, or says there is none and lists the
    /// keywords it tried. The answer comes first, then its sources and one line per search;
    /// `--rounds` shows each search's hits as it runs.
    ///
    /// Exit status: 0 answered, 1 insufficient evidence, 3 error (an index embedded with another
    /// model, an embeddings or chat server that does not answer, a missing model included;
    /// `--json` then prints `status: "error"` with the cause), 4 evidence: passages to read, not
    /// an answer.
    Ask(ask_cmd::AskArgs),
    /// Talk with the knowledge base: follow-up questions may omit their topic.
    ///
    /// Each turn is answered like `ask` (cited, traced); the last turns and a cache of searches
    /// are kept per session in the data directory, so `--session ID` resumes after a restart.
    ///
    /// Exit status: 0 when you leave (a question's error is printed and the chat goes on), 3
    /// error before the first question.
    Chat(chat_cmd::ChatArgs),
    /// Read a knowledge folder into the index: only what changed since the last ingest.
    ///
    /// `.md`, `.txt`, `.html`/`.htm`, `.docx` and `.pdf` files, recursively; a `NAME.EXT.yaml`
    /// beside any of them (`policy.pdf.yaml`, `notes.txt.yaml`) is its front matter (tenant,
    /// roles, status, version, updated, title). Unchanged files are skipped, changed ones replaced, deleted ones
    /// removed. Every file that is not read is named with its reason (unsupported type, empty,
    /// encrypted or broken PDF, no text layer, corrupt .docx…) and keeps its previous version in
    /// the index; the summary counts files per format. Malformed front matter stops the ingest
    /// (the index is left as it was), and so does access metadata that would not be applied
    /// (TOML `+++`, nested or merged access keys, an empty `tenant:`, two sidecars).
    ///
    /// Exit status: 0 ingested (skipped files included), 3 error (the ingest stopped).
    Ingest(ingest_cmd::IngestArgs),
    /// Re-run a recorded run's searches against the current index and show what changed.
    ///
    /// The recorded keywords, topK, fusion and date are reused; no model is called. It runs under
    /// your access context (--tenant, --role), which must be the run's: a trace recorded for
    /// another tenant or other roles is refused. `--rerun` also re-plans the question with the
    /// offline planner on today's index (with the remembered facts the run recorded), and says
    /// when your memory today (--user) would change the answer. Exit status: 0 reproduced, 1
    /// differs, 3 invalid or tampered trace (an invalid signature included, checked with the
    /// data directory's signing key and keyring), or refused.
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
    ///
    /// Exit status: 0 listed (none included), 3 error.
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
    ///
    /// Exit status: 0 done, 3 error.
    Keys(sign_cmds::KeysArgs),
    /// The trace ledger: `ledger head` prints its last entry, to pin elsewhere.
    ///
    /// Exit status: 0 printed, 3 error.
    Ledger(sign_cmds::LedgerArgs),
    /// Search the knowledge base with keywords (terms, not query syntax) and show the hits.
    ///
    /// Exit status: 0 searched (no hits included), 3 error (an index embedded with another
    /// model, an embeddings server that does not answer included).
    Search(search_cmd::SearchArgs),
    /// Print a chunk: today's text (`show c_…`) or a past one (`show c_…@HASH`, the content
    /// hash `audit` prints), kept even after its document was edited or removed.
    ///
    /// Under your access (--tenant, --role): a chunk you may not see is reported exactly as one
    /// that does not exist. Exit status: 0 shown, 1 no such chunk or version (or pruned), 3 bad
    /// input.
    Show(search_cmd::ShowArgs),
    /// Apply pending database migrations (needs DATABASE_URL).
    ///
    /// Exit status: 0 migrated, 3 error.
    Migrate,
    /// Rebuild the BM25 index from the system of record (PostgreSQL when DATABASE_URL is set).
    ///
    /// Exit status: 0 rebuilt, 3 error.
    Reindex,
    /// Show the data directory, the embedder of the index and the configured one, counts and
    /// the index's age.
    ///
    /// Exit status: 0 shown, 3 error.
    Status(status_cmd::StatusArgs),
    /// Measure retrieval and agent quality: BEIR-format sets, golden questions, multi-hop sets.
    ///
    /// Exit status: 0 measured, 3 error.
    Eval(eval_cmd::EvalArgs),
    /// Serve the HTTP API: /v1/search, /v1/ask, /v1/traces (and audit, replay), /healthz, /readyz.
    ///
    /// Every /v1 request needs `Authorization: Bearer <token>` (see `ragtrail tokens`); the
    /// token alone decides the tenant and roles, and each run's trace records its name.
    ///
    /// Exit status: 0 stopped, 3 error (it could not start).
    Serve(serve_cmd::ServeArgs),
    /// Serve MCP over stdin/stdout: tools `searchDocs` and `ask`, each call traced, and
    /// `memoryList`, `memorySet`, `memoryForget` (the facts remembered for --caller).
    ///
    /// Access is the operator's (--tenant, --role), as for `ask`; no tool argument changes it.
    ///
    /// Exit status: 0 when the client closes the connection, 3 error.
    Mcp(serve_cmd::McpArgs),
    /// What is remembered about you (`--tenant`, `--user`): `memory list`, `memory set KEY
    /// VALUE`, `memory forget KEY`.
    ///
    /// Facts such as your grade or base city decide policy answers; `ask` and `chat` use those
    /// that bear on a question, say which, and record them in the trace (`audit` shows them).
    /// Kept in the data directory, one owner-only file per tenant and user; never read for
    /// another user or tenant. `ask --remember` adds what a question says about you.
    ///
    /// Exit status: each subcommand's --help lists its own; 3 error.
    Memory(memory_cmd::MemoryArgs),
    /// The embedding models in the model cache: `model install [NAME]` fetches one (default
    /// multilingual-e5-small, the embedder used when none is configured), `model list` shows
    /// what is installed.
    ///
    /// Exit status: 0 done, 3 error.
    Model(model_cmd::ModelArgs),
    /// Make, list and revoke the bearer tokens of `ragtrail serve`.
    ///
    /// Exit status: 0 done, 3 error.
    Tokens(serve_cmd::TokensArgs),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    config::load_dotenv();
    let cli = Cli::parse();
    init_logging();
    let result = run(cli);
    telemetry::flush_before_exit();
    match result {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::from(EXIT_CLOSED_PIPE),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

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
        Command::Ingest(args) => ingest_cmd::run(&cli.global, &args),
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
        Command::Memory(args) => memory_cmd::run(&cli.global, &args),
        Command::Model(args) => model_cmd::run(&args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command's `--help`, nested ones included, lists its exit statuses; `ask`'s include
    /// the evidence status and the error of a broken setup.
    #[test]
    fn every_help_lists_exit_statuses() {
        fn walk(cmd: &mut clap::Command, path: String, missing: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            if !help.contains("Exit status") {
                missing.push(path.clone());
            }
            for sub in cmd.get_subcommands_mut() {
                if sub.get_name() == "help" {
                    continue;
                }
                let path = format!("{path} {}", sub.get_name());
                walk(sub, path, missing);
            }
        }
        let mut cli = super::Cli::command();
        cli.build();
        let mut missing = Vec::new();
        walk(&mut cli, "ragtrail".to_string(), &mut missing);
        assert!(
            missing.is_empty(),
            "no exit statuses in the help of {missing:?}"
        );
        let ask = cli
            .find_subcommand_mut("ask")
            .expect("ask")
            .render_long_help()
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for status in [
            "0 answered",
            "1 insufficient evidence",
            "3 error",
            "4 evidence",
        ] {
            assert!(ask.contains(status), "ask --help lacks {status:?}:\n{ask}");
        }
    }
}
