//! `ragtrail mcp` driven by the MCP SDK's own client over stdio: the tools and their schemas,
//! hits and answers with their sources, access from the operator only, every call traced.

use rmcp::model::CallToolRequestParams;
use rmcp::service::Peer;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::server::command;
use crate::common::{GLOBEX, LEAVE_EN, TRAVEL, Workspace};
use ragtrail::review::runs::{ListedRun, list_runs};
use ragtrail::trace::{LedgerPolicy, Verdict, check_integrity_with, run_started};

pub(crate) fn args(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().expect("object")
}

/// A `tenant` among searchDocs' arguments is refused (an error, or a tool error naming it),
/// never obeyed: access comes from the operator or the token.
pub(crate) async fn assert_tenant_argument_refused(client: &Peer<RoleClient>) {
    let refused = client
        .call_tool(
            CallToolRequestParams::new("searchDocs")
                .with_arguments(args(json!({"keywords": ["meal"], "tenant": "globex"}))),
        )
        .await;
    match refused {
        Err(e) => assert!(e.to_string().contains("tenant"), "{e}"),
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{r:?}");
            assert!(format!("{:?}", r.content).contains("tenant"), "{r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_search_and_answer_under_the_operators_access_and_are_traced() {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    ws.write("globex.md", GLOBEX);
    let root = ws.dir.path();
    let mut cmd = command(root);
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
    let search_tool = tools
        .iter()
        .find(|t| t.name == "searchDocs")
        .expect("searchDocs");
    let props = &search_tool.input_schema["properties"];
    assert!(
        props.get("keywords").is_some() && props.get("topK").is_some(),
        "{props}"
    );
    assert!(props.get("tenant").is_none());
    assert_eq!(search_tool.input_schema["required"], json!(["keywords"]));
    assert!(search_tool.output_schema.is_some());

    let result = client
        .call_tool(
            CallToolRequestParams::new("searchDocs")
                .with_arguments(args(json!({"keywords": ["annual", "leave"], "topK": 3}))),
        )
        .await
        .expect("searchDocs");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let found = result.structured_content.expect("structured result");
    let hits = found["hits"].as_array().expect("hits");
    assert!(!hits.is_empty() && hits.len() <= 3, "{found}");
    for field in ["chunkId", "titlePath", "snippet", "sourceUri", "score"] {
        assert!(hits[0].get(field).is_some(), "{field}: {found}");
    }
    assert!(
        hits[0]["sourceUri"]
            .as_str()
            .is_some_and(|u| u.starts_with("leave.md#")),
        "{found}"
    );
    assert!(
        hits[0]["titlePath"]
            .as_str()
            .is_some_and(|t| t.contains("Annual leave")),
        "{found}"
    );
    let search_run = found["runId"].as_str().expect("runId").to_string();

    // The operator's tenant is `default`: another tenant's document is not found, and a tool
    // argument naming a tenant is refused rather than obeyed.
    let result = client
        .call_tool(
            CallToolRequestParams::new("searchDocs")
                .with_arguments(args(json!({"keywords": ["meal", "allowance"]}))),
        )
        .await
        .expect("searchDocs");
    let found = result.structured_content.expect("structured result");
    assert!(
        found["hits"]
            .as_array()
            .is_some_and(|h| h.iter().all(|h| !h["sourceUri"]
                .as_str()
                .is_some_and(|u| u.starts_with("globex.md")))),
        "{found}"
    );
    assert_tenant_argument_refused(&client).await;
    let bad = client
        .call_tool(
            CallToolRequestParams::new("searchDocs").with_arguments(args(
                json!({"keywords": ["how many days of leave do I get?"]}),
            )),
        )
        .await
        .expect("call");
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    assert!(
        format!("{:?}", bad.content).contains("invalid_keywords"),
        "{bad:?}"
    );

    let result = client
        .call_tool(
            CallToolRequestParams::new("ask").with_arguments(args(json!({
                "question": "How many days of annual leave do I get?"
            }))),
        )
        .await
        .expect("ask");
    let answer = result.structured_content.expect("structured result");
    assert_eq!(answer["status"], "answered", "{answer}");
    let citation = &answer["citations"][0];
    assert!(
        citation["sourceUri"]
            .as_str()
            .is_some_and(|u| u.starts_with("leave.md#")),
        "{answer}"
    );
    assert!(
        citation["quote"]
            .as_str()
            .is_some_and(|q| q.contains("10 days")),
        "{answer}"
    );
    assert!(answer["hits"].as_array().is_some_and(|h| !h.is_empty()));
    let ask_run = answer["runId"].as_str().expect("runId").to_string();
    client.cancel().await.expect("close");

    // Every successful tool call left a complete, chained trace with the operator's caller
    // name, and each verifies against the ledger.
    let runs = list_runs(&root.join("traces"), &Default::default(), 100, &|_| true).expect("runs");
    let runs: Vec<_> = runs
        .into_iter()
        .map(|r| match r {
            ListedRun::Run(r) => r,
            ListedRun::Unreadable(p) => panic!("unreadable {}", p.display()),
        })
        .collect();
    let ids: Vec<String> = runs.iter().map(|r| r.run_id.to_string()).collect();
    assert!(
        ids.contains(&search_run) && ids.contains(&ask_run),
        "{ids:?}"
    );
    // Two searches, the bad-keywords one (traced too: it was a call), and the ask.
    assert_eq!(runs.len(), 4, "{ids:?}");
    for run in &runs {
        let (integrity, file) =
            check_integrity_with(&run.path, None, LedgerPolicy::Required).expect("check");
        assert_eq!(
            integrity.verdict,
            Verdict::Clean,
            "{:?}",
            integrity.problems
        );
        let started = file
            .as_ref()
            .and_then(run_started)
            .expect("run_started")
            .clone();
        assert_eq!(started.caller.as_deref(), Some("agent-7"));
        assert_eq!(started.access.tenant, "default");
        let planner = if run.run_id.to_string() == ask_run {
            "offline"
        } else {
            "direct"
        };
        assert_eq!(started.planner, planner);
    }
    let search = runs
        .iter()
        .find(|r| r.run_id.to_string() == search_run)
        .expect("search run");
    assert_eq!(search.question, "searchDocs: annual, leave");
    assert_eq!(search.rounds, 1);
    assert_eq!(search.reason, ragtrail_server::SEARCH_ONLY_REASON);

    // The search run replays like an ask's.
    let out = command(root)
        .args(["replay", "--json"])
        .arg(&search.path)
        .output()
        .expect("replay");
    let report: Value = serde_json::from_slice(&out.stdout).expect("replay json");
    assert_eq!(report["reproduced"], true, "{report}");
}
