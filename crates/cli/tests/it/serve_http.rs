//! `ragtrail serve` over a real socket: the same JSON as the command line, access from tokens
//! alone, one tenant's runs invisible to another, bad input answered with stable codes.

use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, command, error_code};
use crate::common::{GLOBEX, LEAVE_EN, TRAVEL, Workspace};
use ragtrail::trace::{read_trace, run_started};

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    ws.write("globex.md", GLOBEX);
    ws
}

/// `ragtrail ARGS` in the workspace, its stdout parsed as JSON.
fn cli_json(root: &Path, args: &[&str]) -> Value {
    let out = command(root).args(args).output().expect("run ragtrail");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

fn trace_path(root: &Path, body: &Value) -> std::path::PathBuf {
    root.join(body["trace"].as_str().expect("trace path"))
}

#[test]
fn search_and_ask_answer_as_the_command_line_does() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    // The command line first (it ingests the folder), then the server over the same index.
    let cli_hits = cli_json(root, &["search", "annual", "leave", "-k", "3", "--json"]);
    let cli_ask = cli_json(
        root,
        &[
            "ask",
            "How many days of annual leave do I get?",
            "--planner",
            "offline",
            "--today",
            "2026-11-30",
            "--json",
        ],
    );
    let serve = Serve::start(root);

    let (status, hits) = serve.post(
        "/v1/search",
        &alice,
        json!({"keywords": ["annual", "leave"], "topK": 3}),
    );
    assert_eq!(status, 200, "{hits}");
    assert_eq!(hits, cli_hits);
    assert!(
        hits[0]["titlePath"]
            .as_str()
            .is_some_and(|t| t.contains("Annual leave")),
        "{hits}"
    );

    let (status, outcome) = serve.post(
        "/v1/ask",
        &alice,
        json!({"question": "How many days of annual leave do I get?"}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "answered", "{outcome}");
    for field in ["status", "reason", "answer", "citations", "rounds"] {
        assert_eq!(outcome[field], cli_ask[field], "{field}");
    }
    assert!(
        outcome["citations"][0]["quote"]
            .as_str()
            .is_some_and(|q| q.contains("10 days")),
        "{outcome}"
    );
    // The server's run is traced like the command line's, with the token's name as caller.
    let file = read_trace(&trace_path(root, &outcome)).expect("trace");
    let started = run_started(&file).expect("run_started");
    assert_eq!(started.caller.as_deref(), Some("alice"));
    assert_eq!(started.access.tenant, "default");
    let cli_file = read_trace(&trace_path(root, &cli_ask)).expect("cli trace");
    assert_eq!(run_started(&cli_file).expect("run_started").caller, None);

    let (status, health) = serve.call(Method::GET, "/healthz", None, None);
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (status, ready) = serve.get("/readyz", &alice);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready");
    assert!(ready["chunks"].as_u64().is_some_and(|n| n >= 5), "{ready}");
}

#[test]
fn only_a_live_token_gets_in_and_it_alone_decides_the_tenant() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let gina = add_token(root, "gina", "globex", &[]);
    let serve = Serve::start(root);
    let body = json!({"keywords": ["meal", "allowance"]}).to_string();

    let (status, err) = serve.call(Method::POST, "/v1/search", None, Some(body.clone()));
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");
    let (status, err) = serve.call(
        Method::POST,
        "/v1/search",
        Some("rtk_0000"),
        Some(body.clone()),
    );
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");

    // Each token sees its own tenant's documents only.
    let (status, hits) = serve.post(
        "/v1/search",
        &gina,
        json!({"keywords": ["meal", "allowance"]}),
    );
    assert_eq!(status, 200, "{hits}");
    assert_eq!(hits[0]["sourceUri"], "globex.md#meal-allowance", "{hits}");
    let (_, hits) = serve.post(
        "/v1/search",
        &alice,
        json!({"keywords": ["meal", "allowance"]}),
    );
    assert!(
        hits.as_array()
            .is_some_and(|h| h.iter().all(|h| !h["sourceUri"]
                .as_str()
                .is_some_and(|u| u.starts_with("globex.md")))),
        "{hits}"
    );

    // A body naming a tenant or roles is refused, not obeyed.
    for field in ["tenant", "roles"] {
        let mut b = json!({"keywords": ["meal"]});
        b[field] = json!("globex");
        let (status, err) = serve.post("/v1/search", &alice, b);
        assert_eq!(
            (status, error_code(&err)),
            (400, "access_in_request"),
            "{err}"
        );
        assert_eq!(err["error"]["field"], field);
    }
    let (status, err) = serve.get("/v1/traces?tenant=globex", &alice);
    assert_eq!(
        (status, error_code(&err)),
        (400, "access_in_request"),
        "{err}"
    );

    // Revoked on disk: refused by the running server from the next request on.
    let out = command(root)
        .args(["tokens", "revoke", "gina"])
        .output()
        .expect("revoke");
    assert!(out.status.success());
    let (status, err) = serve.post("/v1/search", &gina, json!({"keywords": ["meal"]}));
    assert_eq!((status, error_code(&err)), (401, "unauthorized"), "{err}");

    let listed = command(root)
        .args(["tokens", "list"])
        .output()
        .expect("list");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("gina") && listed.contains("revoked"),
        "{listed}"
    );
    assert!(
        !listed.contains(&alice) && !listed.contains(&gina),
        "{listed}"
    );
}

/// Issue 40, item 11: traces name their caller by token name, so a revoked token's name is
/// never given to another token (which could be another tenant's).
#[test]
fn a_revoked_tokens_name_is_never_given_to_another_token() {
    let ws = Workspace::new();
    let root = ws.dir.path();
    let gina = add_token(root, "gina", "globex", &[]);
    let out = command(root)
        .args(["tokens", "revoke", "gina"])
        .output()
        .expect("revoke");
    assert!(out.status.success());
    let out = command(root)
        .args(["tokens", "add", "gina", "--tenant", "default"])
        .output()
        .expect("add");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("a token named \"gina\" was revoked on")
            && stderr.contains("never given to another token: pick another name"),
        "{stderr}"
    );
    assert!(!stdout.contains("rtk_"), "{stdout}");
    let listed = command(root)
        .args(["tokens", "list"])
        .output()
        .expect("list");
    let listed = String::from_utf8_lossy(&listed.stdout);
    let ginas: Vec<&str> = listed.lines().filter(|l| l.starts_with("gina ")).collect();
    assert_eq!(ginas.len(), 1, "{listed}");
    assert!(
        ginas[0].contains("globex") && ginas[0].contains("revoked"),
        "{listed}"
    );
    // Another name is fine, and the old token stays refused.
    let other = add_token(root, "gina2", "default", &[]);
    assert_ne!(other, gina);
}

#[test]
fn a_tenant_sees_audits_and_replays_only_its_own_runs() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let gina = add_token(root, "gina", "globex", &[]);
    let serve = Serve::start(root);
    let (_, asked) = serve.post(
        "/v1/ask",
        &alice,
        json!({"question": "How many days of annual leave do I get?"}),
    );
    let run_id = asked["runId"].as_str().expect("runId").to_string();
    let (_, gina_asked) = serve.post(
        "/v1/ask",
        &gina,
        json!({"question": "What is the meal allowance per travel day?"}),
    );
    assert_eq!(gina_asked["status"], "answered", "{gina_asked}");

    let (status, list) = serve.get("/v1/traces", &alice);
    assert_eq!(status, 200);
    let runs = list["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{list}");
    assert_eq!(runs[0]["runId"], run_id.as_str());
    assert_eq!(runs[0]["caller"], "alice");
    assert_eq!(runs[0]["status"], "answered");
    let (_, gina_list) = serve.get("/v1/traces", &gina);
    assert_eq!(gina_list["runs"][0]["runId"], gina_asked["runId"]);
    assert_eq!(gina_list["runs"].as_array().map(Vec::len), Some(1));

    // The listing's filters are the engine's (`ragtrail traces` takes the same).
    for (query, count) in [
        ("status=answered", 1),
        ("status=insufficient", 0),
        ("status=Insufficient%20Evidence", 0),
        ("since=2000-01-01", 1),
        ("since=2999-01-01T00:00:00Z", 0),
        ("session=none-such", 0),
        ("status=answered&since=2000-01-01", 1),
    ] {
        let (status, list) = serve.get(&format!("/v1/traces?{query}"), &alice);
        assert_eq!(status, 200, "{query}: {list}");
        assert_eq!(
            list["runs"].as_array().map(Vec::len),
            Some(count),
            "{query}: {list}"
        );
    }
    for (query, field) in [("status=finished", "status"), ("since=yesterday", "since")] {
        let (status, err) = serve.get(&format!("/v1/traces?{query}"), &alice);
        assert_eq!((status, error_code(&err)), (400, "invalid_field"), "{err}");
        assert_eq!(err["error"]["field"], field, "{err}");
    }

    let (status, trace) = serve.get(&format!("/v1/traces/{run_id}"), &alice);
    assert_eq!(status, 200, "{trace}");
    assert_eq!(trace["integrity"]["status"], "clean");
    let types: Vec<&str> = trace["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(types.first(), Some(&"run_started"));
    assert_eq!(types.last(), Some(&"run_finished"));
    assert!(
        types.contains(&"search") && types.contains(&"answer"),
        "{types:?}"
    );

    let (status, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), &alice);
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["integrity"]["status"], "clean");
    assert_eq!(audit["citations"][0]["quoteVerified"], true, "{audit}");
    let (status, markdown) = serve.get(
        &format!("/v1/traces/{run_id}/audit?format=markdown"),
        &alice,
    );
    assert_eq!(status, 200);
    let markdown = markdown.as_str().expect("markdown text");
    assert!(
        markdown.starts_with(&format!("## Audit of run `{run_id}`")),
        "{markdown}"
    );
    assert!(markdown.contains("verified in the chunk"), "{markdown}");
    let (status, replay) = serve.post(&format!("/v1/traces/{run_id}/replay"), &alice, json!({}));
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["reproduced"], true, "{replay}");

    // Another tenant's run does not exist for gina, whatever she asks of it.
    for path in [
        format!("/v1/traces/{run_id}"),
        format!("/v1/traces/{run_id}/audit"),
        format!("/v1/traces/{run_id}/audit?format=markdown"),
    ] {
        let (status, err) = serve.get(&path, &gina);
        assert_eq!(
            (status, error_code(&err)),
            (404, "not_found"),
            "{path}: {err}"
        );
    }
    let (status, err) = serve.post(&format!("/v1/traces/{run_id}/replay"), &gina, json!({}));
    assert_eq!((status, error_code(&err)), (404, "not_found"), "{err}");
}

#[test]
fn bad_requests_are_answered_with_stable_codes_naming_the_field() {
    let ws = workspace();
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start(root);
    let raw = |path: &str, body: &str| {
        serve.call(Method::POST, path, Some(&alice), Some(body.to_string()))
    };
    let cases: Vec<(&str, String, u16, &str, Option<&str>)> = vec![
        (
            "/v1/search",
            "{\"keywords\": [\"leave\"".into(),
            400,
            "malformed_json",
            None,
        ),
        ("/v1/search", "[1, 2]".into(), 400, "malformed_json", None),
        (
            "/v1/search",
            json!({"keywords": ["leave"], "colour": 1}).to_string(),
            400,
            "unknown_field",
            Some("colour"),
        ),
        (
            "/v1/search",
            json!({"topK": 3}).to_string(),
            400,
            "missing_field",
            Some("keywords"),
        ),
        (
            "/v1/search",
            json!({"keywords": "leave"}).to_string(),
            400,
            "invalid_field",
            Some("keywords"),
        ),
        (
            "/v1/search",
            json!({"keywords": ["leave"], "topK": 1_000_000}).to_string(),
            400,
            "out_of_range",
            Some("topK"),
        ),
        (
            "/v1/search",
            json!({"keywords": vec!["k"; 40]}).to_string(),
            400,
            "invalid_keywords",
            Some("keywords"),
        ),
        (
            "/v1/search",
            json!({"keywords": [" "]}).to_string(),
            400,
            "invalid_keywords",
            Some("keywords"),
        ),
        (
            "/v1/ask",
            json!({"question": "leave?", "topK": 21}).to_string(),
            400,
            "out_of_range",
            Some("topK"),
        ),
        (
            "/v1/ask",
            json!({"question": "leave?", "maxRounds": 0}).to_string(),
            400,
            "out_of_range",
            Some("maxRounds"),
        ),
        (
            "/v1/ask",
            json!({"question": "   "}).to_string(),
            400,
            "invalid_question",
            Some("question"),
        ),
        (
            "/v1/ask",
            json!({"question": "x".repeat(2001)}).to_string(),
            400,
            "invalid_question",
            Some("question"),
        ),
        (
            "/v1/ask",
            json!({"question": "leave?", "today": "tomorrow"}).to_string(),
            400,
            "invalid_field",
            Some("today"),
        ),
        (
            "/v1/ask",
            json!({"question": "x".repeat(70_000)}).to_string(),
            413,
            "body_too_large",
            None,
        ),
    ];
    for (path, body, status, code, field) in cases {
        let (got, err) = raw(path, &body);
        assert_eq!(
            (got, error_code(&err)),
            (status, code),
            "{path} {}: {err}",
            &body[..body.len().min(80)]
        );
        assert_eq!(err["error"]["field"].as_str(), field, "{path}: {err}");
        assert!(
            err["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    // A run id is a UUID: a path in its place is refused before any file is touched.
    for id in ["..%2F..%2Fetc%2Fpasswd", "..%2Fledger", "not-a-uuid"] {
        let (status, err) = serve.get(&format!("/v1/traces/{id}/audit"), &alice);
        assert_eq!(
            (status, error_code(&err)),
            (400, "invalid_run_id"),
            "{id}: {err}"
        );
    }
    let (status, err) = serve.get("/v1/traces/0190b8a0-0000-7000-8000-000000000000", &alice);
    assert_eq!((status, error_code(&err)), (404, "not_found"), "{err}");
    let (status, err) = serve.get("/v1/traces?limit=0", &alice);
    assert_eq!((status, error_code(&err)), (400, "out_of_range"), "{err}");
    let (status, err) = serve.get("/v1/nothing", &alice);
    assert_eq!((status, error_code(&err)), (404, "not_found"), "{err}");
}
