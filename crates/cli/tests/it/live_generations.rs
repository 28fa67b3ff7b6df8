//! Readers, ingests and long-running servers on one data directory (#40 items 1, 6 and 7): a
//! running `serve` or `mcp` answers every request from the latest ingest (an access change
//! applies from the next request on), readers never write and never fail for an ingest under
//! way, an interrupted ingest is read around and repaired by the next one, and neither
//! `/readyz` nor a trace tells one tenant another's volume.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::Method;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, command, error_code};
use crate::common::{GLOBEX, LEAVE_EN, TRAVEL, Workspace, search};
use crate::mcp::args;
use ragtrail::AccessContext;
use ragtrail::SearchRequest;
use ragtrail::internals::Bm25Index;
use ragtrail::trace::{read_trace, run_started};
use ragtrail::{Engine, IngestOptions};

/// A payroll page everyone in the default tenant may read, until it is restricted to `hr`.
const PAYROLL: &str = "---\ntitle: Payroll\ntenant: default\n---\n\n## Salary dates\n\nSalaries are paid on the 25th of each month by bank transfer.\n";
const PAYROLL_HR: &str = "---\ntitle: Payroll\ntenant: default\nroles: [hr]\n---\n\n## Salary dates\n\nSalaries are paid on the 25th of each month by bank transfer.\n";
const PARKING: &str = "---\ntitle: Parking\ntenant: default\n---\n\n## Visitor parking\n\nVisitors park in the quokka lot behind building C.\n";

/// `ragtrail ARGS` in the workspace; panics unless it succeeds.
fn ragtrail_ok(root: &Path, args: &[&str]) {
    let out = command(root).args(args).output().expect("run ragtrail");
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sources(hits: &Value) -> Vec<String> {
    hits.as_array()
        .expect("hits")
        .iter()
        .filter_map(|h| h["sourceUri"].as_str())
        .map(|u| u.split('#').next().unwrap_or(u).to_string())
        .collect()
}

#[test]
fn a_running_server_answers_every_request_from_the_latest_ingest() {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    ws.write("payroll.md", PAYROLL);
    let root = ws.dir.path();
    ragtrail_ok(root, &["ingest"]);
    let ann = add_token(root, "ann", "default", &[]);
    let hilda = add_token(root, "hilda", "default", &["hr"]);
    let serve = Serve::start(root);
    let salary = json!({"keywords": ["salaries", "paid"], "topK": 5});
    let (status, hits) = serve.post("/v1/search", &ann, salary.clone());
    assert_eq!(status, 200, "{hits}");
    assert!(sources(&hits).contains(&"payroll.md".to_string()), "{hits}");
    let (_, ready) = serve.get("/readyz", &ann);
    let before = ready["generation"].as_u64().expect("generation");

    // Payroll becomes HR's only, and a new page appears; the server is not restarted.
    ws.write("payroll.md", PAYROLL_HR);
    ws.write("parking.md", PARKING);
    ragtrail_ok(root, &["ingest"]);

    let (status, hits) = serve.post("/v1/search", &ann, salary.clone());
    assert_eq!(status, 200, "{hits}");
    assert!(
        !sources(&hits).contains(&"payroll.md".to_string()),
        "a token without hr still sees the restricted page: {hits}"
    );
    let (_, hits) = serve.post("/v1/search", &hilda, salary);
    assert_eq!(
        sources(&hits).first().map(String::as_str),
        Some("payroll.md")
    );
    let (_, hits) = serve.post("/v1/search", &ann, json!({"keywords": ["quokka"]}));
    assert_eq!(
        hits[0]["titlePath"], "Parking / Visitor parking",
        "the new page is not found: {hits}"
    );
    // An ask cites only what the caller may read now.
    let (status, outcome) = serve.post(
        "/v1/ask",
        &ann,
        json!({"question": "When are salaries paid?"}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert!(
        !outcome.to_string().contains("25th of each month"),
        "{outcome}"
    );
    let (status, ready) = serve.get("/readyz", &ann);
    assert_eq!(status, 200, "{ready}");
    let after = ready["generation"].as_u64().expect("generation");
    assert!(after > before, "readyz still at {before}: {ready}");
    // Leave (2 chunks) and parking (1) for ann; payroll's chunk for hilda besides.
    assert_eq!(ready["chunks"], 3, "{ready}");
    let (_, ready) = serve.get("/readyz", &hilda);
    assert_eq!(ready["chunks"], 4, "{ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_answers_every_call_from_the_latest_ingest() {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    ws.write("payroll.md", PAYROLL);
    let root = ws.dir.path().to_path_buf();
    ragtrail_ok(&root, &["ingest"]);
    let mut cmd = command(&root);
    cmd.args(["mcp", "--planner", "offline", "--today", "2026-11-30"]);
    let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("spawn mcp");
    let client = ().serve(transport).await.expect("initialize");
    let search = |keywords: Value| {
        let client = &client;
        async move {
            let result = client
                .call_tool(
                    CallToolRequestParams::new("searchDocs")
                        .with_arguments(args(json!({"keywords": keywords}))),
                )
                .await
                .expect("searchDocs");
            assert_ne!(result.is_error, Some(true), "{result:?}");
            result.structured_content.expect("structured result")["hits"].clone()
        }
    };
    let hits = search(json!(["salaries", "paid"])).await;
    assert!(sources(&hits).contains(&"payroll.md".to_string()), "{hits}");

    ws.write("payroll.md", PAYROLL_HR);
    ws.write("parking.md", PARKING);
    let ingest_root = root.clone();
    tokio::task::spawn_blocking(move || ragtrail_ok(&ingest_root, &["ingest"]))
        .await
        .expect("ingest");

    let hits = search(json!(["salaries", "paid"])).await;
    assert!(
        !sources(&hits).contains(&"payroll.md".to_string()),
        "the operator's access (no hr) still sees the restricted page: {hits}"
    );
    let hits = search(json!(["quokka"])).await;
    assert_eq!(
        hits[0]["titlePath"], "Parking / Visitor parking",
        "the new page is not found: {hits}"
    );
    client.cancel().await.expect("close");
}

#[test]
fn readyz_and_traces_count_only_the_callers_scope() {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    ws.write("globex.md", GLOBEX);
    let root = ws.dir.path();
    ragtrail_ok(root, &["ingest"]);
    let alice = add_token(root, "alice", "default", &[]);
    let gina = add_token(root, "gina", "globex", &[]);
    let serve = Serve::start(root);

    // No token: ready, at a generation, and no count of anybody's chunks.
    let (status, ready) = serve.call(Method::GET, "/readyz", None, None);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready");
    assert!(ready["generation"].as_u64().is_some(), "{ready}");
    assert!(ready.get("chunks").is_none(), "{ready}");
    let (status, err) = serve.call(Method::GET, "/readyz", Some("rtk_0000"), None);
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");
    let (_, ready) = serve.get("/readyz", &gina);
    assert_eq!(ready["chunks"], 1, "globex has one chunk: {ready}");

    let ask = || {
        let (status, outcome) = serve.post(
            "/v1/ask",
            &alice,
            json!({"question": "How many days of annual leave do I get?"}),
        );
        assert_eq!(status, 200, "{outcome}");
        let file =
            read_trace(&root.join(outcome["trace"].as_str().expect("trace"))).expect("trace");
        run_started(&file)
            .expect("run_started")
            .index_fingerprint
            .clone()
    };
    let first = ask();
    let (_, ready) = serve.get("/readyz", &alice);
    let alices = ready["chunks"].as_u64().expect("chunks");
    let generation = ready["generation"].as_u64().expect("generation");
    assert_eq!(first, format!("gen-{generation}:{alices}"));
    // Globex ingests a lot more; alice's fingerprint counts her chunks only.
    let many: String = (0..20)
        .map(|i| format!("## Rule {i}\n\nGlobex rule number {i} applies.\n\n"))
        .collect();
    ws.write(
        "globex-rules.md",
        &format!("---\ntenant: globex\n---\n\n{many}"),
    );
    ragtrail_ok(root, &["ingest"]);
    let second = ask();
    assert_eq!(second, format!("gen-{}:{alices}", generation + 1));
}

/// Simulates an ingest stopped after its index commit and before its `CURRENT` switch: the
/// index on disk at the next generation (travel's chunks gone, leave's added), the store not.
fn interrupt_an_ingest(ws: &Workspace, engine: &Engine) -> u64 {
    let scan = ragtrail::internals::scan(&ws.knowledge(), &Default::default()).expect("scan");
    let index = Bm25Index::open_or_create(&ws.data().join("index")).expect("index");
    let mut update = index.update().expect("update");
    update.delete_source("finance/travel.md");
    for chunk in scan.chunks.iter().filter(|c| c.source == "hr/leave.md") {
        update.add_chunk(chunk, false).expect("add");
    }
    let next = engine.store().generation() + 1;
    update.commit(next).expect("commit");
    next
}

fn payload_on_disk(ws: &Workspace) -> Option<String> {
    Bm25Index::open_or_create(&ws.data().join("index"))
        .expect("open")
        .committed_payload()
        .expect("payload")
}

#[test]
fn an_interrupted_ingest_is_read_around_by_readers_and_repaired_by_the_next_ingest() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let current = engine.store().generation();
    ws.write("hr/leave.md", LEAVE_EN);
    let interrupted = interrupt_an_ingest(&ws, &engine);
    drop(engine);
    ws.remove("hr/leave.md");

    // A reader answers from the store's generation and leaves the index on disk alone.
    let reader = Engine::open(&ws.data()).expect("reader");
    assert_eq!(reader.store().generation(), current);
    assert!(search(&reader, &["annual", "leave"], 5).is_empty());
    assert!(!search(&reader, &["高铁票"], 5).is_empty());
    assert_eq!(
        payload_on_disk(&ws),
        Some(interrupted.to_string()),
        "a reader wrote the index"
    );
    // The reader holds no lock an ingest needs; the ingest (nothing changed in the folder)
    // repairs the index under its own lock.
    let mut writer = ws.engine();
    let summary = ws.ingest(&mut writer);
    assert_eq!(summary.generation, current);
    assert_eq!(payload_on_disk(&ws), Some(current.to_string()));
    let fresh = Engine::open(&ws.data()).expect("reopen");
    assert_eq!(
        fresh.index().committed_generation().expect("generation"),
        Some(current)
    );
    assert!(!search(&fresh, &["高铁票"], 5).is_empty());
    assert!(search(&fresh, &["annual", "leave"], 5).is_empty());
    // The reader opened before the repair still answers, from what it read.
    assert!(!search(&reader, &["高铁票"], 5).is_empty());
}

#[test]
fn searches_during_repeated_rebuilds_never_fail_and_never_fail_an_ingest() {
    let ws = Workspace::new();
    // Enough chunks that an ingest takes a while: 40 files of 10 sections.
    for f in 0..40 {
        let sections: String = (0..10)
            .map(|s| format!("## Topic {s}\n\nHotel receipts rule {f}-{s} for travel claims.\n\n"))
            .collect();
        ws.write(&format!("doc{f}.md"), &format!("# Doc {f}\n\n{sections}"));
    }
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let done = AtomicBool::new(false);
    let rebuild = IngestOptions {
        rebuild: true,
        ..IngestOptions::default()
    };
    // Failures are collected, not panicked on, so the readers always stop.
    let (ingests, searches, failures) = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut searched, mut failed) = (0, Vec::new());
                    while !done.load(Ordering::Relaxed) {
                        let hits = Engine::open(&ws.data()).and_then(|reader| {
                            reader.search_docs(&SearchRequest::new(
                                vec!["hotel".into(), "receipts".into()],
                                5,
                                AccessContext::default(),
                            ))
                        });
                        match hits {
                            Ok(hits) if hits.hits.len() == 5 => searched += 1,
                            // The first few say enough.
                            Ok(_) | Err(_) if failed.len() >= 5 => {}
                            Ok(hits) => failed.push(format!("{} hits", hits.hits.len())),
                            Err(e) => failed.push(format!("search during a rebuild: {e}")),
                        }
                    }
                    (searched, failed)
                })
            })
            .collect();
        let mut ingests = 0;
        let mut failures = Vec::new();
        for _ in 0..12 {
            let ingested = Engine::open(&ws.data())
                .and_then(|mut writer| writer.ingest(&ws.knowledge(), &rebuild, &mut |_| {}));
            match ingested {
                Ok(_) => ingests += 1,
                Err(e) => failures.push(format!("ingest beside readers: {e}")),
            }
        }
        done.store(true, Ordering::Relaxed);
        let mut searches = 0;
        for reader in readers {
            let (searched, failed) = reader.join().expect("reader");
            searches += searched;
            failures.extend(failed);
        }
        (ingests, searches, failures)
    });
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(ingests, 12);
    assert!(searches > 0);
    // Generations the readers may still have open are kept; older ones are gone.
    let mut kept: Vec<String> = std::fs::read_dir(ws.data().join("store"))
        .expect("store")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("gen-"))
        .collect();
    kept.sort();
    assert_eq!(kept, ["gen-11", "gen-12", "gen-13"]);
}
