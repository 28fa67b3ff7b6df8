//! A fresh PostgreSQL database per test, on the server named by `RAGTRAIL_TEST_DATABASE_URL`.
//!
//! `scripts/test.sh` starts a throwaway server and sets the variable. When it is unset (a plain
//! `cargo test`), the development server of `scripts/pg-test.sh ensure` is started or reused.
//! When no server can be had the test fails, loudly: it never passes by skipping.

use std::sync::OnceLock;

pub use ragtrail::internals::with_database;
use sqlx::{Connection, Executor};

/// The server's URL (any database on it; tests make their own).
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("RAGTRAIL_TEST_DATABASE_URL")
            && !url.trim().is_empty()
        {
            return url.trim().to_string();
        }
        let script = super::repo_root().join("scripts/pg-test.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("ensure")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let url = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("DATABASE_URL="))
            .map(str::to_string);
        match (out.status.success(), url) {
            (true, Some(url)) => url,
            _ => panic!(
                "RAGTRAIL_TEST_DATABASE_URL is unset and `scripts/pg-test.sh ensure` could not start PostgreSQL.\n\
                 Run the suite with `bash scripts/test.sh`, or point RAGTRAIL_TEST_DATABASE_URL at a PostgreSQL 16 server with pgvector 0.8.\n\
                 stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    })
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Runs plain SQL statements (no results) against `url`.
pub fn exec(url: &str, sql: &str) {
    block_on(async {
        let mut conn = sqlx::PgConnection::connect(url)
            .await
            .unwrap_or_else(|e| panic!("connect for {sql:?}: {e}"));
        conn.execute(sqlx::AssertSqlSafe(sql.to_string()))
            .await
            .unwrap_or_else(|e| panic!("{sql:?}: {e}"));
        let _ = conn.close().await;
    })
}

/// A database created empty for one test and dropped afterwards.
pub struct TestDb {
    pub name: String,
    pub url: String,
}

impl TestDb {
    pub fn new() -> Self {
        let server = server_url();
        let name = format!("rt_{}", uuid::Uuid::now_v7().simple());
        exec(server, &format!("create database {name}"));
        Self {
            url: with_database(server, &name),
            name,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let sql = format!("drop database if exists {} with (force)", self.name);
        let server = server_url().to_string();
        // Best effort: the server is thrown away after the run anyway.
        let _ = std::panic::catch_unwind(move || exec(&server, &sql));
    }
}
