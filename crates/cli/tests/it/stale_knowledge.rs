//! A knowledge file edited, added or removed after the last ingest is noticed by `search`,
//! `ask` and `status` (named, with the command that brings the index up to date), and
//! `--auto-ingest` / `RAGTRAIL_AUTO_INGEST` re-ingests first.

use crate::common::cli::{ragtrail, ragtrail_with_env, text};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

const PARKING: &str =
    "---\ntitle: Parking\n---\n\n## Permits\n\nParking permits cost 30 euros a month.\n";

/// A workspace ingested once through the binary; returns it with its data and knowledge paths.
fn ingested() -> (Workspace, String, String) {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    ws.write("facilities/parking.md", PARKING);
    let data = ws.data().to_str().expect("utf-8").to_string();
    let knowledge = ws.knowledge().to_str().expect("utf-8").to_string();
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "ingest", &knowledge]);
    assert!(out.status.success(), "{:?}", text(&out));
    (ws, data, knowledge)
}

#[test]
fn edited_added_and_removed_files_are_named_until_the_next_ingest() {
    let (ws, data, knowledge) = ingested();
    let search = ["--data-dir", data.as_str(), "search", "annual", "leave"];
    let out = ragtrail(ws.dir.path(), &search);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("changed since"), "fresh index: {stderr}");

    ws.write(
        "hr/leave.md",
        &LEAVE_EN.replace("10 days of annual leave", "15 days of annual leave"),
    );
    ws.write(
        "hr/remote.md",
        "# Remote work\n\nTwo days a week from home.\n",
    );
    ws.remove("facilities/parking.md");
    let out = ragtrail(ws.dir.path(), &search);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("changed since the last ingest: 1 edited, 1 added, 1 removed"),
        "{stderr}"
    );
    for name in ["hr/leave.md", "hr/remote.md", "facilities/parking.md"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
    assert!(
        stderr.contains(&format!("ragtrail --data-dir {data} ingest {knowledge}")),
        "{stderr}"
    );
    // Answers still come from the indexed text, and say nothing else on stdout.
    assert!(stdout.contains("10 days"), "{stdout}");
    assert!(!stdout.contains("changed since"), "{stdout}");

    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(
        v["knowledgeChanges"]["changed"],
        serde_json::json!(["hr/leave.md"])
    );
    assert_eq!(
        v["knowledgeChanges"]["added"],
        serde_json::json!(["hr/remote.md"])
    );
    assert_eq!(
        v["knowledgeChanges"]["removed"],
        serde_json::json!(["facilities/parking.md"])
    );
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "status"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("1 edited, 1 added, 1 removed"), "{stdout}");

    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "ingest", &knowledge]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = ragtrail(ws.dir.path(), &search);
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains("changed since"), "{stderr}");
    assert!(stdout.contains("15 days"), "{stdout}");
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "status"]);
    assert!(text(&out).0.contains("unchanged since the last ingest"));
}

#[test]
fn auto_ingest_brings_the_index_up_to_date_first() {
    let (ws, data, _) = ingested();
    ws.write(
        "hr/leave.md",
        &LEAVE_EN.replace("10 days of annual leave", "15 days of annual leave"),
    );
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            &data,
            "--auto-ingest",
            "search",
            "annual",
            "leave",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("re-ingesting first"), "{stderr}");
    assert!(stderr.contains("1 changed"), "{stderr}");
    assert!(stdout.contains("15 days"), "{stdout}");

    // The same by environment variable, for `ask`.
    ws.write(
        "hr/leave.md",
        &LEAVE_EN.replace("10 days of annual leave", "25 days of annual leave"),
    );
    let out = ragtrail_with_env(
        ws.dir.path(),
        &[
            "--data-dir",
            &data,
            "ask",
            "How many days of annual leave do I get?",
            "--no-trace",
            "--json",
        ],
        &[("RAGTRAIL_AUTO_INGEST", "1")],
    );
    let (stdout, stderr) = text(&out);
    assert!(stderr.contains("re-ingesting first"), "{stderr}");
    assert!(stdout.contains("25 days"), "{stdout}");
}

#[test]
fn a_file_only_touched_is_reported_once_and_settled_by_ingest() {
    let (ws, data, knowledge) = ingested();
    // Same bytes, a newer modification time.
    let path = ws.knowledge().join("finance/travel.md");
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .expect("set mtime");
    drop(file);
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "search", "高铁票"]);
    assert!(
        text(&out).1.contains("finance/travel.md"),
        "{:?}",
        text(&out)
    );
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "ingest", &knowledge]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("0 changed"), "{stdout}");
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "search", "高铁票"]);
    assert!(!text(&out).1.contains("changed since"), "{:?}", text(&out));
}
