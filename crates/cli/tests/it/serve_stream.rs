//! `POST /v1/ask` with `Accept: text/event-stream` over a real socket: each round as it
//! happens, then the outcome; a client that hangs up mid-stream leaves a run that still
//! finishes with a complete, clean trace.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::chat_server::{ChatServer, Reply, passages_in, tool_calls};
use crate::common::server::{Serve, add_token, error_code};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

const QUESTION: &str = "How many days of annual leave do I get?";

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    ws
}

/// The `(event, data as JSON)` pairs of an event stream's text.
fn parse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            // Blocks without an event name: the end of the stream, keep-alive comments.
            let name = name?;
            let value = serde_json::from_str(&data)
                .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {block}"));
            Some((name, value))
        })
        .collect()
}

#[test]
fn ask_streams_each_round_then_the_outcome() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start(root);
    let resp = crate::common::http::blocking()
        .post(format!("{}/v1/ask", serve.base))
        .bearer_auth(&alice)
        .header("accept", "text/event-stream")
        .json(&json!({ "question": QUESTION }))
        .send()
        .expect("send");
    assert_eq!(resp.status().as_u16(), 200);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let events = parse_events(&resp.text().expect("body"));
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"round"), "{names:?}");
    assert_eq!(names.last(), Some(&"outcome"), "{names:?}");
    let first = &events[0].1;
    assert_eq!(first["round"], 1);
    assert!(
        first["keywords"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "annual")),
        "{first}"
    );
    assert!(
        first["hits"][0]["titlePath"]
            .as_str()
            .is_some_and(|t| t.contains("Annual leave")),
        "{first}"
    );
    let outcome = &events.last().expect("outcome").1;
    assert_eq!(outcome["status"], "answered", "{outcome}");
    assert!(
        outcome["citations"][0]["quote"]
            .as_str()
            .is_some_and(|q| q.contains("10 days")),
        "{outcome}"
    );
    // The streamed rounds are the outcome's, in order.
    let streamed: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "round")
        .map(|(_, v)| v)
        .collect();
    let recorded: Vec<&Value> = outcome["rounds"]
        .as_array()
        .expect("rounds")
        .iter()
        .collect();
    assert_eq!(streamed, recorded);

    // A bad question is a status, before any stream.
    let resp = crate::common::http::blocking()
        .post(format!("{}/v1/ask", serve.base))
        .bearer_auth(&alice)
        .header("accept", "text/event-stream")
        .json(&json!({ "question": "  " }))
        .send()
        .expect("send");
    assert_eq!(resp.status().as_u16(), 400);
    let err: Value = resp.json().expect("json");
    assert_eq!(error_code(&err), "invalid_question", "{err}");
}

#[test]
fn a_client_that_hangs_up_mid_stream_leaves_a_finished_clean_trace() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    // Each run: the model searches once, then takes 3 s to answer.
    let chat = ChatServer::start(|reqs| match reqs.len() % 2 {
        1 => tool_calls(&[("s1", "searchDocs", json!({"keywords": ["annual leave"]}))]),
        _ => {
            let (_, result) = reqs
                .last()
                .expect("request")
                .tool_results()
                .into_iter()
                .next()
                .expect("the search's result");
            let passage = passages_in(&result).into_iter().next().expect("a passage");
            Reply::After(
                Duration::from_secs(3),
                Box::new(tool_calls(&[(
                    "a1",
                    "submitAnswer",
                    json!({"answer": passage.text, "citations": [passage.number]}),
                )])),
            )
        }
    });
    let serve = Serve::with_chat(
        root,
        // A run outlasts the time a client has to send its headers: that bound is on the
        // client, never on the answer.
        &["--planner", "llm", "--header-timeout", "1"],
        &chat.base_url,
    );

    let (status, plain) = serve.post("/v1/ask", &alice, json!({ "question": QUESTION }));
    assert_eq!(status, 200, "{plain}");
    assert_eq!(plain["status"], "answered", "{plain}");

    // Streamed, the client hangs up between the search and the answer.
    let addr = serve.base.trim_start_matches("http://").to_string();
    let mut socket = TcpStream::connect(&addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let body = json!({ "question": QUESTION }).to_string();
    write!(
        socket,
        "POST /v1/ask HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {alice}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    // Read until the first round's event is whole, then hang up.
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let first_round = loop {
        let n = socket.read(&mut buf).expect("read the stream");
        assert!(n > 0, "the server closed the stream before a round");
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received);
        if let Some(at) = text.find("event: round")
            && let Some(end) = text[at..].find("\n\n")
        {
            break text[at..at + end].to_string();
        }
    };
    let head = String::from_utf8_lossy(&received).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(first_round.contains("Annual leave"), "{first_round}");
    drop(socket);

    // Still running (the model has not answered yet)…
    let (_, list) = serve.get("/v1/traces", &alice);
    assert_eq!(list["runs"][0]["status"], Value::Null, "{list}");
    // …and it finishes without the client.
    let deadline = Instant::now() + Duration::from_secs(60);
    let run = loop {
        let (_, list) = serve.get("/v1/traces", &alice);
        let run = list["runs"][0].clone();
        if !run["status"].is_null() {
            break run;
        }
        assert!(Instant::now() < deadline, "the run never finished: {list}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(run["status"], "answered", "{run}");
    let run_id = run["runId"].as_str().expect("runId");
    let (status, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), &alice);
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["integrity"]["status"], "clean", "{audit}");
    assert_eq!(audit["citations"][0]["quoteVerified"], true, "{audit}");
    assert_eq!(audit["findings"], json!([]), "{audit}");
    let (_, trace) = serve.get(&format!("/v1/traces/{run_id}"), &alice);
    let types: Vec<&str> = trace["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(types.last(), Some(&"run_finished"), "{types:?}");
    assert!(types.contains(&"answer"), "{types:?}");
    assert_eq!(chat.requests().len(), 4);
}
