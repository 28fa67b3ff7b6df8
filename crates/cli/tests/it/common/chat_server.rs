//! A scripted OpenAI-compatible chat server over real HTTP on 127.0.0.1, for the LLM planner
//! tests. It runs axum on its own thread with its own runtime, records every request (path,
//! headers, JSON body, arrival time) and lets a script decide each reply from everything it has
//! received so far, so a test fails when the client sends the wrong thing. [`ScriptedLlm`] pairs
//! it with the config an LLM planner uses to reach it and runs the agent through that planner.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use ragtrail::AgentOutcome;
use ragtrail::ChatConfig;
use ragtrail::Engine;
use ragtrail::LlmPlanner;
use serde_json::{Value, json};

use super::Workspace;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// Header names in lowercase.
    pub headers: HashMap<String, String>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
    pub at: Instant,
}

impl Recorded {
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The tool messages at the end of the conversation (after the last assistant message),
    /// as (tool_call_id, content).
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.since_last_reply()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                    m["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The messages after the last assistant message.
    fn since_last_reply(&self) -> &[Value] {
        let msgs = self.messages();
        let start = msgs
            .iter()
            .rposition(|m| m["role"] == "assistant")
            .map_or(msgs.len(), |i| i + 1);
        &msgs[start..]
    }

    /// User messages after the last assistant message.
    pub fn new_user_messages(&self) -> Vec<String> {
        self.since_last_reply()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every numbered passage of the tool and user messages after the last assistant message.
    pub fn passages(&self) -> Vec<Shown> {
        self.since_last_reply()
            .iter()
            .filter(|m| m["role"] == "tool" || m["role"] == "user")
            .flat_map(|m| passages_in(m["content"].as_str().unwrap_or_default()))
            .collect()
    }
}

/// A numbered passage as a message showed it: `[n] titlePath`, then its sentences.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub number: usize,
    pub title: String,
    pub text: String,
}

/// The numbered passages of a message, in order.
pub fn passages_in(message: &str) -> Vec<Shown> {
    message
        .split("\n\n")
        .filter_map(|block| {
            let (number, rest) = block.strip_prefix('[')?.split_once("] ")?;
            let number = number.parse().ok()?;
            let (title, text) = rest.split_once('\n')?;
            Some(Shown {
                number,
                title: title.to_string(),
                text: text.to_string(),
            })
        })
        .collect()
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// Any status, extra headers and a raw body.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// 200 with this body sent in 64 KiB chunks and no `Content-Length`, so a client only
    /// learns its size by reading it.
    Chunked(Vec<u8>),
    /// Wait this long, then answer with the inner reply (a hung server when the wait is long).
    After(Duration, Box<Reply>),
}

type Script = Box<dyn FnMut(&[Recorded]) -> Reply + Send>;

struct Shared {
    requests: Mutex<Vec<Recorded>>,
    script: Mutex<Script>,
}

/// A running scripted server; stopped when dropped.
pub struct ChatServer {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ChatServer {
    /// Starts a server whose replies come from `script`, called with every request received so
    /// far (the current one last).
    pub fn start(script: impl FnMut(&[Recorded]) -> Reply + Send + 'static) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            script: Mutex::new(Box::new(script)),
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = Router::new().fallback(handle).with_state(state);
                tokio::select! {
                    r = axum::serve(listener, app) => r.expect("serve"),
                    _ = rx => {}
                }
            });
            // Dropping the runtime cancels connections still waiting in a hung reply.
            runtime.shutdown_background();
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().expect("requests").clone()
    }
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A scripted [`ChatServer`] and the [`ChatConfig`] an LLM planner uses to reach it: start it
/// with a script, ask questions through it, then read what the server received (it derefs to
/// its server, for `requests()` and `base_url`).
pub struct ScriptedLlm {
    pub server: ChatServer,
    /// Built from the server's base URL at start; a test may change it before asking.
    pub config: ChatConfig,
}

impl ScriptedLlm {
    /// Starts a server whose replies come from `script` (see [`ChatServer::start`]); `config`
    /// builds the planner's config from the server's base URL, `http://127.0.0.1:PORT/v1`.
    pub fn start(
        config: impl FnOnce(&str) -> ChatConfig,
        script: impl FnMut(&[Recorded]) -> Reply + Send + 'static,
    ) -> Self {
        let server = ChatServer::start(script);
        let config = config(&server.base_url);
        Self { server, config }
    }

    /// A new LLM planner on [`config`](Self::config).
    pub fn planner(&self) -> LlmPlanner {
        LlmPlanner::new(&self.config).expect("planner")
    }

    /// Runs the agent on `question` over `engine` with a new planner, as [`Workspace::ask`] does
    /// (the date 2026-11-30, traces under the workspace's `traces/`).
    pub fn ask(&self, ws: &Workspace, engine: &Engine, question: &str) -> AgentOutcome {
        ws.ask(engine, &mut self.planner(), question)
    }
}

impl Deref for ScriptedLlm {
    type Target = ChatServer;
    fn deref(&self) -> &ChatServer {
        &self.server
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).to_string(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
    };
    let reply = {
        let mut requests = shared.requests.lock().expect("requests");
        requests.push(recorded);
        let mut script = shared.script.lock().expect("script");
        (script)(&requests)
    };
    respond(reply).await
}

async fn respond(mut reply: Reply) -> Response {
    loop {
        match reply {
            Reply::After(wait, inner) => {
                tokio::time::sleep(wait).await;
                reply = *inner;
            }
            Reply::Json(v) => return (StatusCode::OK, axum::Json(v)).into_response(),
            Reply::Chunked(bytes) => {
                let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
                    .chunks(64 * 1024)
                    .map(|c| Ok(Bytes::copy_from_slice(c)))
                    .collect();
                let body = axum::body::Body::from_stream(futures_util::stream::iter(chunks));
                return (StatusCode::OK, [("content-type", "application/json")], body)
                    .into_response();
            }
            Reply::Status {
                status,
                headers,
                body,
            } => {
                let mut resp = (
                    StatusCode::from_u16(status).expect("status"),
                    [("content-type", "application/json")],
                    body,
                )
                    .into_response();
                for (k, v) in headers {
                    resp.headers_mut()
                        .insert(k, v.parse().expect("header value"));
                }
                return resp;
            }
        }
    }
}

/// A chat completion whose message makes these tool calls: (id, tool, arguments).
pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({
                "id": id,
                "type": "function",
                "function": {
                    "name": name,
                    // Arguments are JSON *text*; a string stands for raw (possibly broken) text.
                    "arguments": match args {
                        Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    },
                }
            })
        })
        .collect();
    completion(json!({"role": "assistant", "content": null, "tool_calls": calls}))
}

/// A chat completion with this message, and a fixed usage.
pub fn completion(message: Value) -> Reply {
    Reply::Json(json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "scripted-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }))
}

/// An error status with an OpenAI-style body.
pub fn error(status: u16, message: &str, headers: Vec<(&'static str, String)>) -> Reply {
    Reply::Status {
        status,
        headers,
        body: json!({"error": {"message": message, "type": "scripted"}}).to_string(),
    }
}

/// Checks that every assistant message's tool calls are answered by exactly one tool message
/// each, in the order of the calls, right after it, and that no tool message is unpaired.
pub fn assert_tool_pairing(request: &Recorded) {
    let msgs = request.messages();
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        assert_ne!(
            m["role"], "tool",
            "tool message without a preceding call at {i}: {msgs:#?}"
        );
        i += 1;
        if m["role"] == "assistant"
            && let Some(calls) = m["tool_calls"].as_array()
        {
            for call in calls {
                let tool = msgs.get(i).unwrap_or(&Value::Null);
                assert_eq!(tool["role"], "tool", "call {call} unanswered: {msgs:#?}");
                assert_eq!(
                    tool["tool_call_id"], call["id"],
                    "tool messages out of order: {msgs:#?}"
                );
                assert!(tool["content"].is_string(), "{tool}");
                i += 1;
            }
        }
    }
}
