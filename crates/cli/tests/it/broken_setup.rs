//! A broken setup is an error, never a refusal: an index embedded with another model, an
//! embeddings server that does not answer, a missing model end `ask` with exit 3 and the cause
//! said once (`status: "error"` in `--json`), are traced as errors, and are answered as errors
//! over HTTP (503 `setup_error`) and MCP. Real parts: a hashing index asked with the local
//! model, an index of the shared embeddings server asked on a closed port.

use std::path::Path;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::common::cli::{ragtrail, text};
use crate::common::server::{Serve, add_token, command};
use crate::common::{LEAVE_EN, TRAVEL, Workspace, embed_server, trace_lines};

/// What the embedder mismatch says (and says how to mend).
const MISMATCH: &str = "ragtrail ingest --rebuild";

fn model_dir() -> String {
    std::env::var("RAGTRAIL_TEST_MODEL_DIR").unwrap_or_else(|_| {
        panic!("RAGTRAIL_TEST_MODEL_DIR is not set: run the tests with `bash scripts/test.sh`")
    })
}

/// A workspace with two policies ingested with the hashing embedder (the default).
fn hashing_index() -> Workspace {
    let ws = Workspace::new();
    ws.write("hr/leave.md", LEAVE_EN);
    ws.write("finance/travel.md", TRAVEL);
    let out = ragtrail(ws.dir.path(), &args(&ws, &["ingest", "knowledge"]));
    assert!(out.status.success(), "{:?}", text(&out));
    ws
}

fn args<'a>(ws: &'a Workspace, rest: &[&'a str]) -> Vec<&'a str> {
    let _ = ws;
    let mut all = vec!["--data-dir", "data", "--trace-dir", "traces"];
    all.extend_from_slice(rest);
    all
}

/// The last line of the trace a `--json` outcome names, as JSON.
fn run_finished(root: &Path, outcome: &Value) -> Value {
    let path = root.join(outcome["trace"].as_str().expect("a trace"));
    let last = trace_lines(&path).pop().expect("a line");
    serde_json::from_str(&last).expect("JSON line")
}

#[test]
fn an_index_embedded_with_another_model_is_an_error_said_once() {
    let ws = hashing_index();
    let model = model_dir();
    let root = ws.dir.path();
    for question in ["年假有几天？", "How many days of annual leave do I get?"] {
        let out = ragtrail(
            root,
            &args(&ws, &["--embed-model-dir", &model, "ask", question]),
        );
        let (stdout, stderr) = text(&out);
        let all = format!("{stdout}{stderr}");
        assert_eq!(out.status.code(), Some(3), "{all}");
        assert_eq!(all.matches(MISMATCH).count(), 1, "said once: {all}");
        assert!(all.contains("hashing:char-ngram-fnv1a-v1"), "{all}");
        for refusal in [
            "insufficient",
            "没有足够的依据",
            "Keywords tried",
            "已尝试",
            "rejected",
        ] {
            assert!(!all.contains(refusal), "{refusal}: {all}");
        }
        // The line that says it is in the question's language.
        let said = stderr.lines().find(|l| l.contains(MISMATCH)).expect("said");
        if question.is_ascii() {
            assert!(
                said.starts_with("The run stopped with an error: "),
                "{said}"
            );
        } else {
            assert!(said.starts_with("运行出错而停止："), "{said}");
        }
    }

    let out = ragtrail(
        root,
        &args(
            &ws,
            &["--embed-model-dir", &model, "ask", "年假有几天？", "--json"],
        ),
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(!stderr.contains(MISMATCH), "said once, on stdout: {stderr}");
    let outcome: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .is_some_and(|e| e.contains(MISMATCH)
                && e.contains("hashing:char-ngram-fnv1a-v1")
                && !e.starts_with("search_error")),
        "{outcome}"
    );
    assert!(
        outcome["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("search_error: ")),
        "{outcome}"
    );
    assert_eq!(outcome["rounds"], json!([]), "{outcome}");
    assert_eq!(outcome["citations"], json!([]), "{outcome}");
    // Traced as an error with its cause: the run's last line.
    let finished = run_finished(root, &outcome);
    assert_eq!(finished["type"], "run_finished", "{finished}");
    assert_eq!(finished["status"], "error", "{finished}");
    assert!(
        finished["reason"]
            .as_str()
            .is_some_and(|r| r.contains(MISMATCH)),
        "{finished}"
    );
}

#[test]
fn an_embeddings_server_that_does_not_answer_is_an_error_said_once() {
    let server = embed_server::shared();
    let ws = Workspace::new();
    ws.write("hr/leave.md", LEAVE_EN);
    let root = ws.dir.path();
    let model = [
        "--embedder",
        "http",
        "--embed-model",
        &server.model,
        "--embed-marking",
        &server.marking,
    ];
    let mut ingest = model.to_vec();
    ingest.extend(["--embed-base-url", &server.base_url, "ingest", "knowledge"]);
    let out = ragtrail(root, &args(&ws, &ingest));
    assert!(out.status.success(), "{:?}", text(&out));

    // A port nothing listens on: bound, then let go.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!(
            "http://127.0.0.1:{}/v1",
            listener.local_addr().expect("addr").port()
        )
    };
    // multilingual-e5-small's vectors.
    let dims = "384";
    // With its dimension given, nothing is asked of the server until the run's first search.
    let mut ask = model.to_vec();
    ask.extend([
        "--embed-base-url",
        &closed,
        "--embed-dims",
        dims,
        "ask",
        "How many days of annual leave do I get?",
        "--json",
    ]);
    let out = ragtrail(root, &args(&ws, &ask));
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    let outcome: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(outcome["status"], "error", "{outcome}");
    let error = outcome["error"].as_str().expect("the cause");
    assert!(
        error.contains("cannot reach the embeddings endpoint"),
        "{error}"
    );
    assert!(error.contains(&closed), "{error}");
    assert_eq!(
        stdout.matches("cannot reach").count(),
        3,
        "error, reason, answer: {stdout}"
    );
    assert_eq!(run_finished(root, &outcome)["status"], "error");

    // Without it, the embedder is set up by asking the server: the run never starts, and the
    // JSON still says so.
    let mut ask = model.to_vec();
    ask.extend([
        "--embed-base-url",
        &closed,
        "ask",
        "How many days of annual leave do I get?",
        "--json",
    ]);
    let out = ragtrail(root, &args(&ws, &ask));
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let outcome: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert_eq!(outcome["reason"], "setup_error", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot reach the embeddings endpoint")),
        "{outcome}"
    );
}

#[test]
fn a_missing_model_is_an_error_with_its_cause() {
    let ws = hashing_index();
    let missing = ws.dir.path().join("no-such-model");
    let missing = missing.to_str().expect("utf-8");
    let out = ragtrail(
        ws.dir.path(),
        &args(
            &ws,
            &[
                "--embed-model-dir",
                missing,
                "ask",
                "How many days of annual leave do I get?",
                "--json",
            ],
        ),
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    let outcome: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .is_some_and(|e| e.contains("no-such-model")),
        "{outcome}"
    );
    assert!(!stderr.contains("no-such-model"), "said once: {stderr}");
}

/// `serve` and `mcp` over a hashing index, configured with the local model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_mcp_answer_a_broken_setup_as_an_error() {
    let ws = hashing_index();
    let root = ws.dir.path().to_path_buf();
    let model = model_dir();
    let token = add_token(&root, "tester", "default", &[]);
    let (ask, search) = {
        let root = root.clone();
        let token = token.clone();
        let model = model.clone();
        tokio::task::spawn_blocking(move || {
            let env = [("RAGTRAIL_EMBED_MODEL_DIR", model.as_str())];
            let serve = Serve::start_with(&root, &["--planner", "offline"], &env);
            let ask = serve.post(
                "/v1/ask",
                &token,
                json!({"question": "How many days of annual leave do I get?"}),
            );
            let search = serve.post(
                "/v1/search",
                &token,
                json!({"keywords": ["annual", "leave"]}),
            );
            (ask, search)
        })
        .await
        .expect("join")
    };
    for (what, (status, body)) in [("ask", ask), ("search", search)] {
        assert_eq!(status, 503, "{what}: {body}");
        assert_eq!(body["error"]["code"], "setup_error", "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(MISMATCH)),
            "{what}: {body}"
        );
    }

    let mut cmd = command(&root);
    cmd.env_remove("RAGTRAIL_EMBEDDER");
    cmd.env("RAGTRAIL_EMBED_MODEL_DIR", &model).args([
        "mcp",
        "--planner",
        "offline",
        "--today",
        "2026-11-30",
    ]);
    let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("spawn mcp");
    let client = ().serve(transport).await.expect("initialize");
    for (tool, arguments) in [
        (
            "ask",
            json!({"question": "How many days of annual leave do I get?"}),
        ),
        ("searchDocs", json!({"keywords": ["annual", "leave"]})),
    ] {
        let result = client
            .call_tool(
                CallToolRequestParams::new(tool)
                    .with_arguments(arguments.as_object().cloned().expect("object")),
            )
            .await;
        let said = match result {
            Err(e) => e.to_string(),
            Ok(r) => {
                assert_eq!(r.is_error, Some(true), "{tool}: {r:?}");
                format!("{:?}", r.content)
            }
        };
        assert!(said.contains("setup_error"), "{tool}: {said}");
        assert_eq!(said.matches(MISMATCH).count(), 1, "{tool}: {said}");
    }
    client.cancel().await.expect("close");
}
