//! `replay --rerun`: the planner itself re-run on today's index, deterministic, writing no
//! trace unless asked, and showing what an edit of the cited document changes.

use std::path::Path;
use std::process::Output;

use crate::common::cli::{ragtrail_in_workspace, text};
use crate::common::*;
use serde_json::Value;

const QUESTION: &str = "坐高铁出差，报销凭证要怎么弄？";
const CITED: &str = "铁路电子客票报销规定 / 凭证要求 / 高铁票报销凭证";
const RULE: &str = "唯一有效的报销凭证是铁路电子客票的电子发票";
const EDITED_RULE: &str = "报销凭证以铁路电子客票的电子发票为准";

fn rt(dir: &Path, args: &[&str]) -> Output {
    ragtrail_in_workspace(dir, args, &[])
}

fn traces_in(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("traces"))
        .expect("traces")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy() != "ledger.jsonl")
        })
        .count()
}

/// Two re-runs, which must print the same bytes; returns (exit code, stdout, JSON report).
fn rerun_twice(dir: &Path, trace: &str) -> (i32, String, Value) {
    let first = rt(dir, &["replay", trace, "--rerun"]);
    let second = rt(dir, &["replay", trace, "--rerun"]);
    let (stdout, stderr) = text(&first);
    assert_eq!(
        first.stdout, second.stdout,
        "two re-runs differ:\n{stdout}\n{stderr}"
    );
    let json = rt(dir, &["replay", trace, "--rerun", "--json"]);
    let value: Value = serde_json::from_slice(&json.stdout).expect("replay --json");
    (
        first.status.code().expect("exit code"),
        stdout,
        value["rerun"].clone(),
    )
}

#[test]
fn rerun_replans_on_todays_index_deterministically_without_a_trace() {
    let ws = Workspace::new();
    let dir = ws.dir.path();
    copy_tree(&repo_root().join("knowledge"), &ws.knowledge());
    assert!(rt(dir, &["ingest"]).status.success());
    let asked = rt(dir, &["ask", "--planner", "offline", "--json", QUESTION]);
    let outcome: Value = serde_json::from_slice(&asked.stdout).expect("ask --json");
    assert_eq!(outcome["citations"][0]["titlePath"], CITED, "{outcome:#}");
    let trace = outcome["trace"].as_str().expect("trace").to_string();
    assert_eq!(traces_in(dir), 1);

    // Nothing changed: the planner plans and answers the same.
    let (code, stdout, rerun) = rerun_twice(dir, &trace);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(rerun["same"], true, "{rerun:#}");
    assert_eq!(rerun["planner"], "offline");
    assert!(
        stdout.contains("re-run: the planner planned and answered the same"),
        "{stdout}"
    );
    assert!(stdout.contains("answer: same, citing ["), "{stdout}");
    assert_eq!(traces_in(dir), 1, "--rerun writes no trace");

    // The cited rule is reworded: the re-run finds and answers from today's text.
    let path = ws.knowledge().join("finance/rail-eticket-rules.md");
    let doc = std::fs::read_to_string(&path).expect("rail rules");
    assert!(
        doc.contains(RULE),
        "the bundled rail rules changed: update this test"
    );
    std::fs::write(&path, doc.replace(RULE, EDITED_RULE)).expect("edit");
    assert!(rt(dir, &["ingest"]).status.success());
    let (code, stdout, rerun) = rerun_twice(dir, &trace);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(rerun["same"], false, "{rerun:#}");
    assert_eq!(rerun["answerSame"], false, "{rerun:#}");
    assert!(
        rerun["recordedAnswer"]
            .as_str()
            .expect("recorded")
            .contains(RULE),
        "{rerun:#}"
    );
    let answer = rerun["rerunAnswer"].as_str().expect("re-run answer");
    assert!(answer.contains(EDITED_RULE), "{answer}");
    assert!(!answer.contains(RULE), "{answer}");
    assert!(stdout.contains("re-run answer (citing ["), "{stdout}");
    assert!(stdout.contains(EDITED_RULE), "{stdout}");
    assert!(
        stdout.contains("re-run: differs from the recorded run"),
        "{stdout}"
    );
    // Per round: keywords and hits of both sides; what differs is named with its titlePath.
    let rounds = rerun["rounds"].as_array().expect("rounds");
    assert!(!rounds.is_empty());
    for r in rounds {
        let gained = r["gained"].as_array().expect("gained");
        let lost = r["lost"].as_array().expect("lost");
        if r["hitsSame"] == true {
            assert!(gained.is_empty() && lost.is_empty(), "{r:#}");
        }
        for h in gained {
            let line = format!(
                "    gained  #{} {}  ({})",
                h["rank"],
                h["titlePath"].as_str().expect("titlePath"),
                h["chunkId"].as_str().expect("chunk id")
            );
            assert!(stdout.contains(&line), "{line}\n{stdout}");
        }
    }
    assert_eq!(traces_in(dir), 1, "--rerun writes no trace");

    // Asked for, the re-run is traced like any run.
    let out = rt(dir, &["replay", &trace, "--rerun", "--rerun-trace"]);
    let (stdout, _) = text(&out);
    assert_eq!(traces_in(dir), 2, "{stdout}");
    assert!(
        stdout.contains("(offline planner, trace traces/"),
        "{stdout}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
