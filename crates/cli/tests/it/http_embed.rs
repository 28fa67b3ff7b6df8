//! The OpenAI-compatible embeddings client against a scripted server over real HTTP on
//! 127.0.0.1 (axum on its own thread and runtime; the client under test is blocking).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use ragtrail::RetryPolicy;
use ragtrail::{
    EmbedConfig, EmbedError, Embedder, HttpEmbedder, HttpEmbedderConfig,
    embedder_from_config as from_config,
};
use ragtrail::{Engine, IngestOptions};

const KEY: &str = "sk-test-4f9a0c2e-do-not-leak";

/// What the server answers to one request.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Value,
    delay: Duration,
}

impl Reply {
    fn ok(body: Value) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body,
            delay: Duration::ZERO,
        }
    }
    fn status(status: u16, body: Value) -> Self {
        Self {
            status,
            ..Self::ok(body)
        }
    }
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
    fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    model: String,
    inputs: Vec<String>,
    at: Instant,
}

type Script = dyn Fn(usize, &[String]) -> Reply + Send + Sync;

struct Shared {
    seen: Mutex<Vec<Seen>>,
    script: Box<Script>,
}

struct Server {
    base_url: String,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `POST /v1/embeddings`, answering request `n` (from 0) with `script(n, inputs)`.
    fn start(script: impl Fn(usize, &[String]) -> Reply + Send + Sync + 'static) -> Self {
        let shared = Arc::new(Shared {
            seen: Mutex::new(Vec::new()),
            script: Box::new(script),
        });
        let app = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .with_state(shared.clone());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("send");
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        let addr = addr_rx.recv().expect("server address");
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
            shutdown: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().expect("lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let inputs: Vec<String> = json["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    let n = {
        let mut seen = shared.seen.lock().expect("lock");
        seen.push(Seen {
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(String::from),
            model: json["model"].as_str().unwrap_or_default().to_string(),
            inputs: inputs.clone(),
            at: Instant::now(),
        });
        seen.len() - 1
    };
    let reply = (shared.script)(n, &inputs);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let status = StatusCode::from_u16(reply.status).expect("status");
    let mut resp = (status, axum::Json(reply.body)).into_response();
    for (name, value) in reply.headers {
        resp.headers_mut()
            .insert(name, value.parse().expect("header value"));
    }
    resp
}

/// An OpenAI-style answer: vector `[chars of the input, 1, 0.5, …]` of `dims` values per input,
/// listed in reverse order with their `index` (clients must reorder by index).
fn vectors(inputs: &[String], dims: usize) -> Value {
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| {
            let mut v = vec![0.5f32; dims];
            v[0] = t.chars().count() as f32;
            v[1] = 1.0;
            json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    json!({"object": "list", "model": "test-model", "data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}})
}

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(80),
        ..RetryPolicy::default()
    }
}

fn config(server: &Server) -> HttpEmbedderConfig {
    let mut c = HttpEmbedderConfig::new(server.base_url.clone(), "test-model");
    c.api_key = Some(KEY.to_string());
    c.policy = fast_policy();
    c
}

fn texts(n: usize) -> Vec<String> {
    (1..=n).map(|i| "x".repeat(i)).collect()
}

#[test]
fn inputs_are_batched_concurrently_and_returned_in_order() {
    let delay = Duration::from_millis(300);
    let server = Server::start(move |_, inputs| Reply::ok(vectors(inputs, 8)).delayed(delay));
    let mut c = config(&server);
    c.batch_size = 4;
    c.concurrency = 2;
    let embedder = HttpEmbedder::new(c).expect("client");
    let owned = texts(10);
    let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
    let out = embedder.embed(&refs).expect("embed");
    // In input order, whatever order batches and items came back in.
    let firsts: Vec<f32> = out.iter().map(|v| v[0]).collect();
    assert_eq!(firsts, (1..=10).map(|i| i as f32).collect::<Vec<_>>());
    let seen = server.seen();
    let mut sizes: Vec<usize> = seen.iter().map(|s| s.inputs.len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![2, 4, 4]);
    // Every input sent exactly once.
    let mut sent: Vec<String> = seen.iter().flat_map(|s| s.inputs.clone()).collect();
    sent.sort_by_key(String::len);
    assert_eq!(sent, owned);
    assert!(seen.iter().all(|s| s.model == "test-model"));
    // Two requests were in flight together: the second arrived before the first was answered.
    let gap = seen[1].at - seen[0].at;
    assert!(gap < delay, "second request {gap:?} after the first");
    assert_eq!(embedder.info().dims, 8);
    assert_eq!(embedder.preferred_batch(), 8);
}

#[test]
fn the_key_is_sent_as_a_bearer_token() {
    let server = Server::start(|_, inputs| Reply::ok(vectors(inputs, 4)));
    let embedder = HttpEmbedder::new(config(&server)).expect("client");
    embedder.embed(&["hello"]).expect("embed");
    let seen = server.seen();
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    // And no header at all without a key.
    let mut c = config(&server);
    c.api_key = None;
    HttpEmbedder::new(c)
        .expect("client")
        .embed(&["hello"])
        .expect("embed");
    assert_eq!(server.seen()[1].authorization, None);
}

#[test]
fn a_429_with_retry_after_is_waited_for_then_retried() {
    let server = Server::start(|n, inputs| match n {
        0 => Reply::status(429, json!({"error": {"message": "rate limited"}}))
            .header("retry-after", "1"),
        _ => Reply::ok(vectors(inputs, 4)),
    });
    let embedder = HttpEmbedder::new(config(&server)).expect("client");
    let started = Instant::now();
    let out = embedder.embed(&["abc"]).expect("embed after a retry");
    assert_eq!(out[0][0], 3.0);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    // Retry-After: 1 beats the 20 ms backoff of this policy.
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_503_with_retry_after_ms_then_success() {
    let server = Server::start(|n, inputs| match n {
        0 | 1 => Reply::status(503, json!({"error": "overloaded"})).header("retry-after-ms", "150"),
        _ => Reply::ok(vectors(inputs, 4)),
    });
    let embedder = HttpEmbedder::new(config(&server)).expect("client");
    embedder.embed(&["abc"]).expect("two retries are allowed");
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= Duration::from_millis(140), "{gap:?}");
    }
}

#[test]
fn retries_are_bounded_and_the_error_explains_without_the_key() {
    let server = Server::start(|_, _| {
        Reply::status(
            500,
            json!({"error": {"message": format!("internal error for key {KEY}")}}),
        )
    });
    let embedder = HttpEmbedder::new(config(&server)).expect("client");
    let err = embedder.embed(&["abc"]).expect_err("always 500");
    assert_eq!(server.seen().len(), 3, "1 attempt + max_retries 2");
    let text = err.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("3 attempts"),
        "{text}"
    );
    assert!(text.contains("[redacted]"), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert!(!format!("{err:?}").contains(KEY));
}

#[test]
fn a_401_names_the_key_setting_and_never_the_key() {
    let server = Server::start(|_, _| {
        Reply::status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
        )
    });
    let err = HttpEmbedder::new(config(&server))
        .expect("client")
        .embed(&["abc"])
        .expect_err("401");
    assert_eq!(server.seen().len(), 1, "401 is not retried");
    let text = err.to_string();
    assert!(text.contains("RAGTRAIL_EMBED_API_KEY"), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert!(!format!("{err:?}").contains(KEY));
}

#[test]
fn a_404_names_the_url_and_model_settings() {
    let server = Server::start(|_, _| {
        Reply::status(
            404,
            json!({"error": {"message": "model 'test-model' not found"}}),
        )
    });
    let err = HttpEmbedder::new(config(&server))
        .expect("client")
        .embed(&["abc"])
        .expect_err("404");
    assert_eq!(server.seen().len(), 1);
    let text = err.to_string();
    assert!(
        text.contains("RAGTRAIL_EMBED_BASE_URL") && text.contains("RAGTRAIL_EMBED_MODEL"),
        "{text}"
    );
    assert!(text.contains("model 'test-model' not found"), "{text}");
}

#[test]
fn a_declared_dimension_that_differs_is_an_error() {
    let server = Server::start(|_, inputs| Reply::ok(vectors(inputs, 4)));
    let mut c = config(&server);
    c.dims = Some(8);
    let embedder = HttpEmbedder::new(c).expect("client");
    assert_eq!(embedder.info().dims, 8);
    let err = embedder.embed(&["abc"]).expect_err("4 dims, 8 declared");
    match &err {
        EmbedError::Dimensions {
            expected, found, ..
        } => assert_eq!((*expected, *found), (8, 4)),
        other => panic!("expected a dimension error, got {other:?}"),
    }
    assert!(
        err.to_string().contains("ragtrail ingest --rebuild"),
        "{err}"
    );
}

#[test]
fn the_first_answer_fixes_the_dimension_for_later_ones() {
    let server = Server::start(|n, inputs| Reply::ok(vectors(inputs, if n == 0 { 8 } else { 6 })));
    let embedder = HttpEmbedder::new(config(&server)).expect("client");
    assert_eq!(embedder.info().dims, 0, "unknown before the first answer");
    embedder.embed(&["abc"]).expect("first");
    assert_eq!(embedder.info().dims, 8);
    let err = embedder.embed(&["abc"]).expect_err("dimension changed");
    assert!(
        matches!(
            err,
            EmbedError::Dimensions {
                expected: 8,
                found: 6,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_wrong_number_of_embeddings_is_an_error() {
    let server = Server::start(|_, inputs| Reply::ok(vectors(&inputs[..1], 4)));
    let err = HttpEmbedder::new(config(&server))
        .expect("client")
        .embed(&["a", "b"])
        .expect_err("one vector for two inputs");
    assert!(
        err.to_string().contains("sent 2 inputs, received 1"),
        "{err}"
    );
}

#[test]
fn oversize_inputs_are_truncated_deliberately_and_counted() {
    let server = Server::start(|_, inputs| Reply::ok(vectors(inputs, 4)));
    let mut c = config(&server);
    c.max_input_chars = 10;
    let embedder = HttpEmbedder::new(c).expect("client");
    let long = "差旅报销制度规定高铁票须提供电子客票报销凭证";
    let out = embedder
        .embed(&["short", long])
        .expect("embed, never rejected");
    assert_eq!(out.len(), 2);
    let seen = server.seen();
    assert_eq!(seen[0].inputs[0], "short");
    assert_eq!(seen[0].inputs[1], long.chars().take(10).collect::<String>());
    assert_eq!(out[1][0], 10.0);
    assert_eq!(embedder.truncated_inputs(), 1);
}

#[test]
fn a_timed_out_request_is_retried() {
    let server = Server::start(|n, inputs| {
        let reply = Reply::ok(vectors(inputs, 4));
        if n == 0 {
            reply.delayed(Duration::from_secs(3))
        } else {
            reply
        }
    });
    let mut c = config(&server);
    c.policy.request_timeout = Duration::from_millis(800);
    let embedder = HttpEmbedder::new(c).expect("client");
    embedder
        .embed(&["abc"])
        .expect("second attempt answers in time");
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn an_unreachable_endpoint_is_retried_then_explained() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut c = HttpEmbedderConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    c.policy = fast_policy();
    let err = HttpEmbedder::new(c)
        .expect("client")
        .embed(&["a"])
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("cannot reach") && text.contains("3 attempts"),
        "{text}"
    );
    assert!(text.contains("RAGTRAIL_EMBED_BASE_URL"), "{text}");
}

#[test]
fn from_config_learns_the_dimension_and_ingest_records_it() {
    let server = Server::start(|_, inputs| Reply::ok(vectors(inputs, 16)));
    let embedder = from_config(&EmbedConfig {
        base_url: Some(server.base_url.clone()),
        api_key: Some(KEY.into()),
        model: Some("test-model".into()),
        ..EmbedConfig::default()
    })
    .expect("http embedder");
    let probes = server.seen().len();
    assert_eq!(probes, 1, "one probe to learn the dimension");
    let info = embedder.info();
    assert_eq!(
        (info.kind.as_str(), info.model.as_str(), info.dims),
        ("http", "test-model", 16)
    );

    let ws = common::Workspace::new();
    ws.write("finance/travel.md", common::TRAVEL);
    let mut engine = Engine::open_with(&ws.data(), embedder).expect("open");
    let summary = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    let sent: usize = server.seen()[probes..].iter().map(|s| s.inputs.len()).sum();
    assert_eq!(sent, summary.chunks, "each chunk embedded once");
    assert_eq!(engine.store().manifest().embedder.as_ref(), Some(&info));
    // Unchanged re-ingest: nothing is sent again.
    let before = server.seen().len();
    engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect("re-ingest");
    assert_eq!(server.seen().len(), before);
}
