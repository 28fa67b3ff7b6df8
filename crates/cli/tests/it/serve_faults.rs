//! `ragtrail serve` against clients that misbehave, over raw sockets: a body sent too slowly
//! (slowloris) is answered 408, headers sent too slowly close the connection, and connections
//! beyond the bound wait their turn while the server stays up. `/mcp` (whose body the MCP SDK
//! would read itself) has the same body limits as every other route.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::common::chat_server::{ChatServer, Reply, tool_calls};
use crate::common::server::{Serve, add_token, error_code};
use crate::common::{LEAVE_EN, Workspace};

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    ws
}

fn addr(serve: &Serve) -> String {
    serve.base.trim_start_matches("http://").to_string()
}

fn connect(addr: &str, read_timeout: Duration) -> TcpStream {
    let socket = TcpStream::connect(addr).expect("connect");
    socket
        .set_read_timeout(Some(read_timeout))
        .expect("read timeout");
    socket
}

/// Reads one response whose body has a Content-Length (or to the end of the stream).
fn read_response(socket: &mut TcpStream) -> std::io::Result<String> {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf)?;
        if n == 0 {
            break;
        }
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                break;
            }
        }
    }
    Ok(String::from_utf8_lossy(&received).into_owned())
}

fn healthz(addr: &str, keep_alive: bool) -> (TcpStream, String) {
    let mut socket = connect(addr, Duration::from_secs(30));
    let connection = if keep_alive { "keep-alive" } else { "close" };
    write!(
        socket,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: {connection}\r\n\r\n"
    )
    .expect("send");
    let response = read_response(&mut socket).expect("read");
    (socket, response)
}

#[test]
fn a_body_sent_too_slowly_is_answered_408_and_slow_headers_are_cut_off() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start_with(
        root,
        &[
            "--planner",
            "offline",
            "--body-timeout",
            "1",
            "--header-timeout",
            "1",
        ],
        &[],
    );
    let addr = addr(&serve);

    // Slowloris on the body: 200 bytes announced, one byte every 200 ms (40 s in all).
    let head = format!(
        "POST /v1/search HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {alice}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n"
    );
    let response = drip(&addr, &head, format!("{{{}", " ".repeat(199)).as_bytes());
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("\"code\":\"body_timeout\""), "{response}");

    // Slowloris on the headers: half a request line, then nothing; the server hangs up.
    let mut socket = connect(&addr, Duration::from_secs(20));
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .expect("send");
    let mut buf = [0u8; 1024];
    match socket.read(&mut buf) {
        Ok(n) => assert!(
            n == 0 || String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => assert!(
            !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "the server kept a connection that never finished its headers: {e}"
        ),
    }

    // The server is still there for well-behaved clients.
    let (_, response) = healthz(&addr, false);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (status, hits) = serve.post(
        "/v1/search",
        &alice,
        serde_json::json!({"keywords": ["annual", "leave"]}),
    );
    assert_eq!(status, 200, "{hits}");
}

/// Sends `head` (a request's line and headers, up to and with the blank line) and then `body`
/// one byte every 200 ms on another thread; returns the first response.
fn drip(addr: &str, head: &str, body: &[u8]) -> String {
    let mut socket = connect(addr, Duration::from_secs(20));
    socket.write_all(head.as_bytes()).expect("send the head");
    let mut dripper = socket.try_clone().expect("clone");
    let body = body.to_vec();
    let drip = std::thread::spawn(move || {
        for byte in body {
            std::thread::sleep(Duration::from_millis(200));
            if dripper.write_all(&[byte]).is_err() {
                return;
            }
        }
    });
    let response = read_response(&mut socket).expect("an answer before the body is whole");
    drop(socket);
    drip.join().expect("dripper");
    response
}

#[test]
fn mcp_bodies_are_bounded_in_size_and_time_like_every_other_route() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start_with(root, &["--planner", "offline", "--body-timeout", "1"], &[]);
    let addr = addr(&serve);

    // Over 64 KiB: 413 with the API's JSON error, before the MCP SDK sees any of it.
    let big = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"pad": "x".repeat(70_000)}});
    let (status, err) = serve.call(
        reqwest::Method::POST,
        "/mcp",
        Some(&alice),
        Some(big.to_string()),
    );
    assert_eq!((status, error_code(&err)), (413, "body_too_large"), "{err}");

    // A body dripped one byte every 200 ms: 408 after --body-timeout (1 s), not held open.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "slow", "version": "0"}}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {alice}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let response = drip(&addr, &head, body.as_bytes());
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("\"code\":\"body_timeout\""), "{response}");

    // Without a token the body is never read: 401 first, as on the other routes.
    let (status, err) = serve.call(reqwest::Method::POST, "/mcp", None, Some(big.to_string()));
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");
}

#[test]
fn connections_beyond_the_bound_wait_and_hundreds_at_once_leave_the_server_up() {
    let ws = workspace();
    let root = ws.dir.path();
    let serve = Serve::start_with(
        root,
        &[
            "--planner",
            "offline",
            "--max-connections",
            "16",
            "--header-timeout",
            "60",
        ],
        &[],
    );
    let addr = addr(&serve);

    // 16 keep-alive connections hold every place…
    let held: Vec<TcpStream> = (0..16)
        .map(|_| {
            let (socket, response) = healthz(&addr, true);
            assert!(response.starts_with("HTTP/1.1 200"), "{response}");
            socket
        })
        .collect();
    // …so a 17th is not served while they stay open…
    let mut waiting = connect(&addr, Duration::from_millis(1500));
    write!(
        waiting,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = [0u8; 256];
    match waiting.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("the 17th connection was served past the bound of 16: {other:?}"),
    }
    // …and is served as soon as they close.
    drop(held);
    waiting
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let response = read_response(&mut waiting).expect("the 17th answer");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    // 300 clients at once: every one is answered in turn, none refused.
    let clients: Vec<_> = (0..300)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || healthz(&addr, false).1)
        })
        .collect();
    let answered = clients
        .into_iter()
        .map(|c| c.join().expect("client"))
        .filter(|r| r.starts_with("HTTP/1.1 200") && r.contains("\"status\":\"ok\""))
        .count();
    assert_eq!(answered, 300);
    let (_, response) = healthz(&addr, false);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

/// Requests beyond `--workers` wait for a thread instead of each starting one (tokio's default
/// let 200 searches at once start 200 threads, kept with their memory after the load). Six
/// asks at once against a model that takes 0.8 s a reply reach it at most two at a time, and
/// every one is answered.
#[test]
fn requests_beyond_the_workers_wait_their_turn_and_every_one_is_answered() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let reply_time = Duration::from_millis(800);
    let chat = ChatServer::start(move |_| {
        Reply::After(
            reply_time,
            Box::new(tool_calls(&[(
                "g",
                "submitAnswer",
                json!({"answer": "Hello!", "citations": [], "conversational": true}),
            )])),
        )
    });
    let serve = Serve::with_chat(
        root,
        &["--planner", "llm", "--workers", "2"],
        &chat.base_url,
    );
    let serve = std::sync::Arc::new(serve);
    let asks: Vec<_> = (0..6)
        .map(|_| {
            let (serve, alice) = (serve.clone(), alice.clone());
            std::thread::spawn(move || serve.post("/v1/ask", &alice, json!({"question": "hello"})))
        })
        .collect();
    for ask in asks {
        let (status, body) = ask.join().expect("client");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["answer"], "Hello!", "{body}");
    }
    // Each model call holds a worker for 0.8 s, so within any 0.6 s at most one call per
    // worker can start.
    let arrived: Vec<_> = chat.requests().iter().map(|r| r.at).collect();
    assert_eq!(arrived.len(), 6);
    for &start in &arrived {
        let window = arrived
            .iter()
            .filter(|&&t| t >= start && t < start + Duration::from_millis(600))
            .count();
        assert!(window <= 2, "{window} model calls started within 0.6 s");
    }
    let out = crate::common::cli::ragtrail(root, &["serve", "--workers", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("`0` is not a whole number between 1 and 100000"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
