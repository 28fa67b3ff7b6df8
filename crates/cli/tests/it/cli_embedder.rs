//! The binary: `status`, embedder selection by flags and variables, and the mismatch error that
//! tells how to rebuild.

use crate::common;
use crate::common::cli::{ragtrail, text};

use std::path::Path;
use std::process::Command;

fn model_dir() -> String {
    std::env::var("RAGTRAIL_TEST_MODEL_DIR").unwrap_or_else(|_| {
        panic!("RAGTRAIL_TEST_MODEL_DIR is not set: run the tests with `bash scripts/test.sh`")
    })
}

#[test]
fn status_before_and_after_ingest_with_the_hashing_embedder() {
    let ws = common::Workspace::new();
    ws.write("finance/travel.md", common::TRAVEL);
    ws.write("hr/leave.md", common::LEAVE_EN);
    let data = ws.data();
    let data = data.to_str().expect("utf-8 path");
    let knowledge = ws.knowledge();
    let knowledge = knowledge.to_str().expect("utf-8 path");

    let out = ragtrail(ws.dir.path(), &["--data-dir", data, "status"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(stdout.contains("nothing ingested yet"), "{stdout}");
    assert!(
        !Path::new(data).exists(),
        "status must not create the data dir"
    );

    let out = ragtrail(ws.dir.path(), &["--data-dir", data, "ingest", knowledge]);
    assert!(out.status.success(), "{:?}", text(&out));

    let out = ragtrail(ws.dir.path(), &["--data-dir", data, "status"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!("data dir             {data}")),
        "{stdout}"
    );
    assert!(stdout.contains("backend              embedded"), "{stdout}");
    assert!(stdout.contains("documents            2"), "{stdout}");
    assert!(
        stdout.contains(
            "index embedder       hashing char-ngram-fnv1a-v1 (384 dims) — lexical, not semantic"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("s ago (generation 1)"), "{stdout}");
    assert!(stdout.contains("match the configured embedder"), "{stdout}");

    let out = ragtrail(ws.dir.path(), &["--data-dir", data, "status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(v["documents"], 2);
    assert_eq!(v["backend"], "embedded");
    assert_eq!(v["indexEmbedder"]["kind"], "hashing");
    assert_eq!(v["indexEmbedder"]["dims"], 384);
    assert_eq!(v["embedderMatches"], true);
    let chunks = v["chunks"].as_u64().expect("chunks");
    assert!(chunks >= 5, "{v}");
    assert!(v["ageSeconds"].as_i64().expect("age") < 600);
    assert_eq!(v["fusion"], "agree:0.5");
    assert_eq!(v["agentFusion"], "agree:0.5");
    assert!(
        stdout.contains("fusion               agree:0.5\n"),
        "{stdout}"
    );

    // The operator's choice for the agent's searches is shown beside searchDocs' own.
    let out = ragtrail(
        ws.dir.path(),
        &["--data-dir", data, "--agent-fusion", "coverage:1", "status"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("agree:0.5; the agent's searches: coverage:1 (--agent-fusion)"),
        "{stdout}"
    );

    // The operator's choice for every search that names none; the agent follows it unless
    // told otherwise.
    let chosen = ["--data-dir", data, "--search-fusion", "standout-coverage"];
    let out = ragtrail(
        ws.dir.path(),
        &[&chosen[..], &["status", "--json"]].concat(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(v["fusion"], "standout-coverage");
    assert_eq!(v["agentFusion"], "standout-coverage");
    let out = ragtrail(
        ws.dir.path(),
        &[
            &chosen[..],
            &["--agent-fusion", "coverage:1", "status", "--json"],
        ]
        .concat(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(v["fusion"], "standout-coverage");
    assert_eq!(v["agentFusion"], "coverage:1");
}

#[test]
fn switching_to_the_local_model_is_refused_until_a_rebuild() {
    let ws = common::Workspace::new();
    ws.write("hr/leave.md", common::LEAVE_EN);
    let data = ws.data();
    let data = data.to_str().expect("utf-8 path");
    let knowledge = ws.knowledge();
    let knowledge = knowledge.to_str().expect("utf-8 path");
    let model = model_dir();
    let out = ragtrail(ws.dir.path(), &["--data-dir", data, "ingest", knowledge]);
    assert!(out.status.success(), "{:?}", text(&out));

    // The model folder configured by flag: searching the hashing index is a clear error.
    let local = ["--data-dir", data, "--embed-model-dir", &model];
    let mut args = local.to_vec();
    args.extend(["search", "annual", "leave"]);
    let out = ragtrail(ws.dir.path(), &args);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("ragtrail ingest --rebuild"), "{stderr}");
    assert!(stderr.contains("hashing:char-ngram-fnv1a-v1"), "{stderr}");

    let mut args = local.to_vec();
    args.push("status");
    let (stdout, _) = text(&ragtrail(ws.dir.path(), &args));
    assert!(stdout.contains("DO NOT match"), "{stdout}");
    assert!(
        stdout.contains("configured embedder  local MiniLM-L6-H384-uncased"),
        "{stdout}"
    );

    // A plain re-ingest is refused too (it would mix vectors); --rebuild re-embeds everything.
    let mut args = local.to_vec();
    args.extend(["ingest", knowledge]);
    let out = ragtrail(ws.dir.path(), &args);
    assert_eq!(out.status.code(), Some(3));
    args.push("--rebuild");
    let out = ragtrail(ws.dir.path(), &args);
    assert!(out.status.success(), "{:?}", text(&out));

    // Now by environment variable instead of flag.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(ws.dir.path())
        .env("RAGTRAIL_EMBED_MODEL_DIR", &model)
        .args(["--data-dir", data, "status", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&cmd.output().expect("run").stdout).expect("JSON");
    assert_eq!(v["indexEmbedder"]["kind"], "local");
    assert_eq!(v["embedderMatches"], true);

    // --embedder hashing overrides the model folder: mismatch again.
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            data,
            "--embed-model-dir",
            &model,
            "--embedder",
            "hashing",
            "status",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["configuredEmbedder"]["kind"], "hashing");
    assert_eq!(v["embedderMatches"], false);
}

#[test]
fn an_incomplete_http_configuration_names_the_missing_setting() {
    let ws = common::Workspace::new();
    ws.write("hr/leave.md", common::LEAVE_EN);
    let data = ws.data();
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            data.to_str().expect("utf-8"),
            "--embed-base-url",
            "http://127.0.0.1:9/v1",
            "--embed-api-key",
            "sk-cli-secret",
            "search",
            "leave",
        ],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("RAGTRAIL_EMBED_MODEL"), "{stderr}");
    assert!(!stderr.contains("sk-cli-secret"), "{stderr}");
}
