//! Many writers, one trace directory: 32 runs at once, half through `ragtrail serve` and half
//! as separate `ragtrail ask` processes, then every trace and the ledger are audited. The
//! ledger's read-then-append runs under a file lock, so no entry is lost, torn or chained to
//! the same predecessor as another.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, command};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};
use ragtrail::trace::{
    LEDGER_FILE_NAME, LedgerPolicy, Verdict, check_integrity_with, read_ledger, verify_ledger,
};

const QUESTIONS: [&str; 4] = [
    "How many days of annual leave do I get?",
    "Is a doctor's note required for sick leave?",
    "高铁票报销需要什么凭证？",
    "住宿发票抬头有什么要求？",
];

#[test]
fn thirty_two_concurrent_asks_from_two_kinds_of_process_leave_a_whole_ledger() {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    let root = ws.dir.path();
    let token = add_token(root, "load", "default", &[]);
    let serve = Serve::start(root);
    let serve = &serve;
    let token = token.as_str();

    let run_ids: Vec<String> = std::thread::scope(|s| {
        let http: Vec<_> = (0..16)
            .map(|i| {
                s.spawn(move || {
                    let (status, out) = serve.post(
                        "/v1/ask",
                        token,
                        json!({"question": QUESTIONS[i % QUESTIONS.len()]}),
                    );
                    assert_eq!(status, 200, "{out}");
                    out["runId"].as_str().expect("runId").to_string()
                })
            })
            .collect();
        let cli: Vec<_> = (0..16)
            .map(|i| {
                s.spawn(move || {
                    let out = command(root)
                        .args([
                            "ask",
                            QUESTIONS[i % QUESTIONS.len()],
                            "--planner",
                            "offline",
                            "--today",
                            "2026-11-30",
                            "--json",
                        ])
                        .output()
                        .expect("run ask");
                    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr))
                    });
                    v["runId"].as_str().expect("runId").to_string()
                })
            })
            .collect();
        http.into_iter()
            .chain(cli)
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(run_ids.iter().collect::<BTreeSet<_>>().len(), 32);

    // The ledger: 32 whole entries, seq 0..31, one chain, one entry per run.
    let traces = root.join("traces");
    let ledger = read_ledger(&traces.join(LEDGER_FILE_NAME)).expect("ledger");
    assert!(ledger.torn_lines.is_empty(), "{:?}", ledger.torn_lines);
    assert_eq!(ledger.entries.len(), 32);
    assert_eq!(verify_ledger(&ledger, None), None);
    let recorded: BTreeSet<String> = ledger
        .entries
        .iter()
        .map(|l| l.entry.run_id.to_string())
        .collect();
    assert_eq!(recorded, run_ids.iter().cloned().collect::<BTreeSet<_>>());

    // Every trace: chain intact and matching its ledger entry.
    for id in &run_ids {
        let path = ragtrail::review::runs::find_run(&traces, id.parse().expect("uuid"))
            .expect("read dir")
            .expect("trace file");
        let (integrity, _) =
            check_integrity_with(&path, None, LedgerPolicy::Required).expect("check");
        assert_eq!(
            integrity.verdict,
            Verdict::Clean,
            "{}: {:?}",
            path.display(),
            integrity.problems
        );
    }
    // And the server's own audit agrees for a run written by another process.
    let (status, audit) = serve.get(&format!("/v1/traces/{}/audit", run_ids[31]), token);
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["integrity"]["status"], "clean", "{audit}");
}
