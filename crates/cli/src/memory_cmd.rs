//! `ragtrail memory list|set|forget`: the facts remembered for the asker (`--tenant` and
//! `--user`), as the engine's `MemoryStore` keeps them.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::global::GlobalArgs;
use crate::output;
use ragtrail::{Fact, FactSource, MemoryStore};

#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub command: MemoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List the facts remembered for you: key, value, where it came from and when.
    ///
    /// Exit status: 0 listed (none included), 3 error (a corrupt memory file included).
    List {
        /// Print a JSON array of facts ({key, value, source, setAt}) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remember a fact about you, replacing the key's earlier value: `memory set grade B`,
    /// `memory set "base city" 成都`.
    ///
    /// The offline planner uses a fact when the documents tie its value to the answer (a
    /// table row of your grade, the category a city is listed under) and says so; a question
    /// that states the fact itself wins for that run.
    ///
    /// Exit status: 0 remembered, 3 error (an empty or over-long key or value included).
    Set {
        /// The fact's name (`grade`, `base city`, `start date`…), any case.
        key: String,
        /// Its value, as the documents write it where possible (`B`, `成都`, `2023-07-01`).
        value: String,
        /// Print the fact as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget a fact: it is removed from the memory file (traces keep what a past run used).
    ///
    /// Exit status: 0 forgotten, 1 no such fact, 3 error.
    Forget {
        /// The fact's name, any case.
        key: String,
        /// Print the fact forgotten as JSON (`null` when there was none).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(global: &GlobalArgs, args: &MemoryArgs) -> anyhow::Result<ExitCode> {
    let store = MemoryStore::new(&global.data_dir);
    let asker = global.asker()?;
    match &args.command {
        MemoryCommand::List { json } => {
            let facts = store.list(&asker)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&facts)?);
            } else if facts.is_empty() {
                println!(
                    "nothing remembered for user {} in tenant {}",
                    output::terminal_safe(&asker.user),
                    output::terminal_safe(&asker.tenant)
                );
            } else {
                println!(
                    "remembered for user {} in tenant {}:",
                    output::terminal_safe(&asker.user),
                    output::terminal_safe(&asker.tenant)
                );
                for fact in &facts {
                    println!("  {}", fact_line(fact));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Set { key, value, json } => {
            let (fact, previous) = store.set(&asker, key, value, FactSource::Asker)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&fact)?);
            } else {
                println!("remembered: {}", fact_line(&fact));
                if let Some(p) = previous {
                    println!("  (was {})", output::terminal_safe(&p.value));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Forget { key, json } => {
            let gone = store.forget(&asker, key)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&gone)?);
            } else {
                match &gone {
                    Some(f) => println!("forgotten: {}", fact_line(f)),
                    None => println!(
                        "nothing remembered as {}",
                        output::terminal_safe(key.trim())
                    ),
                }
            }
            Ok(ExitCode::from(if gone.is_some() { 0 } else { 1 }))
        }
    }
}

/// `grade = B  (set by the asker, 2026-12-05T16:20:00Z)`.
fn fact_line(f: &Fact) -> String {
    output::terminal_safe(&format!(
        "{} = {}  ({}, {})",
        f.key,
        f.value,
        f.source.describe(),
        f.set_at
    ))
}
