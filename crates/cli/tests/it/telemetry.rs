//! OpenTelemetry export of runs, received by a real Arize Phoenix (`scripts/phoenix-server.sh`,
//! started by `scripts/test.sh`, which sets `RAGTRAIL_TEST_PHOENIX_URL`): an `ask` from the
//! command line, an HTTP `/v1/ask` and an MCP `searchDocs`, each read back from Phoenix's REST
//! API and checked span by span against the run's own outcome and trace (names, parentage,
//! attributes, the run id as the trace id). Then what must hold without a collector: one that
//! is down or hangs neither fails nor holds up a run, and without the variables (or with the
//! SDK disabled) nothing is sent at all.
//!
//! Each test sends to its own Phoenix project (`x-project-name`, through the standard
//! `OTEL_EXPORTER_OTLP_HEADERS`), so tests running side by side never read each other's spans.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::common::chat_server::{ChatServer, Recorded, tool_calls};
use crate::common::cli::{ragtrail_in_workspace, text};
use crate::common::server::{Serve, add_token, command};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

const QUESTION: &str = "How many days of annual leave do I earn?";

/// Phoenix's base URL (UI, REST API and OTLP/HTTP receiver on one port).
pub(crate) fn phoenix() -> String {
    match std::env::var("RAGTRAIL_TEST_PHOENIX_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_string(),
        _ => panic!(
            "RAGTRAIL_TEST_PHOENIX_URL is not set: run the tests with `bash scripts/test.sh`, which installs \
             arize-phoenix once (scripts/phoenix-server.sh) and starts it; or start one yourself: \
             eval \"$(bash scripts/phoenix-server.sh start /tmp/phoenix)\" and export RAGTRAIL_TEST_PHOENIX_URL"
        ),
    }
}

/// A project name no other test (or earlier test run) uses.
pub(crate) fn fresh_project(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("it-{test}-{}-{nanos}", std::process::id())
}

/// The variables that send a process's runs to Phoenix, into `project`.
pub(crate) fn otel_env(project: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("x-project-name={project}"),
        ),
        ("OTEL_SERVICE_NAME", "ragtrail-it".to_string()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The spans of trace `run_id` (a run id is its trace id) in `project`, once Phoenix holds at
/// least `want` of them (it stores what it receives in the background).
pub(crate) fn spans_of(project: &str, run_id: &str, want: usize) -> Vec<Value> {
    let trace_id = run_id.replace('-', "");
    let client = crate::common::http::blocking();
    let url = format!(
        "{}/v1/projects/{project}/spans?limit=1000&trace_id={trace_id}",
        phoenix()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = match client.get(&url).send() {
            Ok(r) => (r.status().as_u16(), r.text().unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        };
        if status == 200 {
            let page: Value = serde_json::from_str(&body).expect("spans JSON");
            let spans = page["data"].as_array().cloned().unwrap_or_default();
            if spans.len() >= want {
                return spans;
            }
        }
        if Instant::now() > deadline {
            panic!(
                "Phoenix never held {want} spans of trace {trace_id} in {project}: {status} {body}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// The agent span: the trace's one root, named and tagged as the conventions say, with the
/// run's outcome; returns its span id.
fn check_agent(spans: &[Value], run_id: &str, status: &str) -> String {
    let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "one root span: {spans:#?}");
    let agent = roots[0];
    assert_eq!(agent["name"], "invoke_agent ragtrail", "{agent:#}");
    assert_eq!(agent["span_kind"], "AGENT", "{agent:#}");
    assert_eq!(attr(agent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(agent, "gen_ai.agent.name"), "ragtrail");
    assert_eq!(attr(agent, "ragtrail.run.status"), status, "{agent:#}");
    assert_eq!(agent["context"]["trace_id"], run_id.replace('-', ""));
    for span in spans {
        assert_eq!(attr(span, "ragtrail.run.id"), run_id, "{span:#}");
        assert_eq!(span["context"]["trace_id"], run_id.replace('-', ""));
        if span != agent {
            assert_eq!(span["parent_id"], agent["context"]["span_id"], "{span:#}");
        }
    }
    agent["context"]["span_id"]
        .as_str()
        .expect("span id")
        .to_string()
}

/// A retrieval span holds the round's keywords, topK, fusion and its documents (id and
/// score), as the run's outcome reported them.
fn check_retrieval(span: &Value, round: &Value) {
    assert_eq!(span["span_kind"], "RETRIEVER", "{span:#}");
    assert_eq!(attr(span, "gen_ai.operation.name"), "retrieval");
    assert_eq!(attr(span, "ragtrail.search.keywords"), &round["keywords"]);
    assert_eq!(attr(span, "ragtrail.search.round"), &round["round"]);
    assert!(
        attr(span, "ragtrail.search.fusion")
            .as_str()
            .is_some_and(|f| !f.is_empty()),
        "{span:#}"
    );
    let hits = round["hits"].as_array().expect("hits");
    assert!(!hits.is_empty(), "{round:#}");
    let documents: Value = serde_json::from_str(
        attr(span, "gen_ai.retrieval.documents")
            .as_str()
            .expect("documents JSON"),
    )
    .expect("documents");
    let documents = documents.as_array().expect("documents array");
    assert_eq!(documents.len(), hits.len(), "{span:#}");
    for (i, (doc, hit)) in documents.iter().zip(hits).enumerate() {
        assert_eq!(doc["id"], hit["chunkId"]);
        let (a, b) = (doc["score"].as_f64(), hit["score"].as_f64());
        assert!(
            a.zip(b).is_some_and(|(a, b)| (a - b).abs() < 1e-9),
            "{doc} {hit}"
        );
        assert_eq!(
            attr(span, &format!("retrieval.documents.{i}.document.id")),
            &hit["chunkId"]
        );
    }
}

/// No attribute of any span holds `text`.
fn assert_absent(spans: &[Value], text: &str) {
    for span in spans {
        assert!(
            !span["attributes"].to_string().contains(text),
            "{text:?} was exported without content capture: {span:#}"
        );
    }
}

/// A scripted chat model: search the leave policy, then answer citing its first hit.
fn leave_model() -> ChatServer {
    ChatServer::start(|reqs: &[Recorded]| {
        let req = reqs.last().expect("request");
        let shown = req.passages();
        match shown.iter().find(|p| p.text.contains("earn 10 days")) {
            None => tool_calls(&[(
                "call_1",
                "searchDocs",
                json!({"keywords": ["annual leave", "days"]}),
            )]),
            Some(passage) => tool_calls(&[(
                "call_2",
                "submitAnswer",
                json!({"answer": "10 days a year, up to 20.",
                       "citations": [{"passage": passage.number, "quote": "earn 10 days of annual leave"}]}),
            )]),
        }
    })
}

pub(crate) fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    ws.write("travel.md", TRAVEL);
    ws
}

/// `ask --json --planner llm QUESTION` in `ws` against the scripted leave model, exported to
/// `project` with `extra` variables besides: the outcome (answered) and stderr.
pub(crate) fn llm_ask_exported(
    ws: &Workspace,
    project: &str,
    extra: &[(&'static str, String)],
) -> (Value, String) {
    let model = leave_model();
    let mut env = otel_env(project);
    env.push(("RAGTRAIL_LLM_BASE_URL", model.base_url.clone()));
    env.push(("RAGTRAIL_LLM_MODEL", "scripted-model".to_string()));
    env.push(("RAGTRAIL_LLM_API_KEY", "sk-telemetry-secret".to_string()));
    env.extend(extra.iter().cloned());
    let out = ragtrail_in_workspace(
        ws.dir.path(),
        &[
            "ask",
            "--json",
            "--planner",
            "llm",
            "--today",
            "2026-11-30",
            QUESTION,
        ],
        &borrowed(&env),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let outcome: Value = serde_json::from_str(&stdout).expect("--json");
    assert_eq!(outcome["status"], "answered", "{outcome:#}");
    (outcome, stderr)
}

#[test]
fn an_ask_with_the_llm_planner_is_one_agent_span_with_chat_and_retrieval_spans() {
    let ws = workspace();
    let project = fresh_project("cli");
    let (outcome, stderr) = llm_ask_exported(&ws, &project, &[]);
    let run_id = outcome["runId"].as_str().expect("runId");
    let trace_file = Path::new(outcome["trace"].as_str().expect("trace"))
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .into_owned();

    let spans = spans_of(&project, run_id, 4);
    assert_eq!(spans.len(), 4, "agent, chat, retrieval, chat: {spans:#?}");
    check_agent(&spans, run_id, "answered");
    for span in &spans {
        assert_eq!(attr(span, "ragtrail.trace.file"), trace_file.as_str());
    }
    let agent = named(&spans, "invoke_agent ragtrail")[0];
    assert_eq!(attr(agent, "gen_ai.request.model"), "scripted-model");
    assert_eq!(attr(agent, "ragtrail.run.reason"), "answered");
    assert_eq!(attr(agent, "ragtrail.run.rounds"), 1);
    assert_eq!(attr(agent, "ragtrail.planner"), "llm");

    let chats = named(&spans, "chat scripted-model");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat["span_kind"], "LLM");
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), 100);
        assert_eq!(attr(chat, "gen_ai.usage.output_tokens"), 20);
        assert_eq!(
            attr(chat, "gen_ai.response.finish_reasons"),
            &json!(["stop"])
        );
    }
    let searches = named(&spans, "retrieval");
    assert_eq!(searches.len(), 1, "{spans:#?}");
    check_retrieval(searches[0], &outcome["rounds"][0]);
    assert_eq!(
        attr(searches[0], "ragtrail.search.keywords"),
        &json!(["annual leave", "days"])
    );
    // The round ran after the first model call and before the second.
    let time = |s: &Value, f: &str| s[f].as_str().expect("time").to_string();
    let mut calls = chats.clone();
    calls.sort_by_key(|c| time(c, "start_time"));
    assert!(time(calls[0], "end_time") <= time(searches[0], "end_time"));
    assert!(time(searches[0], "end_time") <= time(calls[1], "end_time"));

    // Content capture is off: neither the question, the answer nor a snippet left, and never
    // the API key.
    assert_absent(&spans, QUESTION);
    assert_absent(&spans, "10 days a year");
    assert_absent(&spans, "per year of service");
    assert_absent(&spans, "sk-telemetry-secret");
    assert!(
        !stderr.contains("OpenTelemetry"),
        "no export warning: {stderr}"
    );
}

#[test]
fn an_http_ask_is_exported_with_its_caller_and_with_content_when_asked() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let project = fresh_project("http");
    let mut env = otel_env(&project);
    env.push((
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "true".to_string(),
    ));
    let serve = Serve::start_with(root, &["--planner", "offline"], &borrowed(&env));
    let (status, outcome) = serve.post("/v1/ask", &alice, json!({ "question": QUESTION }));
    assert_eq!(status, 200, "{outcome}");
    let run_id = outcome["runId"].as_str().expect("runId");
    let rounds = outcome["rounds"].as_array().expect("rounds");
    assert!(!rounds.is_empty(), "{outcome:#}");

    let spans = spans_of(&project, run_id, 1 + rounds.len());
    assert_eq!(spans.len(), 1 + rounds.len(), "{spans:#?}");
    check_agent(&spans, run_id, outcome["status"].as_str().expect("status"));
    let agent = named(&spans, "invoke_agent ragtrail")[0];
    assert_eq!(attr(agent, "ragtrail.caller"), "alice");
    assert_eq!(attr(agent, "ragtrail.planner"), "offline");
    // Asked for: the question and the answer on the agent span, snippets on the documents.
    assert_eq!(attr(agent, "input.value"), QUESTION);
    let messages: Value = serde_json::from_str(
        attr(agent, "gen_ai.input.messages")
            .as_str()
            .expect("input messages"),
    )
    .expect("JSON");
    assert_eq!(messages[0]["parts"][0]["content"], QUESTION);
    assert_eq!(attr(agent, "output.value"), &outcome["answer"]);
    assert!(
        named(&spans, "chat").is_empty(),
        "the offline planner calls no model"
    );
    let mut searches = named(&spans, "retrieval");
    searches.sort_by_key(|s| attr(s, "ragtrail.search.round").as_i64());
    for (span, round) in searches.iter().zip(rounds) {
        check_retrieval(span, round);
        assert_eq!(
            attr(span, "retrieval.documents.0.document.content"),
            &round["hits"][0]["snippet"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_search_docs_call_is_one_agent_span_and_one_retrieval_span() {
    let ws = workspace();
    let root = ws.dir.path();
    let project = fresh_project("mcp");
    let mut cmd = command(root);
    cmd.envs(otel_env(&project));
    cmd.args([
        "mcp",
        "--planner",
        "offline",
        "--today",
        "2026-11-30",
        "--caller",
        "agent-7",
    ]);
    let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("spawn mcp");
    let client = ().serve(transport).await.expect("initialize");
    let result = client
        .call_tool(
            CallToolRequestParams::new("searchDocs").with_arguments(
                json!({"keywords": ["annual", "leave"], "topK": 3})
                    .as_object()
                    .cloned()
                    .expect("object"),
            ),
        )
        .await
        .expect("searchDocs");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let found = result.structured_content.expect("structured result");
    let run_id = found["runId"].as_str().expect("runId").to_string();
    client.cancel().await.expect("close the MCP session");

    let spans = tokio::task::spawn_blocking({
        let (project, run_id) = (project.clone(), run_id.clone());
        move || spans_of(&project, &run_id, 2)
    })
    .await
    .expect("spans");
    assert_eq!(spans.len(), 2, "{spans:#?}");
    // A search alone ends as the tool call's runs do: hits, no answer (`search_only`).
    check_agent(&spans, &run_id, "insufficient_evidence");
    let agent = named(&spans, "invoke_agent ragtrail")[0];
    assert_eq!(attr(agent, "ragtrail.run.reason"), "search_only");
    assert_eq!(attr(agent, "ragtrail.planner"), "direct");
    assert_eq!(attr(agent, "ragtrail.caller"), "agent-7");
    let search = named(&spans, "retrieval")[0];
    assert_eq!(attr(search, "gen_ai.retrieval.top_k"), 3);
    let round = json!({"round": 1, "keywords": ["annual", "leave"], "hits": found["hits"]});
    check_retrieval(search, &round);
}

/// `ask --json QUESTION` in `ws` with `env`: the outcome, stderr and how long the process took.
fn timed_ask(ws: &Workspace, env: &[(&str, &str)]) -> (Value, String, Duration) {
    let started = Instant::now();
    let out = ragtrail_in_workspace(
        ws.dir.path(),
        &["ask", "--json", "--today", "2026-11-30", QUESTION],
        env,
    );
    let took = started.elapsed();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let outcome: Value = serde_json::from_str(&stdout).expect("--json");
    (outcome, stderr, took)
}

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn a_collector_that_is_down_or_hangs_neither_fails_nor_holds_up_a_run() {
    let ws = workspace();
    // The first ask ingests; its answer is what every ask below must still give.
    let (expected, _, _) = timed_ask(&ws, &[]);
    assert_eq!(expected["status"], "answered", "{expected:#}");

    // Nothing listens: the run answers as before, and the operator is told once.
    let down = format!("http://127.0.0.1:{}", closed_port());
    let (outcome, stderr, _) = timed_ask(&ws, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &down)]);
    assert_eq!(outcome["answer"], expected["answer"]);
    assert_eq!(outcome["status"], expected["status"]);
    assert_eq!(
        stderr.matches("OpenTelemetry export failed").count(),
        1,
        "one warning: {stderr}"
    );
    assert!(
        stderr.contains(&down),
        "the warning names the endpoint: {stderr}"
    );
    assert!(
        stderr.to_lowercase().contains("connection refused"),
        "the warning says why: {stderr}"
    );

    // A collector that takes the connection and never answers: the request would wait for the
    // export timeout (10 s by default), but the command exits after its bounded flush (3 s),
    // saying what it dropped.
    let hung = TcpListener::bind("127.0.0.1:0").expect("bind");
    let hung_url = format!("http://{}", hung.local_addr().expect("addr"));
    let (outcome, stderr, took) = timed_ask(&ws, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &hung_url)]);
    assert_eq!(outcome["answer"], expected["answer"]);
    assert!(stderr.contains("still unsent"), "{stderr}");
    assert!(
        took < Duration::from_secs(9),
        "the command waited {took:?}: longer than its flush bound"
    );
    // The trace on disk is whole whatever happened to the spans.
    let trace = ws
        .dir
        .path()
        .join(outcome["trace"].as_str().expect("trace"));
    let text = std::fs::read_to_string(trace).expect("trace");
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.contains("run_finished"))
    );
}

/// A listener that counts the connections it is offered and answers each with an empty 200.
fn counting_listener(listener: TcpListener) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    count
}

#[test]
fn without_an_endpoint_or_with_export_disabled_nothing_is_sent() {
    let ws = workspace();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    let sent = counting_listener(listener);
    // Where an SDK sends by default (OTLP/HTTP on localhost:4318), when the port is free here.
    let default_port = TcpListener::bind("127.0.0.1:4318")
        .ok()
        .map(counting_listener);
    let default_sent = || {
        default_port
            .as_ref()
            .map_or(0, |c| c.load(Ordering::SeqCst))
    };

    // Other OTEL_* variables, but no endpoint.
    timed_ask(
        &ws,
        &[
            ("OTEL_SERVICE_NAME", "ragtrail-it"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ],
    );
    // An endpoint, but the SDK disabled, or no traces exporter.
    timed_ask(
        &ws,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    timed_ask(
        &ws,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_TRACES_EXPORTER", "none"),
        ],
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    assert_eq!(default_sent(), 0);

    // The same listener does see a run when the endpoint is on: the zero above is not deafness.
    let (_, stderr, _) = timed_ask(&ws, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    assert_eq!(sent.load(Ordering::SeqCst), 1, "{stderr}");
    assert_eq!(default_sent(), 0);
}
