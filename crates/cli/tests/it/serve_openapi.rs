//! `/openapi.json` over a real socket: OpenAPI 3.1 naming every route (each of which answers),
//! its schemas by name, the bearer scheme; and the described answers match real ones field
//! for field, so the description cannot drift from what the server sends.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, error_code};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn properties(doc: &Value, schema: &str) -> BTreeSet<String> {
    let props = &doc["components"]["schemas"][schema]["properties"];
    assert!(props.is_object(), "no schema {schema} with properties");
    keys(props)
}

#[test]
fn openapi_describes_every_route_and_the_answers_as_sent() {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start(root);

    let (status, doc) = serve.call(Method::GET, "/openapi.json", None, None);
    assert_eq!(status, 200, "{doc}");
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    let expected = json!({
        "/": ["get"],
        "/healthz": ["get"],
        "/readyz": ["get"],
        "/openapi.json": ["get"],
        "/v1/search": ["post"],
        "/v1/ask": ["post"],
        "/v1/traces": ["get"],
        "/v1/traces/{runId}": ["get"],
        "/v1/traces/{runId}/audit": ["get"],
        "/v1/traces/{runId}/replay": ["post"],
        "/v1/memory": ["get"],
        "/v1/memory/{key}": ["put", "delete"],
        "/mcp": ["post"],
    });
    let paths = doc["paths"].as_object().expect("paths");
    assert_eq!(
        paths.keys().collect::<BTreeSet<_>>(),
        expected
            .as_object()
            .expect("expected")
            .keys()
            .collect::<BTreeSet<_>>()
    );
    for (path, methods) in expected.as_object().expect("expected") {
        let documented = keys(&paths[path]);
        let wanted: BTreeSet<String> = methods
            .as_array()
            .expect("methods")
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
        assert!(wanted.is_subset(&documented), "{path}: {documented:?}");
    }
    let schemas = keys(&doc["components"]["schemas"]);
    for name in [
        "SearchBody",
        "AskBody",
        "ErrorBody",
        "ErrorDetail",
        "Health",
        "Ready",
        "SearchHit",
        "Citation",
        "Round",
        "AskOutcome",
        "RunSummary",
        "RunList",
        "Integrity",
        "TraceDetail",
        "AuditReport",
        "ReplayReport",
        "MemoryBody",
        "Fact",
    ] {
        assert!(schemas.contains(name), "no schema {name}: {schemas:?}");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(
        doc["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
            ["$ref"],
        "#/components/schemas/SearchBody"
    );
    assert_eq!(
        properties(&doc, "SearchBody"),
        ["includeSuperseded", "keywords", "topK"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        properties(&doc, "AskBody"),
        ["maxRounds", "question", "requireSource", "today", "topK"]
            .map(String::from)
            .into()
    );
    // Health endpoints and the description need no token; the API does.
    assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([{}]));
    assert_eq!(doc["security"], json!([{"bearer": []}]));

    // Every documented route answers (none falls through to "no such endpoint").
    let (_, asked) = serve.post(
        "/v1/ask",
        &alice,
        json!({"question": "How many days of annual leave do I get?"}),
    );
    let run_id = asked["runId"].as_str().expect("runId").to_string();
    for (path, methods) in expected.as_object().expect("expected") {
        let real = path.replace("{runId}", &run_id).replace("{key}", "grade");
        for method in methods.as_array().expect("methods") {
            let (status, body) = match method.as_str() {
                // Set, then forget: both answer the fact.
                Some("put") => serve.call(
                    Method::PUT,
                    &real,
                    Some(&alice),
                    Some(json!({"value": "B"}).to_string()),
                ),
                Some("delete") => serve.call(Method::DELETE, &real, Some(&alice), None),
                Some("post") if path == "/v1/search" => {
                    serve.post(&real, &alice, json!({"keywords": ["leave"]}))
                }
                Some("post") if path == "/v1/ask" => {
                    serve.post(&real, &alice, json!({"question": "leave?"}))
                }
                // MCP's own handshake is tested in mcp_http.rs; here, that the route is there.
                Some("post") if path == "/mcp" => {
                    let (status, body) = serve.post(&real, &alice, json!({}));
                    assert_ne!(status, 404, "{body}");
                    continue;
                }
                Some("post") => serve.post(&real, &alice, json!({})),
                _ => serve.get(&real, &alice),
            };
            assert_eq!(status, 200, "{method} {real}: {body}");
        }
    }
    let (status, err) = serve.get("/v1/undocumented", &alice);
    assert_eq!((status, error_code(&err)), (404, "not_found"));

    // The described answers are the real ones, field for field.
    let (_, hits) = serve.post(
        "/v1/search",
        &alice,
        json!({"keywords": ["annual", "leave"]}),
    );
    let (_, list) = serve.get("/v1/traces", &alice);
    let (_, trace) = serve.get(&format!("/v1/traces/{run_id}"), &alice);
    let (_, ready) = serve.call(Method::GET, "/readyz", None, None);
    let (_, err) = serve.post("/v1/search", &alice, json!({"keywords": ["x"], "topK": 0}));
    let (_, fact) = serve.call(
        Method::PUT,
        "/v1/memory/grade",
        Some(&alice),
        Some(json!({"value": "B"}).to_string()),
    );
    for (schema, real) in [
        ("Fact", &fact),
        ("SearchHit", &hits[0]),
        ("AskOutcome", &asked),
        ("Round", &asked["rounds"][0]),
        ("Citation", &asked["citations"][0]),
        ("RunList", &list),
        ("RunSummary", &list["runs"][0]),
        ("TraceDetail", &trace),
        ("Integrity", &trace["integrity"]),
        ("Ready", &ready),
        ("ErrorBody", &err),
        ("ErrorDetail", &err["error"]),
    ] {
        let real_keys = keys(real);
        let described = properties(&doc, schema);
        // `field` and the summary's optional fields are left out when empty.
        assert!(
            real_keys.is_subset(&described),
            "{schema}: the server sends {:?} undescribed",
            real_keys.difference(&described).collect::<Vec<_>>()
        );
    }
    // The engine's own types describe themselves: field for field, nothing more (of those
    // that send every field; `missingTerms` of a sufficiency is left out when empty, an outcome's
    // `error` unless it failed).
    for (schema, real) in [
        ("SearchHit", &hits[0]),
        ("AskOutcome", &asked),
        ("Round", &asked["rounds"][0]),
        ("Citation", &asked["citations"][0]),
        ("ModelUsage", &asked["modelUsage"]),
        ("Integrity", &trace["integrity"]),
    ] {
        let mut described = properties(&doc, schema);
        // `error` is sent with status `error` only, `model` with a planner that has one,
        // `proposedFacts` when the model proposed a fact the question states.
        if schema == "AskOutcome" {
            described.remove("error");
            described.remove("model");
            described.remove("proposedFacts");
        }
        assert_eq!(described, keys(real), "{schema}");
    }
    // The audit and replay are described in part: every described field is one they send.
    let (_, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), &alice);
    let (_, replay) = serve.post(&format!("/v1/traces/{run_id}/replay"), &alice, json!({}));
    for (schema, real) in [("AuditReport", &audit), ("ReplayReport", &replay)] {
        let described = properties(&doc, schema);
        assert!(
            described.is_subset(&keys(real)),
            "{schema} describes {:?}, which the server does not send",
            described.difference(&keys(real)).collect::<Vec<_>>()
        );
    }
}
