//! Issue 21's smaller findings, each through the real binary on real files: `status` counts as
//! the caller's access sees them, a session is resumed only under its own access context, a
//! closed stdout ends a command quietly, `replay --live --json` prints one JSON document, two
//! ingests at once get one clear message, and out-of-range `-k` / `--max-rounds` are refused.

use std::process::{Command, Stdio};

use crate::common::Workspace;
use crate::common::cli::{ragtrail, text};
use serde_json::Value;

const ACME_DOC: &str = "---\ntitle: Acme travel\ntenant: acme\n---\n\n## Hotel\n\nHotel expenses are reimbursed up to 600 per night in Zanzibar.\n";
const GLOBEX_DOC: &str = "---\ntitle: Globex travel\ntenant: globex\n---\n\n## Hotel\n\nHotel expenses are reimbursed up to 900 per night.\n";
const HR_DOC: &str = "---\ntitle: Acme HR\ntenant: acme\nroles: [hr]\n---\n\n## Review\n\nHotel expenses above the limit are reviewed by HR.\n";

/// Two tenants and a role-restricted acme document, ingested into `data/` by the binary.
fn two_tenants() -> Workspace {
    let ws = Workspace::new();
    ws.write("acme/travel.md", ACME_DOC);
    ws.write("acme/hr.md", HR_DOC);
    ws.write("globex/travel.md", GLOBEX_DOC);
    let out = ragtrail(ws.dir.path(), &["--data-dir", "data", "ingest"]);
    assert!(out.status.success(), "{:?}", text(&out));
    ws
}

fn json_of(out: &std::process::Output) -> Value {
    let (stdout, stderr) = text(out);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}\n{stderr}"))
}

/// `status --json` with `access` flags (or `--all-tenants`, which is status's own).
fn status_as(ws: &Workspace, access: &[&str]) -> Value {
    let mut args = vec!["--data-dir", "data"];
    let (own, global): (Vec<&str>, Vec<&str>) = access.iter().partition(|a| **a == "--all-tenants");
    args.extend_from_slice(&global);
    args.extend_from_slice(&["status", "--json"]);
    args.extend_from_slice(&own);
    let out = ragtrail(ws.dir.path(), &args);
    assert!(out.status.success(), "{:?}", text(&out));
    json_of(&out)
}

#[test]
fn status_counts_only_what_the_callers_access_may_search() {
    let ws = two_tenants();
    let all = status_as(&ws, &["--all-tenants"]);
    assert_eq!(all["scope"]["of"], "allTenants", "{all:#}");
    assert_eq!(all["documents"], 3, "{all:#}");
    let tenants = all["tenants"].as_array().expect("tenants").clone();
    let of = |name: &str| {
        tenants
            .iter()
            .find(|t| t["tenant"] == name)
            .unwrap_or_else(|| panic!("{name} in {tenants:?}"))
            .clone()
    };
    assert_eq!(of("acme")["documents"], 2);
    assert_eq!(of("globex")["documents"], 1);
    let globex_chunks = of("globex")["chunks"].as_u64().expect("chunks");
    assert!(globex_chunks > 0);

    let globex = status_as(&ws, &["--tenant", "globex"]);
    assert_eq!(globex["documents"], 1, "{globex:#}");
    assert_eq!(globex["chunks"].as_u64(), Some(globex_chunks), "{globex:#}");
    assert!(
        globex.get("tenants").is_none_or(Value::is_null),
        "{globex:#}"
    );
    assert_eq!(globex["scope"]["tenant"], "globex");
    // The HR document is acme's, but only for the hr role.
    assert_eq!(status_as(&ws, &["--tenant", "acme"])["documents"], 1);
    assert_eq!(
        status_as(&ws, &["--tenant", "acme", "--role", "hr"])["documents"],
        2
    );
    assert_eq!(status_as(&ws, &[])["documents"], 0, "the default tenant");

    let out = ragtrail(
        ws.dir.path(),
        &["--data-dir", "data", "--tenant", "globex", "status"],
    );
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("1 (visible to tenant globex, no roles"),
        "{stdout}"
    );
    assert!(!stdout.contains("acme"), "{stdout}");
}

#[test]
fn another_tenants_session_is_refused_and_carries_nothing_over() {
    let ws = two_tenants();
    let ask = |tenant: &str, question: &str| {
        ragtrail(
            ws.dir.path(),
            &[
                "--data-dir",
                "data",
                "--tenant",
                tenant,
                "ask",
                "--session",
                "trip",
                "--json",
                question,
            ],
        )
    };
    let first = ask("acme", "hotel expenses in Zanzibar");
    assert_eq!(first.status.code(), Some(0), "{:?}", text(&first));
    let out = ask("globex", "and per night?");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    // With --json the error is the object on stdout, said once.
    let failed: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(failed["status"], "error", "{stdout}");
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("session trip was started under another tenant or other roles"),
        "{error}"
    );
    assert!(error.contains("leave out --session"), "{error}");
    // Neither the other tenant's name nor its topic words come back.
    for leaked in ["acme", "zanzibar", "Zanzibar"] {
        assert!(
            !stdout.contains(leaked) && !stderr.contains(leaked),
            "{leaked}: {stdout}\n{stderr}"
        );
    }
    // `chat` refuses it before the first question.
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--tenant",
            "globex",
            "chat",
            "--session",
            "trip",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{:?}", text(&out));
    assert!(text(&out).1.contains("another tenant or other roles"));
    // Its own tenant resumes it, earlier turn included.
    let again = ask("acme", "and per night?");
    assert_eq!(again.status.code(), Some(0), "{:?}", text(&again));
    let result = json_of(&again);
    let keywords = result["rounds"][0]["keywords"].to_string().to_lowercase();
    assert!(
        keywords.contains("zanzibar") || keywords.contains("hotel"),
        "{result:#}"
    );
}

/// Runs `ragtrail ARGS` with stdout a pipe whose reader is already gone.
fn with_closed_stdout(ws: &Workspace, args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(ws.dir.path())
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("RAGTRAIL_") {
            cmd.env_remove(&key);
        }
    }
    // Not about the embedder: hashing, as the common helpers pin it.
    cmd.env("RAGTRAIL_EMBEDDER", "hashing");
    let child = cmd.spawn().expect("spawn ragtrail");
    drop(cmd);
    child.wait_with_output().expect("wait")
}

/// The trace of a question acme asks (answered from acme's hotel rule).
fn acme_trace(ws: &Workspace) -> String {
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--tenant",
            "acme",
            "ask",
            "--json",
            "hotel expenses",
        ],
    );
    json_of(&out)["trace"].as_str().expect("trace").to_string()
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let ws = two_tenants();
    let trace = acme_trace(&ws);
    for args in [
        vec!["--data-dir", "data", "--tenant", "acme", "audit", &trace],
        vec!["--data-dir", "data", "--tenant", "acme", "traces"],
        vec!["--data-dir", "data", "--tenant", "acme", "search", "hotel"],
        vec![
            "--data-dir",
            "data",
            "--tenant",
            "acme",
            "ask",
            "hotel expenses",
        ],
    ] {
        let out = with_closed_stdout(&ws, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
    }
}

#[test]
fn replay_live_json_prints_one_json_document() {
    let ws = two_tenants();
    let trace = acme_trace(&ws);
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--tenant",
            "acme",
            "replay",
            &trace,
            "--live",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let report = json_of(&out);
    assert_eq!(report["reproduced"], true, "{report:#}");
    let live = &report["live"];
    assert_eq!(live["planner"], "offline", "{report:#}");
    assert_eq!(live["liveStatus"], "answered", "{report:#}");
    assert_eq!(live["recordedStatus"], "answered", "{report:#}");
    assert_eq!(
        live["rounds"][0]["recorded"], live["rounds"][0]["live"],
        "{report:#}"
    );
    let new_trace = live["trace"].as_str().expect("the live run's trace");
    assert!(
        std::path::Path::new(&ws.dir.path().join(new_trace)).exists()
            || std::path::Path::new(new_trace).exists()
    );
    // Text output keeps both parts.
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--tenant",
            "acme",
            "replay",
            &trace,
            "--live",
        ],
    );
    let (stdout, _) = text(&out);
    assert!(stdout.contains("live re-plan (offline planner"), "{stdout}");
    assert!(
        stdout.contains("status: recorded answered | live answered"),
        "{stdout}"
    );
}

#[test]
fn an_ingest_while_another_writes_the_index_says_so_once_and_changes_nothing() {
    let ws = two_tenants();
    let before = status_as(&ws, &["--all-tenants"])["generation"].clone();
    ws.write(
        "globex/travel.md",
        &format!("{GLOBEX_DOC}\n## Taxi\n\nTaxis are reimbursed.\n"),
    );
    let engine = ragtrail::Engine::open(&ws.data()).expect("open");
    // What a second ingest meets while the first one writes: the index's writer lock.
    let held = engine.index().update().expect("the writer lock");
    let out = ragtrail(ws.dir.path(), &["--data-dir", "data", "ingest"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    let message = "another ingest or reindex is writing the BM25 index";
    assert_eq!(stderr.matches(message).count(), 1, "{stderr}");
    assert!(stderr.contains("try again"), "{stderr}");
    assert!(
        !stderr.contains("LockBusy") && !stderr.contains("Lockfile"),
        "{stderr}"
    );
    drop(held);
    drop(engine);
    // Nothing was written meanwhile; the next ingest does the work.
    assert_eq!(status_as(&ws, &["--all-tenants"])["generation"], before);
    let out = ragtrail(ws.dir.path(), &["--data-dir", "data", "ingest"]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_ne!(status_as(&ws, &["--all-tenants"])["generation"], before);
}

#[test]
fn out_of_range_top_k_and_rounds_are_refused_by_every_command() {
    let ws = two_tenants();
    ws.write("golden.jsonl", "");
    let golden = ws.knowledge().join("golden.jsonl");
    let golden = golden.to_str().expect("utf-8 path");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["ask", "-k", "0", "hotel"], "1..=20"),
        (vec!["ask", "-k", "1000000", "hotel"], "1..=20"),
        (vec!["ask", "--max-rounds", "0", "hotel"], "1..=10"),
        (vec!["ask", "--max-rounds", "11", "hotel"], "1..=10"),
        (vec!["search", "-k", "0", "hotel"], "1..=50"),
        (vec!["search", "-k", "1000000", "hotel"], "1..=50"),
        (vec!["chat", "-k", "0"], "1..=20"),
        (vec!["chat", "--max-rounds", "0"], "1..=10"),
        (
            vec!["eval", "agent", "--golden", golden, "-k", "1000000"],
            "1..=20",
        ),
        (
            vec!["eval", "agent", "--golden", golden, "--max-rounds", "0"],
            "1..=10",
        ),
    ];
    for (command, range) in cases {
        let mut args = vec!["--data-dir", "data"];
        args.extend_from_slice(&command);
        let out = ragtrail(ws.dir.path(), &args);
        let (stdout, stderr) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{command:?}: {stdout}\n{stderr}"
        );
        assert!(
            stderr.contains("invalid value") && stderr.contains(range),
            "{command:?}: {stderr}"
        );
        assert!(stdout.is_empty(), "{command:?}: {stdout}");
    }
}

/// Issue 40, item 9: everything holding document text is the owner's alone, as traces are:
/// the store's files and the sessions (questions, answers, snippets of role-restricted chunks)
/// 0600, every folder of the data directory and the trace folder 0700 (tantivy writes the
/// index's files itself, inside a 0700 folder).
#[cfg(unix)]
#[test]
fn the_store_sessions_and_traces_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let ws = two_tenants();
    let root = ws.dir.path();
    let out = ragtrail(
        root,
        &[
            "--data-dir",
            "data",
            "--tenant",
            "acme",
            "--role",
            "hr",
            "ask",
            "--session",
            "trip",
            "hotel expenses above the limit",
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let out = ragtrail(
        root,
        &[
            "--data-dir",
            "data",
            "tokens",
            "add",
            "ann",
            "--tenant",
            "acme",
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));

    // (path relative to the workspace, is a folder, mode) of everything under data/ and traces/.
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, bool, u32)>) {
        let meta = std::fs::metadata(dir).expect("metadata");
        let rel = dir
            .strip_prefix(root)
            .expect("inside")
            .display()
            .to_string();
        out.push((rel, meta.is_dir(), meta.permissions().mode() & 0o777));
        if meta.is_dir() {
            for entry in std::fs::read_dir(dir).expect("read_dir") {
                walk(root, &entry.expect("entry").path(), out);
            }
        }
    }
    let mut all = Vec::new();
    walk(root, &root.join("data"), &mut all);
    walk(root, &root.join("traces"), &mut all);
    let open: Vec<String> = all
        .iter()
        .filter(|(rel, dir, mode)| {
            let wanted = if *dir { 0o700 } else { 0o600 };
            // Tantivy writes the index's files itself: the folder keeps others out.
            *mode != wanted && (*dir || !rel.starts_with("data/index/"))
        })
        .map(|(rel, _, mode)| format!("{rel} {mode:o}"))
        .collect();
    let seen: Vec<String> = all.into_iter().map(|(rel, _, _)| rel).collect();
    assert!(open.is_empty(), "readable by others: {open:?}");
    // The files that hold document text were among those checked.
    for expected in [
        "data/store/CURRENT",
        "data/sessions/trip.json",
        "data/tokens.json",
        "data/index",
    ] {
        assert!(seen.iter().any(|s| s == expected), "{expected}: {seen:?}");
    }
    for (prefix, suffix) in [
        ("data/store/gen-", "/chunks.jsonl"),
        ("data/store/gen-", "/vectors.bin"),
        ("traces/", ".jsonl"),
    ] {
        assert!(
            seen.iter()
                .any(|s| s.starts_with(prefix) && s.ends_with(suffix)),
            "{prefix}…{suffix}: {seen:?}"
        );
    }
    let session = std::fs::read_to_string(root.join("data/sessions/trip.json")).expect("session");
    assert!(session.contains("reviewed by HR"), "{session}");
}
