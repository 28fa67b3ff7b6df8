//! Replay and audit on real traces written by `ragtrail::run_agent`: tampering of every kind is caught
//! and named, drift in the knowledge base is reported, and old fixtures keep reading.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use ragtrail::AccessContext;
use ragtrail::Engine;
use ragtrail::OfflinePlanner;
use ragtrail::review::audit::audit;
use ragtrail::review::replay::replay;
use ragtrail::trace::{Verdict, check_integrity, event_hash};
use ragtrail::{AgentRagOptions, RunSettings, TraceSettings};
use serde_json::Value;

const QUESTION: &str = "坐高铁出差，报销凭证要怎么弄？";

/// A copy of the bundled knowledge (so tests may edit it), ingested, and one answered run.
fn recorded_run(key: Option<&[u8]>) -> (Workspace, Engine, PathBuf) {
    let ws = Workspace::new();
    copy_dir(&repo_root().join("knowledge"), &ws.knowledge());
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let settings = RunSettings {
        options: AgentRagOptions::default(),
        access: AccessContext::default(),
        today: "2026-11-30".into(),
        trace: Some(TraceSettings {
            dir: ws.dir.path().join("traces"),
            key: key.map(<[u8]>::to_vec),
            signer: None,
            caller: None,
        }),
        session: None,
        conversation: None,
        memory: Vec::new(),
        observer: None,
    };
    let outcome = ragtrail::run_agent(
        &engine,
        &mut OfflinePlanner::new(),
        QUESTION,
        &settings,
        &mut |_| {},
    )
    .expect("run");
    assert!(outcome.answer.is_some(), "{:?}", outcome.message);
    let path = outcome.trace.expect("trace").path;
    (ws, engine, path)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in crate::common::files_under(from) {
        let rel = entry.strip_prefix(from).expect("prefix");
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&entry, dest).expect("copy");
    }
}

fn rehash(line: &str, prev: Option<&str>, key: Option<&[u8]>) -> (String, String) {
    let mut v: Value = serde_json::from_str(line).expect("json");
    if let Some(p) = prev {
        v["prevHash"] = Value::String(p.to_string());
    }
    let h = event_hash(&v, key);
    v["hash"] = Value::String(h.clone());
    (ragtrail::trace::canonical_json(&v), h)
}

fn verdict(path: &Path, key: Option<&[u8]>) -> (Verdict, Option<usize>) {
    let (integrity, _) = check_integrity(path, key).expect("check");
    (integrity.verdict, integrity.first_bad_line)
}

#[test]
fn a_fresh_trace_is_clean_and_replays_exactly() {
    let (_ws, engine, path) = recorded_run(None);
    assert_eq!(verdict(&path, None), (Verdict::Clean, None));
    let (integrity, file) = check_integrity(&path, None).expect("check");
    let file = file.expect("file");
    let report = replay(&engine, &file, &AccessContext::default()).expect("same access");
    assert!(report.reproduced, "{report:?}");
    let audited = audit(&file, integrity, Some(&engine), &AccessContext::default());
    assert_eq!(audited.exit_code(), 0, "{:?}", audited.findings);
    assert!(!audited.citations.is_empty());
    for c in &audited.citations {
        assert_eq!(c.store_state, "unchanged");
        assert_eq!(c.quote_verified, Some(true));
        assert!(!c.surfaced.is_empty(), "{c:?}");
    }
    // The best passage was found by the question's own words; later ones may come from a
    // followed reference (evidence shows up to three).
    assert_eq!(audited.citations[0].surfaced[0].round, 1);
}

#[test]
fn every_kind_of_tampering_is_an_integrity_failure_naming_the_line() {
    let (_ws, _engine, path) = recorded_run(None);
    let original = trace_lines(&path);
    let n = original.len();
    assert!(n >= 5);
    let search_line = original
        .iter()
        .position(|l| l.contains("\"type\":\"search\""))
        .expect("a search line");

    // One byte changed in a hit.
    let mut t = original.clone();
    t[search_line] = t[search_line].replacen("\"snippet\":\"", "\"snippet\":\"X", 1);
    write_trace_lines(&path, &t);
    assert_eq!(
        verdict(&path, None),
        (Verdict::IntegrityFailure, Some(search_line + 1))
    );

    // A line deleted: the next line's prevHash no longer links.
    let mut t = original.clone();
    t.remove(1);
    write_trace_lines(&path, &t);
    assert_eq!(verdict(&path, None), (Verdict::IntegrityFailure, Some(2)));

    // Two lines swapped.
    let mut t = original.clone();
    t.swap(1, 2);
    write_trace_lines(&path, &t);
    assert_eq!(verdict(&path, None).0, Verdict::IntegrityFailure);
    assert_eq!(verdict(&path, None).1, Some(2));

    // A forged line with its own hash recomputed: the following line's link breaks.
    let mut t = original.clone();
    let prev_hash = serde_json::from_str::<Value>(&t[search_line - 1]).expect("json")["hash"]
        .as_str()
        .map(String::from);
    let forged = t[search_line].replacen("\"snippet\":\"", "\"snippet\":\"forged ", 1);
    t[search_line] = rehash(&forged, prev_hash.as_deref(), None).0;
    write_trace_lines(&path, &t);
    assert_eq!(
        verdict(&path, None),
        (Verdict::IntegrityFailure, Some(search_line + 2))
    );

    // The last two lines removed at a newline: only the ledger can tell, and it does.
    write_trace_lines(&path, &original[..n - 2]);
    let (v, line) = verdict(&path, None);
    assert_eq!(
        v,
        Verdict::IntegrityFailure,
        "a cut trace must not pass as a crash"
    );
    assert_eq!(line, Some(n - 1));

    // The whole trace rewritten with a consistent new chain: the ledger's final hash differs.
    let mut t = original.clone();
    t[search_line] = t[search_line].replacen("\"snippet\":\"", "\"snippet\":\"rewritten ", 1);
    let mut prev: Option<String> = None;
    for line in t.iter_mut() {
        let (l, h) = rehash(line, prev.as_deref(), None);
        *line = l;
        prev = Some(h);
    }
    write_trace_lines(&path, &t);
    assert_eq!(verdict(&path, None).0, Verdict::IntegrityFailure);

    // A torn last line alone is a crash, not tampering: incomplete (exit 1).
    let mut bytes = original
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes();
    bytes.truncate(bytes.len() - 20);
    std::fs::write(&path, &bytes).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .args(["audit"])
        .arg(&path)
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .output()
        .expect("audit");
    // The run_finished line is torn, but the ledger recorded the run: cut after the fact.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_run_that_crashed_mid_line_is_incomplete_not_tampered() {
    let (ws, _engine, path) = recorded_run(None);
    // A run that died before finishing has no ledger entry: simulate by a fresh trace dir.
    let crashed_dir = ws.dir.path().join("crashed");
    std::fs::create_dir_all(&crashed_dir).expect("mkdir");
    let crashed = crashed_dir.join(path.file_name().expect("name"));
    let original = trace_lines(&path);
    let mut text: String = original[..original.len() - 1]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    text.push_str(&original[original.len() - 1][..30]);
    std::fs::write(&crashed, text).expect("write");
    let (integrity, _) = check_integrity(&crashed, None).expect("check");
    assert_eq!(
        integrity.verdict,
        Verdict::Findings,
        "{:?}",
        integrity.problems
    );
    assert_eq!(integrity.status, "incomplete");
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .args(["--data-dir"])
        .arg(ws.data())
        .arg("audit")
        .arg(&crashed)
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .output()
        .expect("audit");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("the run did not finish"));
}

#[test]
fn a_trace_key_catches_a_rewrite_made_without_it() {
    let key = b"operator-secret".as_slice();
    let (_ws, _engine, path) = recorded_run(Some(key));
    assert_eq!(verdict(&path, Some(key)).0, Verdict::Clean);
    assert_eq!(
        verdict(&path, None).0,
        Verdict::IntegrityFailure,
        "HMAC lines do not verify as plain SHA-256"
    );
    let mut t = trace_lines(&path);
    let mut prev: Option<String> = None;
    for line in t.iter_mut() {
        let (l, h) = rehash(line, prev.as_deref(), None);
        *line = l;
        prev = Some(h);
    }
    write_trace_lines(&path, &t);
    let (v, line) = verdict(&path, Some(key));
    assert_eq!((v, line), (Verdict::IntegrityFailure, Some(1)));
}

#[test]
fn drift_in_a_cited_paragraph_is_reported_and_reverting_it_reproduces() {
    let (ws, mut engine, path) = recorded_run(None);
    let (_, file) = check_integrity(&path, None).expect("check");
    let file = file.expect("file");
    let cited = audit(
        &file,
        check_integrity(&path, None).expect("check").0,
        Some(&engine),
        &AccessContext::default(),
    )
    .citations[0]
        .clone();
    let doc = ws
        .knowledge()
        .join(cited.source_uri.split('#').next().expect("path"));
    let before = std::fs::read_to_string(&doc).expect("read");
    let chunk_text = engine
        .store()
        .get(&cited.chunk_id)
        .expect("chunk")
        .text
        .clone();
    let edited_text = chunk_text.replacen('。', "（已修订）。", 1);
    std::fs::write(&doc, before.replacen(&chunk_text, &edited_text, 1)).expect("edit");
    ws.ingest(&mut engine);
    let edited = engine
        .store()
        .get(&cited.chunk_id)
        .expect("same id after the edit");
    assert_ne!(Some(edited.content_hash.clone()), cited.recorded_hash);

    let report = replay(&engine, &file, &AccessContext::default()).expect("same access");
    assert!(!report.reproduced);
    assert!(
        report
            .cited_drift
            .iter()
            .any(|d| d.chunk_id == cited.chunk_id && d.state == "changed")
    );
    assert!(
        report.rounds[0]
            .drift
            .iter()
            .any(|d| d.chunk_id == cited.chunk_id)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .arg("--data-dir")
        .arg(ws.data())
        .arg("replay")
        .arg(&path)
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .output()
        .expect("replay");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&cited.chunk_id));

    let audited = audit(
        &file,
        check_integrity(&path, None).expect("check").0,
        Some(&engine),
        &AccessContext::default(),
    );
    let c = audited
        .citations
        .iter()
        .find(|c| c.chunk_id == cited.chunk_id)
        .expect("citation");
    assert_eq!(c.store_state, "changed");
    assert_eq!(audited.exit_code(), 1);

    std::fs::write(&doc, before).expect("revert");
    ws.ingest(&mut engine);
    // The same evidence comes back: every round's hit set, every cited paragraph's hash.
    // (Near-tied hits may swap places: tantivy keeps the replaced documents' token counts in
    // its BM25 statistics until segments merge, so scores move in the last digits.)
    let again = replay(&engine, &file, &AccessContext::default()).expect("same access");
    assert!(again.cited_drift.is_empty(), "{:?}", again.cited_drift);
    for round in &again.rounds {
        assert!(
            round.missing.is_empty() && round.new.is_empty() && round.drift.is_empty(),
            "round {}: {:?}",
            round.round,
            round.verdict
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .arg("--data-dir")
        .arg(ws.data())
        .arg("replay")
        .arg(&path)
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .output()
        .expect("replay");
    // The command agrees with the library: 0 only when every round is identical.
    assert_eq!(
        out.status.code(),
        Some(if again.reproduced { 0 } else { 1 }),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A trace written on 2026-11-30 with its ledger: later versions must keep reading it.
#[test]
fn the_committed_fixture_trace_still_reads_verifies_and_renders_the_same() {
    let dir = tests_dir().join("fixtures/traces");
    let trace = crate::common::files_under(&dir)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n != "ledger.jsonl"))
        .expect("fixture trace");
    let (integrity, file) = check_integrity(&trace, None).expect("check");
    assert_eq!(
        integrity.verdict,
        Verdict::Clean,
        "{:?}",
        integrity.problems
    );
    let report = audit(
        &file.expect("file"),
        integrity,
        None,
        &AccessContext::default(),
    );
    let text = ragtrail::review::audit_text(&report);
    let markdown = ragtrail::review::audit_markdown(&report);
    for (name, actual) in [("audit.txt", text), ("audit.md", markdown)] {
        let expected_path = tests_dir().join("snapshots").join(name);
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(expected_path.parent().expect("dir")).expect("mkdir");
            std::fs::write(&expected_path, &actual).expect("write snapshot");
        }
        let expected = std::fs::read_to_string(&expected_path)
            .expect("snapshot (run with UPDATE_SNAPSHOTS=1 once)");
        assert_eq!(
            actual, expected,
            "{name} changed; if intended, rerun with UPDATE_SNAPSHOTS=1"
        );
    }
}

#[test]
fn an_auditor_sees_only_the_evidence_their_access_covers() {
    let ws = Workspace::new();
    ws.write("hr/internal.md", "---\ntitle: HR 内部指引\nroles: [hr]\n---\n\n## 病假核查\n\n连续病假超过5天须由人事复核病历原件。\n");
    ws.write("finance/travel.md", TRAVEL);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let settings = RunSettings {
        options: AgentRagOptions::default(),
        access: AccessContext::new("default", ["hr"]),
        today: "2026-11-30".into(),
        trace: Some(TraceSettings {
            dir: ws.dir.path().join("traces"),
            key: None,
            signer: None,
            caller: None,
        }),
        session: None,
        conversation: None,
        memory: Vec::new(),
        observer: None,
    };
    let outcome = ragtrail::run_agent(
        &engine,
        &mut OfflinePlanner::new(),
        "病假超过5天要人事复核什么？",
        &settings,
        &mut |_| {},
    )
    .expect("run");
    assert!(outcome.answer.is_some(), "{:?}", outcome.message);
    let path = outcome.trace.expect("trace").path;
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
            .arg("--data-dir")
            .arg(ws.data())
            .args(args)
            .arg("audit")
            .arg(&path)
            .env("RAGTRAIL_EMBEDDER", "hashing")
            .output()
            .expect("audit");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let hr = run(&["--role", "hr"]);
    assert!(hr.contains("病历原件"), "{hr}");
    let staff = run(&[]);
    assert!(
        !staff.contains("病历原件") && !staff.contains("病假核查"),
        "{staff}"
    );
    assert!(staff.contains("withheld"));
    let other = run(&["--tenant", "globex", "--role", "hr"]);
    assert!(
        !other.contains("病假") && other.contains("withheld"),
        "{other}"
    );
}

/// Issue 40, item 10: the Markdown audit is pasted into tickets, so a question, a title or a
/// quote holding HTML or a table pipe must come out as text, not markup or an extra column.
#[test]
fn the_markdown_audit_escapes_html_and_table_pipes() {
    let ws = Workspace::new();
    ws.write(
        "travel.txt",
        "Hotel receipts must show the nightly rate <script>alert(2)</script> | and the city tax.\n",
    );
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let settings = RunSettings {
        options: AgentRagOptions::default(),
        access: AccessContext::default(),
        today: "2026-11-30".into(),
        trace: Some(TraceSettings {
            dir: ws.dir.path().join("traces"),
            key: None,
            signer: None,
            caller: None,
        }),
        session: None,
        conversation: None,
        memory: Vec::new(),
        observer: None,
    };
    let outcome = ragtrail::run_agent(
        &engine,
        &mut OfflinePlanner::new(),
        "hotel receipts nightly rate <img src=x onerror=alert(1)> | city tax",
        &settings,
        &mut |_| {},
    )
    .expect("run");
    let path = outcome.trace.expect("trace").path;
    let (integrity, file) = check_integrity(&path, None).expect("check");
    let report = audit(
        &file.expect("file"),
        integrity,
        Some(&engine),
        &AccessContext::default(),
    );
    let markdown = ragtrail::review::audit_markdown(&report);
    for raw in ["<img", "<script", "</script>"] {
        assert!(!markdown.contains(raw), "{raw} copied raw:\n{markdown}");
    }
    assert!(
        markdown.contains("&lt;img src=x onerror=alert(1)&gt; \\| city tax"),
        "the question, escaped:\n{markdown}"
    );
    assert!(
        markdown.contains("&lt;script&gt;alert(2)&lt;/script&gt; \\| and the city tax"),
        "the chunk's text, escaped:\n{markdown}"
    );
    // Every row of a table has its header's columns: no pipe from the text splits a cell.
    let cells = |line: &str| line.replace("\\|", "").matches('|').count();
    let mut columns = None;
    for line in markdown.lines() {
        if !line.starts_with('|') {
            columns = None;
            continue;
        }
        let n = cells(line);
        assert_eq!(*columns.get_or_insert(n), n, "{line}\n{markdown}");
    }
}
