//! MCP's Streamable HTTP transport at `/mcp` on `ragtrail serve`, driven by the SDK's own
//! client over a real socket: no token is 401, each request's token alone decides the tenant
//! (never a tool argument), every call is traced under the token's name, and a revoked token
//! is refused.

use reqwest::Method;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, command, error_code};
use crate::common::{GLOBEX, LEAVE_EN, TRAVEL, Workspace};
use crate::mcp::{args, assert_tenant_argument_refused};

fn transport(base: &str, token: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    let client = crate::common::http::async_builder()
        .build()
        .expect("client");
    StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
    )
}

/// What one token's MCP session finds: (searchDocs sourceUris, ask's outcome, run ids).
async fn session(base: &str, token: &str) -> (Vec<String>, Value, Vec<String>) {
    let client = ().serve(transport(base, token)).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ask",
            "memoryForget",
            "memoryList",
            "memorySet",
            "searchDocs"
        ]
    );

    let found = client
        .call_tool(
            CallToolRequestParams::new("searchDocs")
                .with_arguments(args(json!({"keywords": ["meal", "allowance"]}))),
        )
        .await
        .expect("searchDocs");
    assert_ne!(found.is_error, Some(true), "{found:?}");
    let found = found.structured_content.expect("structured result");
    let uris: Vec<String> = found["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .filter_map(|h| h["sourceUri"].as_str().map(String::from))
        .collect();

    // A tenant in the arguments is refused, never obeyed.
    assert_tenant_argument_refused(&client).await;

    let asked = client
        .call_tool(CallToolRequestParams::new("ask").with_arguments(args(
            json!({"question": "What is the meal allowance per travel day?"}),
        )))
        .await
        .expect("ask");
    assert_ne!(asked.is_error, Some(true), "{asked:?}");
    let asked = asked.structured_content.expect("structured result");
    let runs = vec![
        found["runId"].as_str().expect("runId").to_string(),
        asked["runId"].as_str().expect("runId").to_string(),
    ];
    client.cancel().await.expect("close the session");
    (uris, asked, runs)
}

#[test]
fn mcp_over_http_takes_access_from_each_requests_token() {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    ws.write("globex.md", GLOBEX);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let gina = add_token(root, "gina", "globex", &[]);
    let serve = Serve::start(root);

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, err) = serve.call(Method::POST, "/mcp", None, Some(initialize.to_string()));
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let base = serve.base.clone();
    let (gina_uris, gina_ask, gina_runs) = runtime.block_on(session(&base, &gina));
    let (alice_uris, alice_ask, alice_runs) = runtime.block_on(session(&base, &alice));

    assert_eq!(
        gina_uris.first().map(String::as_str),
        Some("globex.md#meal-allowance")
    );
    assert!(
        alice_uris.iter().all(|u| !u.starts_with("globex.md")),
        "{alice_uris:?}"
    );
    assert_eq!(gina_ask["status"], "answered", "{gina_ask}");
    assert!(
        gina_ask["citations"][0]["quote"]
            .as_str()
            .is_some_and(|q| q.contains("45 euros")),
        "{gina_ask}"
    );
    assert!(
        !alice_ask.to_string().contains("45 euros"),
        "alice saw Globex's document: {alice_ask}"
    );

    // Every call is a traced run under the token's name and tenant, audited clean.
    for (runs, token, name, tenant) in [
        (&gina_runs, &gina, "gina", "globex"),
        (&alice_runs, &alice, "alice", "default"),
    ] {
        for run_id in runs {
            let (status, trace) = serve.get(&format!("/v1/traces/{run_id}"), token);
            assert_eq!(status, 200, "{trace}");
            assert_eq!(trace["run"]["caller"], name, "{trace}");
            assert_eq!(trace["run"]["access"]["tenant"], tenant, "{trace}");
            let (_, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), token);
            assert_eq!(audit["integrity"]["status"], "clean", "{audit}");
        }
    }
    // Another tenant's run does not exist for alice.
    let (status, _) = serve.get(&format!("/v1/traces/{}", gina_runs[0]), &alice);
    assert_eq!(status, 404);

    // A revoked token opens no session.
    let out = command(root)
        .args(["tokens", "revoke", "gina"])
        .output()
        .expect("revoke");
    assert!(out.status.success());
    let refused = runtime.block_on(async { ().serve(transport(&base, &gina)).await.map(|_| ()) });
    assert!(refused.is_err(), "a revoked token opened an MCP session");
}

/// An MCP client that reaches the server by `name` (resolved to the server's own address), as a
/// client behind a real host name does: it sends `Host: name:port`.
fn named_transport(
    base: &str,
    name: &str,
    token: &str,
) -> StreamableHttpClientTransport<reqwest::Client> {
    let addr: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .expect("server address");
    let client = crate::common::http::async_builder()
        .resolve(name, addr)
        .build()
        .expect("client");
    StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!("http://{name}:{}/mcp", addr.port()))
            .auth_header(token),
    )
}

#[test]
fn mcp_answers_the_hosts_the_operator_allowed_and_refuses_others() {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start_with(
        root,
        &["--planner", "offline", "--allowed-host", "kb.example.test"],
        &[],
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let base = serve.base.clone();

    // By the allowed name, the SDK's client opens a session and searches.
    let uris = runtime.block_on(async {
        let client =
            ().serve(named_transport(&base, "kb.example.test", &alice))
                .await
                .expect("initialize through the allowed host");
        let found = client
            .call_tool(
                CallToolRequestParams::new("searchDocs")
                    .with_arguments(args(json!({"keywords": ["sick", "leave"]}))),
            )
            .await
            .expect("searchDocs");
        client.cancel().await.expect("close the session");
        let found = found.structured_content.expect("structured result");
        found["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .filter_map(|h| h["sourceUri"].as_str().map(String::from))
            .collect::<Vec<_>>()
    });
    assert_eq!(
        uris.first().map(String::as_str),
        Some("leave.md#sick-leave"),
        "{uris:?}"
    );

    // By any other name (a rebinding page's own), nothing: no session, a 403 with the code.
    let refused = runtime.block_on(async {
        ().serve(named_transport(&base, "rebind.example.test", &alice))
            .await
            .map(|_| ())
    });
    assert!(refused.is_err(), "an unlisted Host opened an MCP session");
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().expect("addr");
    let client = crate::common::http::blocking_builder()
        .resolve("rebind.example.test", addr)
        .build()
        .expect("client");
    let resp = client
        .post(format!("http://rebind.example.test:{}/mcp", addr.port()))
        .bearer_auth(&alice)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .expect("send");
    assert_eq!(resp.status().as_u16(), 403);
    let err: Value = resp.json().expect("a JSON error");
    assert_eq!(error_code(&err), "host_not_allowed", "{err}");
    // The rest of the API is not MCP's and answers by any name, as before.
    let (status, _) = serve.get("/healthz", &alice);
    assert_eq!(status, 200);
}

/// One raw Streamable HTTP request to `/mcp`: (status, the session id it names, body text).
fn mcp_request(
    base: &str,
    method: Method,
    token: &str,
    session: Option<&str>,
    body: Option<Value>,
) -> (u16, Option<String>, String) {
    let client = crate::common::http::blocking();
    let mut req = client
        .request(method, format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let resp = req.send().expect("send");
    let status = resp.status().as_u16();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    (status, id, resp.text().expect("body"))
}

/// Issue 40, item 12: an `/mcp` session belongs to the token that opened it. Another token,
/// even a valid one, can neither call tools in it nor end it: 404, as for a session that does
/// not exist.
#[test]
fn an_mcp_session_is_bound_to_the_token_that_opened_it() {
    let ws = Workspace::new();
    ws.write("leave.md", LEAVE_EN);
    ws.write("globex.md", GLOBEX);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let gina = add_token(root, "gina", "globex", &[]);
    let serve = Serve::start(root);
    let base = serve.base.as_str();

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, id, body) = mcp_request(base, Method::POST, &gina, None, Some(initialize));
    assert_eq!(status, 200, "{body}");
    let id = id.expect("initialize names its session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = mcp_request(base, Method::POST, &gina, Some(&id), Some(initialized));
    assert_eq!(status, 202, "{body}");

    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "searchDocs", "arguments": {"keywords": ["meal", "allowance"]}}});
    let (status, _, body) =
        mcp_request(base, Method::POST, &alice, Some(&id), Some(search.clone()));
    assert_eq!(status, 404, "another token used the session: {body}");
    assert!(body.contains("no such MCP session"), "{body}");
    let (status, _, body) = mcp_request(base, Method::GET, &alice, Some(&id), None);
    assert_eq!(
        status, 404,
        "another token opened the session's stream: {body}"
    );
    let (status, _, body) = mcp_request(base, Method::DELETE, &alice, Some(&id), None);
    assert_eq!(status, 404, "another token ended the session: {body}");

    // Its own token still uses it, then ends it; after that it is gone for everyone.
    let (status, _, body) = mcp_request(base, Method::POST, &gina, Some(&id), Some(search.clone()));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("globex.md#meal-allowance"), "{body}");
    let (status, _, body) = mcp_request(base, Method::DELETE, &gina, Some(&id), None);
    assert!((200..300).contains(&status), "{status}: {body}");
    let (status, _, body) = mcp_request(base, Method::POST, &gina, Some(&id), Some(search));
    assert_eq!(status, 404, "{body}");
}
