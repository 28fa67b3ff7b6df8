//! Issue 21, "close the leaks": each finding of the adversarial probe reproduced with the real
//! binary on real files and a real tantivy index: two tenants (acme, globex) and a
//! role-restricted acme document, each with a word found nowhere else.

use std::path::{Path, PathBuf};

use crate::common::cli::{ragtrail, text};
use crate::common::*;
use ragtrail::AccessContext;
use ragtrail::Engine;
use ragtrail::OfflinePlanner;
use ragtrail::trace::{canonical_json, event_hash};
use ragtrail::{AgentRagOptions, RunSettings, TraceSettings};
use serde_json::Value;

const ACME_WORD: &str = "ACMEWORD";
const GLOBEX_WORD: &str = "GLOBEXWORD";
const HR_WORD: &str = "HRWORD";

const ACME_DOC: &str = "---\ntitle: Acme travel\ntenant: acme\n---\n\n## Hotel\n\nHotel expenses are reimbursed up to 600 per night ACMEWORD.\n";
const GLOBEX_DOC: &str = "---\ntitle: Globex travel\ntenant: globex\n---\n\n## Hotel\n\nHotel expenses are reimbursed up to 900 per night GLOBEXWORD.\n";
/// Globex's rate as its document words it (a bare "900" can turn up in a run id or a path).
const GLOBEX_RATE: &str = "900 per night";
const HR_DOC: &str = "---\ntitle: Acme HR\ntenant: acme\nroles: [hr]\n---\n\n## Review\n\nHotel expenses above the limit are reviewed by HR HRWORD.\n";

/// The knowledge folder ingested into `data/`.
fn two_tenants() -> (Workspace, Engine) {
    let ws = Workspace::new();
    ws.write("acme/travel.md", ACME_DOC);
    ws.write("globex/travel.md", GLOBEX_DOC);
    ws.write("acme/hr.md", HR_DOC);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    (ws, engine)
}

fn traces_dir(ws: &Workspace) -> PathBuf {
    ws.dir.path().join("traces")
}

/// One offline run of `question` as `access`; the trace's path.
fn run_as(ws: &Workspace, engine: &Engine, access: AccessContext, question: &str) -> PathBuf {
    let settings = RunSettings {
        options: AgentRagOptions::default(),
        access,
        today: "2026-11-30".into(),
        trace: Some(TraceSettings {
            dir: traces_dir(ws),
            key: None,
            signer: None,
            caller: None,
        }),
        session: None,
        conversation: None,
        memory: Vec::new(),
        observer: None,
    };
    let outcome = ragtrail::run_agent(
        engine,
        &mut OfflinePlanner::new(),
        question,
        &settings,
        &mut |_| {},
    )
    .expect("run");
    assert!(outcome.answer.is_some(), "{:?}", outcome.message);
    outcome.trace.expect("trace").path
}

fn acme() -> AccessContext {
    AccessContext::new("acme", Vec::<String>::new())
}

fn globex() -> AccessContext {
    AccessContext::new("globex", Vec::<String>::new())
}

/// The chunk of `source` (id, content hash).
fn chunk_of(engine: &Engine, source: &str) -> (String, String) {
    let c = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .find(|c| c.source == source)
        .expect("chunk");
    (c.id.clone(), c.content_hash.clone())
}

/// `ragtrail --data-dir data --trace-dir traces ARGS` in the workspace.
fn bin(ws: &Workspace, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["--data-dir", "data", "--trace-dir", "traces"];
    all.extend_from_slice(args);
    let out = ragtrail(ws.dir.path(), &all);
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

fn trace_files(ws: &Workspace) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(traces_dir(ws))
        .expect("traces")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n != "ledger.jsonl"))
        .collect();
    files.sort();
    files
}

/// Rewrites a trace as someone with write access to the trace folder can (traces are unkeyed
/// by default): `edit` changes each line, the chain is recomputed, and the ledger entry of the
/// run and the ledger's own chain are recomputed to match.
fn forge(path: &Path, original: &[Value], mut edit: impl FnMut(&mut Value)) {
    let mut prev = ragtrail::trace::ZERO_HASH.to_string();
    let mut out = String::new();
    for line in original {
        let mut v = line.clone();
        edit(&mut v);
        v["prevHash"] = Value::String(prev.clone());
        let h = event_hash(&v, None);
        v["hash"] = Value::String(h.clone());
        prev = h;
        out.push_str(&canonical_json(&v));
        out.push('\n');
    }
    std::fs::write(path, out).expect("write trace");
    let run_id = original[0]["runId"].clone();
    let ledger = path.parent().expect("dir").join("ledger.jsonl");
    let mut prev = ragtrail::trace::ZERO_HASH.to_string();
    let mut out = String::new();
    for line in std::fs::read_to_string(&ledger).expect("ledger").lines() {
        let mut v: Value = serde_json::from_str(line).expect("json");
        if v["runId"] == run_id {
            v["finalHash"] = Value::String(
                std::fs::read_to_string(path)
                    .expect("read")
                    .lines()
                    .last()
                    .and_then(|l| serde_json::from_str::<Value>(l).ok())
                    .and_then(|l| l["hash"].as_str().map(String::from))
                    .expect("final hash"),
            );
        }
        v["prevHash"] = Value::String(prev.clone());
        let h = event_hash(&v, None);
        v["hash"] = Value::String(h.clone());
        prev = h;
        out.push_str(&canonical_json(&v));
        out.push('\n');
    }
    std::fs::write(ledger, out).expect("write ledger");
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn replay_and_audit_of_another_tenants_trace_are_refused_and_reveal_nothing() {
    let (ws, engine) = two_tenants();
    let path = run_as(&ws, &engine, globex(), "hotel expenses GLOBEXWORD");
    let path_s = path.to_str().expect("utf8");
    let (globex_id, globex_hash) = chunk_of(&engine, "globex/travel.md");
    assert!(
        std::fs::read_to_string(&path)
            .expect("read")
            .contains(&globex_id)
    );
    let before = trace_files(&ws).len();
    // The owner replays it: reproduced.
    let (code, stdout, _) = bin(&ws, &["--tenant", "globex", "replay", path_s]);
    assert_eq!(code, Some(0), "{stdout}");
    for args in [
        vec!["--tenant", "acme", "replay", path_s],
        vec!["--tenant", "acme", "replay", "--json", path_s],
        vec!["--tenant", "acme", "replay", "--live", path_s],
        vec!["--tenant", "globex", "--role", "hr", "replay", path_s],
    ] {
        let (code, stdout, stderr) = bin(&ws, &args);
        assert_eq!(code, Some(3), "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("recorded for tenant globex") && stderr.contains("--tenant"),
            "{args:?}: the refusal says why and what to do: {stderr}"
        );
        for secret in [GLOBEX_WORD, &globex_id, &globex_hash] {
            assert!(
                !stdout.contains(secret),
                "{args:?} printed {secret}: {stdout}"
            );
        }
    }
    assert_eq!(trace_files(&ws).len(), before, "--live wrote no new trace");
    // Audit by another tenant: integrity only, nothing of the evidence, no store lookup.
    let (code, stdout, stderr) = bin(&ws, &["--tenant", "acme", "audit", "--json", path_s]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["integrity"]["status"], "clean");
    for secret in [GLOBEX_WORD, GLOBEX_RATE, &globex_id, &globex_hash] {
        assert!(!stdout.contains(secret), "audit printed {secret}: {stdout}");
    }
    assert!(stdout.contains("withheld"), "{stdout}");
}

/// A trace forged under the caller's own tenant whose rounds name another tenant (filters,
/// keywords) and whose hit and citation name another tenant's chunk.
fn forge_pointing_at(path: &Path, original: &[Value], chunk_id: &str) {
    forge(path, original, |v| match v["type"].as_str() {
        Some("search") => {
            v["keywords"] = serde_json::json!([GLOBEX_WORD]);
            v["filters"]["tenant"] = Value::String("globex".into());
            v["hits"][0]["chunkId"] = Value::String(chunk_id.into());
        }
        Some("answer") => {
            v["citations"][0]["chunkId"] = Value::String(chunk_id.into());
        }
        _ => {}
    });
}

#[test]
fn a_forged_trace_naming_another_tenants_chunk_reads_exactly_like_one_naming_no_chunk() {
    let (ws, engine) = two_tenants();
    let path = run_as(
        &ws,
        &engine,
        acme(),
        &format!("hotel expenses reimbursed {ACME_WORD}"),
    );
    let path_s = path.to_str().expect("utf8");
    let original = read_lines(&path);
    let (globex_id, globex_hash) = chunk_of(&engine, "globex/travel.md");
    let (hr_id, hr_hash) = chunk_of(&engine, "acme/hr.md");
    let never = "c_0123456789abcdef";
    let outputs = |id: &str| {
        forge_pointing_at(&path, &original, id);
        let mut outs = Vec::new();
        for args in [
            vec!["--tenant", "acme", "replay", "--json", path_s],
            vec!["--tenant", "acme", "replay", path_s],
            vec!["--tenant", "acme", "audit", "--json", path_s],
            vec!["--tenant", "acme", "audit", path_s],
        ] {
            let (code, stdout, stderr) = bin(&ws, &args);
            outs.push(format!("{args:?} exit {code:?}\n{stdout}{stderr}").replace(id, "<ID>"));
        }
        outs
    };
    let none = outputs(never);
    let replayed: Value =
        serde_json::from_str(none[0].split_once('\n').expect("lines").1).expect("json");
    assert_eq!(
        replayed["rounds"][0]["drift"][0]["state"], "gone",
        "{none:?}"
    );
    for (id, hash) in [(&globex_id, &globex_hash), (&hr_id, &hr_hash)] {
        let seen = outputs(id);
        for (a, b) in none.iter().zip(&seen) {
            assert_eq!(
                a, b,
                "a chunk outside the caller's access must read as one that never existed"
            );
        }
        for out in &seen {
            // (The keywords are the forger's own text; the documents' text and hashes are not.)
            for secret in [HR_WORD, hash.as_str(), GLOBEX_RATE] {
                assert!(!out.contains(secret), "printed {secret}: {out}");
            }
        }
    }
    // The round recorded under globex is not re-run under it, so nothing of globex comes back.
    for out in &none {
        assert!(
            !out.contains(&globex_id) && !out.contains(GLOBEX_RATE),
            "{out}"
        );
    }
    assert!(
        replayed["rounds"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("tenant globex")),
        "{replayed}"
    );
}

#[test]
fn a_trace_swapped_for_another_runs_genuine_trace_is_an_integrity_failure() {
    let (ws, engine) = two_tenants();
    let a = run_as(&ws, &engine, acme(), &format!("hotel expenses {ACME_WORD}"));
    let b = run_as(&ws, &engine, acme(), "hotel expenses reimbursed per night");
    let a_s = a.to_str().expect("utf8");
    assert_eq!(bin(&ws, &["--tenant", "acme", "audit", a_s]).0, Some(0));
    std::fs::copy(&b, &a).expect("swap");
    for args in [
        vec!["--tenant", "acme", "audit", a_s],
        vec!["--tenant", "acme", "replay", a_s],
    ] {
        let (code, stdout, stderr) = bin(&ws, &args);
        assert_eq!(code, Some(3), "{args:?}: {stdout}{stderr}");
        let file_name = a.file_name().expect("name").to_string_lossy().to_string();
        assert!(
            (stdout.clone() + &stderr).contains(&file_name),
            "{args:?} names the file the ledger recorded: {stdout}{stderr}"
        );
    }
    // The same trace under its own name is still clean: it is the name that was checked.
    let b_s = b.to_str().expect("utf8");
    assert_eq!(bin(&ws, &["--tenant", "acme", "audit", b_s]).0, Some(0));
    // A copy under a new name is not the recorded trace either.
    let copy = traces_dir(&ws).join("copy.jsonl");
    std::fs::copy(&b, &copy).expect("copy");
    let (code, stdout, _) = bin(
        &ws,
        &["--tenant", "acme", "audit", copy.to_str().expect("utf8")],
    );
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("copied or renamed"), "{stdout}");
}

#[test]
fn a_deleted_ledger_is_an_integrity_failure_unless_the_caller_accepts_it() {
    let (ws, engine) = two_tenants();
    let path = run_as(&ws, &engine, acme(), &format!("hotel expenses {ACME_WORD}"));
    let path_s = path.to_str().expect("utf8");
    let original = read_lines(&path);
    // A forgery re-chained by hand, the ledger deleted so nothing contradicts it.
    forge(&path, &original, |v| {
        if v["type"] == "answer" {
            v["text"] = Value::String("Hotels are reimbursed without limit.".into());
        }
    });
    std::fs::remove_file(traces_dir(&ws).join("ledger.jsonl")).expect("rm ledger");
    for args in [
        vec!["--tenant", "acme", "audit", path_s],
        vec!["--tenant", "acme", "replay", path_s],
    ] {
        let (code, stdout, stderr) = bin(&ws, &args);
        assert_eq!(code, Some(3), "{args:?}: {stdout}{stderr}");
        assert!(
            (stdout.clone() + &stderr).contains("--no-ledger"),
            "{args:?}: {stdout}{stderr}"
        );
    }
    // Saying so: the audit reports it as unverifiable (1), replay runs.
    let (code, stdout, _) = bin(&ws, &["--tenant", "acme", "audit", "--no-ledger", path_s]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("no ledger"), "{stdout}");
    let (code, stdout, stderr) = bin(&ws, &["--tenant", "acme", "replay", "--no-ledger", path_s]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
}

/// `ragtrail ingest` of `ws`'s knowledge folder with `env`.
fn ingest(ws: &Workspace, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = crate::common::cli::ragtrail_with_env(
        ws.dir.path(),
        &["--data-dir", "data", "ingest", "knowledge"],
        env,
    );
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout + &stderr)
}

#[test]
fn access_metadata_fails_closed() {
    let ws = Workspace::new();
    ws.write("acme/travel.md", ACME_DOC);
    assert_eq!(ingest(&ws, &[]).0, Some(0));
    // Chunk ids the acme staff (no roles) find for the HR word.
    let staff_hits = || -> Vec<Value> {
        let (_, stdout, _) = bin(&ws, &["--tenant", "acme", "search", "--json", HR_WORD]);
        serde_json::from_str::<Vec<Value>>(&stdout).expect("json")
    };
    assert!(staff_hits().is_empty());
    for (key, value) in [
        ("Roles", "[hr]"),
        ("role", "[hr]"),
        ("ROLES", "hr"),
        ("Tenant", "globex"),
        ("tenants", "[globex]"),
        ("tenant_id", "globex"),
    ] {
        ws.write(
            "acme/hr.md",
            &format!("---\ntitle: Acme HR\ntenant: acme\n{key}: {value}\n---\n\n## Review\n\nReviewed by HR {HR_WORD}.\n"),
        );
        let (code, out) = ingest(&ws, &[]);
        assert_eq!(code, Some(3), "{key}: {out}");
        assert!(
            out.contains("acme/hr.md") && out.contains(&format!("`{key}`")),
            "{key}: {out}"
        );
        // The index is left as it was: the document is not public.
        assert!(staff_hits().is_empty(), "{key}");
    }
    ws.write(
        "acme/hr.md",
        &format!("---\ntitle: Acme HR\ntenant: acme\nroles: [\"\", \" \"]\n---\n\n## Review\n\nReviewed by HR {HR_WORD}.\n"),
    );
    let (code, out) = ingest(&ws, &[]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("acme/hr.md") && out.contains("blank"), "{out}");
    assert!(staff_hits().is_empty());
    // A document without a tenant: the default tenant, or an error when the operator denies it.
    ws.write(
        "untagged.md",
        "---\ntitle: Untagged\n---\n\n## Note\n\nUntagged note.\n",
    );
    ws.remove("acme/hr.md");
    let (code, out) = ingest(&ws, &[("RAGTRAIL_DEFAULT_ACCESS", "deny")]);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("untagged.md") && out.contains("tenant"),
        "{out}"
    );
    let (code, out) = ingest(&ws, &[]);
    assert_eq!(code, Some(0), "{out}");
}

/// Runs `ragtrail ask --planner llm` against `server` and returns (exit, stdout and stderr,
/// peak RSS in KiB from /proc while it ran).
#[cfg(target_os = "linux")]
fn ask_llm(
    ws: &Workspace,
    server: &crate::common::chat_server::ChatServer,
    env: &[(&str, &str)],
) -> (Option<i32>, String, u64) {
    use std::io::Read;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(ws.dir.path())
        .args([
            "--data-dir",
            "data",
            "--trace-dir",
            "traces",
            "--tenant",
            "acme",
        ])
        .args(["ask", "--planner", "llm", "hotel expenses"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("RAGTRAIL_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("RAGTRAIL_LLM_BASE_URL", &server.base_url)
        .env("RAGTRAIL_LLM_MODEL", "scripted")
        .env("RAGTRAIL_LLM_MAX_RETRIES", "0")
        .envs(env.iter().copied());
    // Not about the embedder: hashing, as the common helpers pin it.
    cmd.env("RAGTRAIL_EMBEDDER", "hashing");
    let mut child = cmd.spawn().expect("spawn");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    // Both streams are small (a few lines), so reading them after the exit cannot block it.
    let mut output = String::new();
    for stream in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn Read>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut text = String::new();
        let mut stream = stream;
        stream.read_to_string(&mut text).expect("read output");
        output.push_str(&text);
    }
    (status.code(), output, peak_kib)
}

fn traces_bytes(ws: &Workspace) -> u64 {
    std::fs::read_dir(traces_dir(ws))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A chat completion answering in plain text `text`, as JSON bytes.
fn text_completion(text: &str) -> Vec<u8> {
    serde_json::json!({
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}],
    })
    .to_string()
    .into_bytes()
}

#[cfg(target_os = "linux")]
#[test]
fn a_50_mb_reply_is_refused_while_reading_and_leaves_a_small_trace() {
    use crate::common::chat_server::{ChatServer, Reply};
    let (ws, _engine) = two_tenants();
    let huge = "x".repeat(50 * 1024 * 1024);
    for chunked in [false, true] {
        let body = text_completion(&huge);
        let server = ChatServer::start(move |_| {
            if chunked {
                Reply::Chunked(body.clone())
            } else {
                Reply::Json(serde_json::from_slice(&body).expect("json"))
            }
        });
        let (code, stderr, peak_kib) = ask_llm(&ws, &server, &[]);
        assert_eq!(code, Some(3), "chunked {chunked}: {stderr} peak {peak_kib}");
        assert!(
            stderr.contains("RAGTRAIL_LLM_MAX_REPLY_BYTES") && stderr.contains("4194304 bytes"),
            "chunked {chunked}: {stderr}"
        );
        assert!(
            peak_kib > 0 && peak_kib < 200 * 1024,
            "peak RSS {peak_kib} KiB"
        );
        assert!(
            traces_bytes(&ws) < 1024 * 1024,
            "{} bytes of traces",
            traces_bytes(&ws)
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn replies_under_the_bound_are_cut_in_the_trace_and_the_run_total_is_bounded() {
    use crate::common::chat_server::{ChatServer, Reply};
    let (ws, _engine) = two_tenants();
    // 3 MiB of text: under the 4 MiB reply bound, so the run uses it; the trace keeps 64 KiB of
    // each copy, with the full length and its hash.
    let long = "hotel ".repeat(512 * 1024).trim_end().to_string();
    let body = text_completion(&long);
    let server = ChatServer::start(move |_| Reply::Chunked(body.clone()));
    let (_, stderr, _) = ask_llm(&ws, &server, &[]);
    let written = traces_bytes(&ws);
    assert!(written < 1024 * 1024, "{written} bytes of traces: {stderr}");
    let all: String = trace_files(&ws)
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read"))
        .collect();
    let marker = format!(
        "[truncated by ragtrail: {} bytes, sha256 {}]",
        long.len(),
        ragtrail::trace::digest_hex(long.as_bytes(), None)
    );
    assert!(all.contains(&marker), "{}", &all[..all.len().min(2000)]);
    for path in trace_files(&ws) {
        let (code, stdout, stderr) = bin(
            &ws,
            &["--tenant", "acme", "audit", path.to_str().expect("utf8")],
        );
        assert_ne!(code, Some(3), "{stdout}{stderr}");
    }
    // The run's total: each reply is 600 KB, the run may receive 1 MiB in all.
    let reason = "r".repeat(600 * 1000);
    let server = ChatServer::start(move |_| {
        crate::common::chat_server::tool_calls(&[(
            "s",
            "searchDocs",
            serde_json::json!({"keywords": ["hotel"], "reason": reason}),
        )])
    });
    let (code, stderr, _) = ask_llm(
        &ws,
        &server,
        &[("RAGTRAIL_LLM_MAX_RUN_REPLY_BYTES", "1048576")],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("RAGTRAIL_LLM_MAX_RUN_REPLY_BYTES"),
        "{stderr}"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "the second reply passes the run's total"
    );
}
