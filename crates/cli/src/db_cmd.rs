//! `ragtrail migrate` and `ragtrail reindex`.

use std::process::ExitCode;

use anyhow::Context;

use crate::global::GlobalArgs;
use crate::open::open_engine;
use ragtrail::{MIGRATOR, PgSettings, PgStore, redact_database_url};

/// Applies pending migrations to the database of `DATABASE_URL`.
pub fn migrate(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let Some(url) = global.database_url() else {
        anyhow::bail!(
            "`ragtrail migrate` needs a database: set DATABASE_URL (or pass --database-url) to postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        );
    };
    let (store, applied) = PgStore::connect_and_migrate(url, PgSettings::from_env()?)
        .with_context(|| format!("migrating {}", redact_database_url(url)))?;
    let latest = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    if applied.is_empty() {
        println!("{}: schema up to date (version {latest})", store.url());
    } else {
        let list: Vec<String> = applied.iter().map(i64::to_string).collect();
        println!(
            "{}: applied {} migration(s) ({}); schema at version {latest}",
            store.url(),
            applied.len(),
            list.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Rebuilds the BM25 index from the system of record (Postgres, or the embedded store).
pub fn reindex(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let mut engine = open_engine(global)?;
    engine
        .reindex(&mut |_| {})
        .context("rebuilding the BM25 index")?;
    let source = match engine.postgres() {
        Some(pg) => format!("PostgreSQL at {}", pg.url()),
        None => format!("the embedded store in {}", global.data_dir.display()),
    };
    println!(
        "reindexed {} chunks of {} documents from {source} (version {})",
        engine.store().len(),
        engine.store().documents().len(),
        engine.store().generation()
    );
    Ok(ExitCode::SUCCESS)
}
