//! `ragtrail eval agent`: a golden set over a small knowledge folder, with the report and the
//! runs' traces kept under --out.

use std::path::Path;
use std::process::Command;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

#[test]
fn eval_agent_reports_the_golden_set_and_links_every_trace() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    write(
        root,
        "knowledge/travel.md",
        "---\ntitle: Travel policy\n---\n\n## Hotel\n\nHotel costs are capped at 180 EUR per night in every city.\n\n## Trains\n\nSecond-class tickets are refunded for trips under four hours.\n",
    );
    write(
        root,
        "golden.jsonl",
        concat!(
            r#"{"id":"en-hotel-001","lang":"en","answerable":true,"turns":[{"question":"What is the hotel cap per night?","expected":["Travel policy / Hotel"],"facts":["180 EUR"]}]}"#,
            "\n",
            r#"{"id":"en-none-001","lang":"en","answerable":false,"turns":[{"question":"How many weeks of sabbatical leave are granted?"}]}"#,
            "\n"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .args([
            "--data-dir",
            "data",
            "--knowledge",
            "knowledge",
            "eval",
            "agent",
            "--golden",
            "golden.jsonl",
            "--out",
            "run",
            "--planner",
            "offline",
            "--today",
            "2026-11-30",
            "--json",
        ])
        .current_dir(root)
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .env_remove("RAGTRAIL_LLM_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .expect("run ragtrail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["answerable"], 1);
    assert_eq!(report["unanswerable"], 1);
    // The only answerable question's section is found by its first search.
    assert_eq!(report["evidenceRecall"], 1.0);
    assert_eq!(report["evidenceRecallByRound"][0], 1.0);
    let items = report["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    let md = std::fs::read_to_string(root.join("run/report.md")).expect("report.md");
    assert!(md.contains("Planner: offline"), "{md}");
    for item in items {
        let trace = item["trace"].as_str().expect("every run keeps its trace");
        let path = root.join(trace);
        assert!(path.is_file(), "{}", path.display());
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(md.contains(&format!("[trace](traces/{name})")), "{md}");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("run/report.json")).expect("report.json"),
    )
    .expect("json");
    assert_eq!(json["items"].as_array().map(Vec::len), Some(2));
}
