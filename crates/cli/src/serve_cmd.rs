//! `ragtrail serve`, `ragtrail mcp` and `ragtrail tokens`: thin commands over the server crate.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::ask_cmd::{LlmArgs, PlannerChoice, choose_planner};
use crate::config;
use crate::global::GlobalArgs;
use crate::open::open_current_engine;
use crate::output::Lang;
use ragtrail_server::{App, Grant, Limits, PlannerFactory, ServerConfig, TokenStore};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Keep it on loopback unless a TLS proxy sits in front: tokens travel
    /// in plain text otherwise.
    #[arg(long, env = "RAGTRAIL_LISTEN", default_value_t = SocketAddr::from(([127, 0, 0, 1], ragtrail_server::DEFAULT_PORT)), value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Connections open at once; more clients wait in the listen queue until one closes.
    #[arg(long, default_value_t = Limits::default().max_connections, value_name = "N", value_parser = connections)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers; slower (or idle) connections close.
    #[arg(long, default_value_t = Limits::default().header_timeout.as_secs_f64(), value_name = "SECS", value_parser = positive_secs)]
    pub header_timeout: f64,
    /// Seconds a client has to send a request's whole body; slower ones are answered 408.
    #[arg(long, default_value_t = Limits::default().body_timeout.as_secs_f64(), value_name = "SECS", value_parser = positive_secs)]
    pub body_timeout: f64,
    /// A host name (or NAME:PORT) `/mcp` answers besides localhost, 127.0.0.1 and ::1, as the
    /// client sends it in the Host header; repeat for several. Needed when MCP clients reach the
    /// server by a real name (behind a proxy, or with --listen 0.0.0.0:PORT); every other Host
    /// is refused (403), so a web page that points its own name at this address (DNS
    /// rebinding) cannot call the tools.
    #[arg(long = "allowed-host", value_name = "NAME", value_parser = allowed_host)]
    pub allowed_hosts: Vec<String>,
    /// Requests carried out at once (searches, asks, audits); more wait their turn, each
    /// connection kept. A search keeps a core busy, so more than a few per core only adds
    /// memory. Raise it when asks wait on a remote model, which holds one while it answers.
    /// [default: 4 per core, at least 8]
    #[arg(long, value_name = "N", value_parser = connections)]
    pub workers: Option<usize>,
    #[command(flatten)]
    pub run: ServerRunArgs,
}

/// Requests carried out at once unless `--workers` says otherwise: 4 per core, at least 8.
fn default_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    (4 * cores).max(8)
}

fn allowed_host(s: &str) -> Result<String, String> {
    if ragtrail_server::mcp::valid_allowed_host(s) {
        Ok(s.trim().to_string())
    } else {
        Err(format!(
            "`{s}` is not a host name: give NAME or NAME:PORT (kb.example.com, 10.0.0.5:7341), no scheme or path"
        ))
    }
}

fn connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a whole number between 1 and 100000")),
    }
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds between 0 and 3600"
        )),
    }
}

/// How the server answers `ask` (shared by `serve` and `mcp`).
#[derive(Debug, Args)]
pub struct ServerRunArgs {
    /// Who plans the searches of `ask` [default: llm when a chat endpoint is configured, else
    /// offline].
    #[arg(long, value_enum)]
    pub planner: Option<PlannerChoice>,
    /// Every run's date (YYYY-MM-DD) [default: the local date of each run].
    #[arg(long, value_name = "DATE")]
    pub today: Option<chrono::NaiveDate>,
    #[command(flatten)]
    pub llm: LlmArgs,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The name recorded as the caller in the traces of this server's runs.
    #[arg(long, default_value = "mcp", value_name = "NAME")]
    pub caller: String,
    #[command(flatten)]
    pub run: ServerRunArgs,
}

#[derive(Debug, Args)]
pub struct TokensArgs {
    #[command(subcommand)]
    pub command: TokensCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make a token for NAME granting --tenant and --role; printed once, on the last line.
    ///
    /// Exit status: 0 made, 3 error.
    Add {
        /// Who the token is for (recorded in the traces of its runs).
        name: String,
    },
    /// List the tokens: name, tenant, roles, when made and revoked (never the tokens).
    ///
    /// Exit status: 0 listed, 3 error.
    List,
    /// Revoke NAME's token: refused from the next request on.
    ///
    /// Exit status: 0 revoked, 3 error.
    Revoke { name: String },
}

fn app(
    global: &GlobalArgs,
    run: &ServerRunArgs,
    limits: Limits,
    allowed_hosts: Vec<String>,
) -> anyhow::Result<Arc<App>> {
    let choice = run.planner;
    let llm = run.llm.clone();
    let planner: PlannerFactory =
        Arc::new(move || choose_planner(choice, &llm).map_err(|e| format!("{e:#}")));
    // Check the planner's configuration before serving anybody.
    planner().map_err(anyhow::Error::msg)?;
    let engine = open_current_engine(global, Lang::En)?;
    Ok(Arc::new(App::new(
        engine,
        ServerConfig {
            trace_dir: global.trace_dir.clone(),
            trace_key: config::trace_key(),
            signer: config::signing_key(&global.data_dir)?,
            trusted_keys: config::trusted_keys(&global.data_dir)?,
            tokens: TokenStore::in_data_dir(&global.data_dir),
            planner,
            today: run.today.map(|d| d.format("%Y-%m-%d").to_string()),
            limits,
            memory: ragtrail::MemoryStore::new(&global.data_dir),
            allowed_hosts,
            observer: crate::telemetry::observer(),
        },
    )))
}

/// The async runtime; every request's work runs on its blocking pool, at most `workers`
/// threads. Tokio's default (512) let 200 concurrent searches start 200 threads, each with its
/// buffers and allocator arena, kept after the load was gone.
fn runtime(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(workers)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

pub fn serve(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits {
        max_connections: args.max_connections,
        header_timeout: std::time::Duration::from_secs_f64(args.header_timeout),
        body_timeout: std::time::Duration::from_secs_f64(args.body_timeout),
    };
    let app = app(global, &args.run, limits, args.allowed_hosts.clone())?;
    let tokens = app.config.tokens.list().context("reading the token file")?;
    if tokens.iter().all(|t| t.revoked.is_some()) {
        eprintln!(
            "note: no live tokens in {}: every request will be refused until you run `ragtrail tokens add NAME --tenant T`",
            app.config.tokens.path().display()
        );
    }
    let workers = args.workers.unwrap_or_else(default_workers);
    runtime(workers)?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let addr = listener.local_addr().context("reading the bound address")?;
        // Tests and scripts read the address from this line (with --listen 127.0.0.1:0).
        println!("listening on http://{addr}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        ragtrail_server::serve(listener, app, shutdown_signal())
            .await
            .context("serving")
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn mcp(global: &GlobalArgs, args: &McpArgs) -> anyhow::Result<ExitCode> {
    let app = app(global, &args.run, Limits::default(), Vec::new())?;
    // The operator's access, as for `ask`: an MCP client cannot choose it.
    let grant = Grant {
        name: args.caller.clone(),
        access: config::access_context(global.tenant.as_deref(), &global.roles),
    };
    runtime(default_workers())?
        .block_on(ragtrail_server::mcp::serve_stdio(app, grant))
        .map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

pub fn tokens(global: &GlobalArgs, args: &TokensArgs) -> anyhow::Result<ExitCode> {
    let store = TokenStore::in_data_dir(&global.data_dir);
    match &args.command {
        TokensCommand::Add { name } => {
            let tenant = global
                .tenant
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .context("say which tenant the token may see: `ragtrail tokens add NAME --tenant T [--role R]…`")?;
            let access = config::access_context(Some(tenant), &global.roles);
            let token = store.add(name, &access.tenant, &access.roles)?;
            println!(
                "token {name}: tenant {}, roles [{}], stored as its SHA-256 in {}",
                access.tenant,
                access.roles.join(", "),
                store.path().display()
            );
            println!("It is shown only now; send it as `Authorization: Bearer <token>`:");
            println!("{token}");
        }
        TokensCommand::List => {
            let tokens = store.list()?;
            if tokens.is_empty() {
                println!("No tokens yet: `ragtrail tokens add NAME --tenant T [--role R]…`.");
            }
            for t in tokens {
                let state = match t.revoked {
                    Some(when) => format!("revoked {}", when.format("%Y-%m-%d %H:%M")),
                    None => "live".to_string(),
                };
                println!(
                    "{:<20} tenant {:<12} roles [{}]  made {}  {state}",
                    t.name,
                    t.tenant,
                    t.roles.join(", "),
                    t.created.format("%Y-%m-%d %H:%M")
                );
            }
        }
        TokensCommand::Revoke { name } => {
            store.revoke(name)?;
            println!("token {name} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}
