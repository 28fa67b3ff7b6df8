//! `ragtrail keys`, `ragtrail verify` and `ragtrail ledger`: the operator's signing key, and
//! checking a trace with nothing but the public key.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::config;
use crate::global::GlobalArgs;
use ragtrail::trace::{
    LedgerHead, PublicKey, SigningKey, add_to_keyring, keyring_path, ledger_head, read_keyring,
    verify_signed,
};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a new Ed25519 signing key: `signing-key` in the data directory (mode 0600), or the
    /// file RAGTRAIL_SIGNING_KEY names. From then on every run is signed. Prints the public key.
    ///
    /// Exit status: 0 made, 3 error.
    Generate,
    /// Print the public key (one line) to hand to whoever verifies traces:
    /// `ragtrail keys public > ragtrail.pub`.
    ///
    /// Exit status: 0 printed, 3 error (no signing key).
    Public,
    /// Add a public key file to the data directory's keyring: runs signed with it verify in
    /// `audit` and `replay` (a retired key made before the keyring existed, say).
    ///
    /// Exit status: 0 trusted, 3 error.
    Trust {
        /// A public key file, as `ragtrail keys public` prints it.
        file: PathBuf,
    },
    /// List the keyring: every key whose runs `audit` and `replay` verify (delete a key's line
    /// from `keyring` in the data directory to stop trusting it).
    ///
    /// Exit status: 0 listed, 3 error.
    List,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Print the ledger's last entry as SEQ:HASH. Keep it somewhere the trace directory's
    /// writers cannot reach; `verify --ledger-head` then tells whether runs were removed since.
    ///
    /// Exit status: 0 printed, 3 error.
    Head {
        /// Print {"seq": …, "hash": …} instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    pub command: LedgerCommand,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The trace file; its `ledger.jsonl` must be beside it.
    pub trace: PathBuf,
    /// The operator's public key file (`ragtrail keys public`); repeat for rotated keys. The
    /// run's ledger entry must be signed by one of them.
    #[arg(long = "public-key", value_name = "FILE")]
    pub public_keys: Vec<PathBuf>,
    /// A ledger head pinned earlier (`ragtrail ledger head`): the ledger must still hold it.
    #[arg(long, value_name = "SEQ:HASH")]
    pub ledger_head: Option<LedgerHead>,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn keys_cmd(global: &GlobalArgs, args: &KeysArgs) -> anyhow::Result<ExitCode> {
    let path = config::signing_key_path(&global.data_dir);
    let keyring = keyring_path(&global.data_dir);
    match &args.command {
        KeysCommand::Generate => {
            // The keys signing until now join the keyring first (if they were not there): a
            // rotation must not lose the public key their runs verify with.
            for old in [path.clone(), global.data_dir.join(config::SIGNING_KEY_FILE)] {
                if let Ok(old) = SigningKey::read(&old) {
                    add_to_keyring(&keyring, &old.public_key(), "retired by keys generate")?;
                }
            }
            let key = SigningKey::generate_into(&path)?;
            let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
            add_to_keyring(&keyring, &key.public_key(), &format!("generated {now}"))?;
            eprintln!(
                "signing key {} written to {} (owner-only). Every run is signed from now on; give verifiers the public key:",
                key.key_id(),
                path.display()
            );
            println!("{}", key.public_key().to_text());
        }
        KeysCommand::Public => {
            let key = config::signing_key(&global.data_dir)?.with_context(|| {
                format!(
                    "no signing key at {}: run `ragtrail keys generate` first",
                    path.display()
                )
            })?;
            println!("{}", key.public_key().to_text());
        }
        KeysCommand::Trust { file } => {
            let key = PublicKey::read(file)?;
            let added =
                add_to_keyring(&keyring, &key, &format!("trusted from {}", file.display()))?;
            eprintln!(
                "key {} {} the keyring {}",
                key.key_id(),
                if added { "added to" } else { "is already in" },
                keyring.display()
            );
        }
        KeysCommand::List => {
            let current = config::signing_key(&global.data_dir)?.map(|k| k.key_id().to_string());
            for key in read_keyring(&keyring)? {
                let mark = if current.as_deref() == Some(key.key_id()) {
                    "  (signing now)"
                } else {
                    ""
                };
                println!("{}  {}{mark}", key.key_id(), key.to_text());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn ledger_cmd(global: &GlobalArgs, args: &LedgerArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        LedgerCommand::Head { json } => {
            let head = ledger_head(&global.trace_dir)?.with_context(|| {
                format!(
                    "the ledger in {} has no entries yet",
                    global.trace_dir.display()
                )
            })?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&head)?);
            } else {
                println!("{head}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_cmd(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let keys = args
        .public_keys
        .iter()
        .map(|p| PublicKey::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let report = verify_signed(
        &args.trace,
        &keys,
        args.ledger_head.as_ref(),
        config::trace_key().as_deref(),
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "verify {}{}",
            args.trace.display(),
            report
                .run_id
                .as_deref()
                .map(|id| format!(" (run {id})"))
                .unwrap_or_default()
        );
        for c in &report.checks {
            println!(
                "  {:<18} {}  {}",
                c.name,
                if c.ok { "ok" } else { "FAILED" },
                c.detail
            );
        }
        if keys.is_empty() {
            println!("  signature          not checked: pass --public-key FILE");
        }
        println!(
            "result: {}",
            if report.ok() {
                "verified"
            } else {
                "verification failed"
            }
        );
    }
    Ok(ExitCode::from(if report.ok() {
        0
    } else {
        crate::output::EXIT_ERROR
    }))
}
