//! Two `ragtrail serve` processes over one PostgreSQL knowledge base, each with its own data
//! directory (its own tantivy index): what another process ingests, both serve, the index of
//! each catching up with the database instead of answering from what it held before.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::pg::TestDb;
use crate::common::server::{Serve, add_token_with, command_with_data};
use crate::common::{TRAVEL, Workspace};

const PARKING: &str = "---\ntitle: Parking\n---\n\n## Visitor parking\n\nVisitors park in the Quokka garage on level two and show the gate code at the barrier.\n";

/// `ragtrail` with its index in `root/DATA`, knowledge and traces in `root`, and the test's
/// database as the system of record.
fn ragtrail(root: &Path, data: &str, db: &TestDb) -> Command {
    let mut cmd = command_with_data(root, data);
    cmd.env("DATABASE_URL", &db.url);
    cmd
}

fn run_ok(mut cmd: Command) -> String {
    let out = cmd.output().expect("run ragtrail");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn token(root: &Path, data: &str, db: &TestDb) -> String {
    add_token_with(ragtrail(root, data, db), "reader", "default", &[])
}

fn search(serve: &Serve, token: &str, word: &str) -> Value {
    let (status, hits) = serve.post("/v1/search", token, json!({"keywords": [word], "topK": 3}));
    assert_eq!(status, 200, "{hits}");
    hits
}

#[test]
fn two_servers_on_one_database_both_serve_what_a_third_process_ingested() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    let root = ws.dir.path();
    let mut ingest = ragtrail(root, "a", &db);
    ingest.arg("ingest");
    run_ok(ingest);
    let (token_a, token_b) = (token(root, "a", &db), token(root, "b", &db));
    // `b` starts with an empty data directory: it builds its index from the database.
    let (a, b) = (
        Serve::spawn(ragtrail(root, "a", &db), &["--planner", "offline"]),
        Serve::spawn(ragtrail(root, "b", &db), &["--planner", "offline"]),
    );
    let before_a = search(&a, &token_a, "住宿");
    assert!(!before_a.as_array().expect("hits").is_empty(), "{before_a}");
    assert_eq!(search(&b, &token_b, "住宿"), before_a);
    assert_eq!(search(&a, &token_a, "quokka"), json!([]));

    // A third process ingests a new document while both servers run.
    ws.write("parking.md", PARKING);
    let mut ingest = ragtrail(root, "c", &db);
    ingest.arg("ingest");
    run_ok(ingest);

    let (found_a, found_b) = (
        search(&a, &token_a, "quokka"),
        search(&b, &token_b, "quokka"),
    );
    assert_eq!(
        found_a[0]["titlePath"], "Parking / Visitor parking",
        "{found_a}"
    );
    assert_eq!(found_a, found_b);
    // Readiness reports the caught-up knowledge base, and an ask through `b` cites the new
    // document.
    let (status, ready) = b.call(reqwest::Method::GET, "/readyz", None, None);
    assert_eq!(status, 200, "{ready}");
    let (status, outcome) = b.post(
        "/v1/ask",
        &token_b,
        json!({"question": "Where do visitors park?"}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert!(
        outcome["citations"]
            .as_array()
            .expect("citations")
            .iter()
            .any(|c| c["titlePath"] == "Parking / Visitor parking"),
        "{outcome}"
    );
}
