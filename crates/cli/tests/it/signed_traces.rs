//! Signed traces: `keys generate` / `keys public`, every run signed once a key exists, and
//! `verify --public-key` catching what the hash chain and ledger cannot — a run rewritten and
//! re-chained by someone who can write the trace folder — plus runs removed from the ledger's
//! end, caught against a pinned head.

use std::path::{Path, PathBuf};

use crate::common::cli::{ragtrail, ragtrail_with_env, text};
use crate::common::{TRAVEL, Workspace, trace_lines, write_trace_lines};
use ragtrail::trace::{canonical_json, event_hash};
use serde_json::Value;

const QUESTION: &str = "高铁票报销需要什么凭证？";

fn setup() -> Workspace {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws
}

fn run(ws: &Workspace, args: &[&str]) -> (Option<i32>, String, String) {
    let out = ragtrail(ws.dir.path(), args);
    let (o, e) = text(&out);
    (out.status.code(), o, e)
}

fn ask(ws: &Workspace, question: &str) -> PathBuf {
    let (code, stdout, stderr) = run(ws, &["ask", question, "--today", "2026-11-30"]);
    assert!(code == Some(0) || code == Some(1), "{stdout}\n{stderr}");
    let trace = stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace: "))
        .expect("trace line");
    ws.dir.path().join(trace)
}

/// `keys generate`, and the public key written to `name` in the workspace.
fn generate(ws: &Workspace, name: &str) -> PathBuf {
    let (code, stdout, stderr) = run(ws, &["keys", "generate"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("ragtrail-ed25519 "), "{stdout}");
    let public = ws.dir.path().join(name);
    std::fs::write(&public, &stdout).expect("write public key");
    public
}

fn verify(ws: &Workspace, trace: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["verify".to_string(), trace.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run(ws, &args);
    (code, format!("{stdout}{stderr}"))
}

/// Re-hashes every line as a forger would: new `prevHash` links and `hash`es, other fields
/// (signatures included) as they were, unless `edit` changes them.
fn rechain(lines: &mut [String], mut edit: impl FnMut(usize, &mut Value)) -> String {
    let mut prev = ragtrail::trace::ZERO_HASH.to_string();
    for (i, line) in lines.iter_mut().enumerate() {
        let mut v: Value = serde_json::from_str(line).expect("json");
        edit(i, &mut v);
        v["prevHash"] = Value::String(prev.clone());
        let signature = v.as_object_mut().and_then(|m| m.remove("signature"));
        let h = event_hash(&v, None);
        v["hash"] = Value::String(h.clone());
        if let Some(s) = signature {
            v["signature"] = s;
        }
        *line = canonical_json(&v);
        prev = h;
    }
    prev
}

#[test]
fn a_generated_key_signs_every_run_and_a_third_party_verifies_with_the_public_key() {
    let ws = setup();
    let public = generate(&ws, "operator.pub");
    let secret = ws.data_dir_key();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret)
            .expect("key")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    let (_, printed, _) = run(&ws, &["keys", "public"]);
    assert_eq!(printed, std::fs::read_to_string(&public).expect("pub"));
    let (code, _, stderr) = run(&ws, &["keys", "generate"]);
    assert_eq!(code, Some(3), "never overwrites a key");
    assert!(stderr.contains("already there"), "{stderr}");

    let trace = ask(&ws, QUESTION);
    let ledger = trace_lines(&trace.with_file_name("ledger.jsonl"));
    let entry: Value = serde_json::from_str(ledger.last().expect("entry")).expect("json");
    let key_id = entry["keyId"].as_str().expect("keyId").to_string();
    assert_eq!(key_id.len(), 16);
    assert!(
        entry["runSignature"]
            .as_str()
            .is_some_and(|s| s.len() == 128)
    );
    assert!(entry["signature"].as_str().is_some_and(|s| s.len() == 128));
    // The signature is left out of the entry's hash, so audit's ledger check still holds.
    let (code, stdout, _) = run(&ws, &["audit", &trace.display().to_string()]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "signature: valid (the final hash and ledger entry seq 0 are signed by key {key_id})"
        )),
        "audit checks the signature with the data directory's key: {stdout}"
    );

    // Verified from elsewhere, with the public key and the trace folder only: no store.
    std::fs::remove_dir_all(ws.dir.path().join(".ragtrail")).expect("remove the store");
    let (code, out) = verify(
        &ws,
        &trace,
        &["--public-key", &public.display().to_string()],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("signature          ok  the final hash and ledger entry seq 0 are signed by key {key_id}")),
        "{out}"
    );
    assert!(out.contains("result: verified"), "{out}");
}

#[test]
fn a_trace_rechained_by_hand_passes_the_hash_check_but_fails_verify() {
    let ws = setup();
    let public = generate(&ws, "operator.pub");
    let trace = ask(&ws, QUESTION);
    let public = public.display().to_string();
    assert_eq!(verify(&ws, &trace, &["--public-key", &public]).0, Some(0));
    let ledger_path = trace.with_file_name("ledger.jsonl");
    let original_ledger = trace_lines(&ledger_path);

    // Edit a hit's snippet, re-chain the trace, and rewrite its ledger entry to match,
    // keeping the entry's signatures (the forger cannot make new ones).
    let mut t = trace_lines(&trace);
    let search = t
        .iter()
        .position(|l| l.contains("\"type\":\"search\""))
        .expect("search line");
    t[search] = t[search].replacen("\"snippet\":\"", "\"snippet\":\"截图亦可报销。", 1);
    let final_hash = rechain(&mut t, |_, _| {});
    write_trace_lines(&trace, &t);
    let mut l = original_ledger.clone();
    rechain(&mut l, |_, v| {
        v["finalHash"] = Value::String(final_hash.clone())
    });
    write_trace_lines(&ledger_path, &l);

    // The hash chain and the ledger agree, but audit checks the signature with the data
    // directory's key: invalid, an integrity failure.
    let (code, stdout, _) = run(&ws, &["audit", &trace.display().to_string()]);
    assert!(
        stdout.contains("integrity: clean"),
        "the forgery passes the hash check: {stdout}"
    );
    assert!(
        stdout
            .contains("signature: invalid (the signature of the run's final hash does not verify"),
        "{stdout}"
    );
    assert!(
        stdout.contains("result: integrity failure (invalid signature)"),
        "{stdout}"
    );
    assert_eq!(code, Some(3), "{stdout}");
    let (code, json, _) = run(&ws, &["audit", &trace.display().to_string(), "--json"]);
    assert_eq!(code, Some(3), "{json}");
    let report: Value = serde_json::from_str(&json).expect("audit json");
    assert_eq!(report["signature"]["state"], "invalid", "{report:#}");
    // A third party with the public key file alone gets the same verdict.
    let (code, stdout, _) = run(
        &ws,
        &[
            "--data-dir",
            "elsewhere",
            "audit",
            &trace.display().to_string(),
            "--public-key",
            &public,
        ],
    );
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("signature: invalid"), "{stdout}");
    // The signature does not.
    let (code, out) = verify(&ws, &trace, &["--public-key", &public]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("chain and ledger   ok"), "{out}");
    assert!(
        out.contains(
            "signature          FAILED  the signature of the run's final hash does not verify"
        ),
        "{out}"
    );

    // Dropping the signatures instead: an unsigned entry, named as such.
    let mut l = original_ledger.clone();
    rechain(&mut l, |_, v| {
        v["finalHash"] = Value::String(final_hash.clone());
        if let Some(m) = v.as_object_mut() {
            m.remove("keyId");
            m.remove("runSignature");
            m.remove("signature");
        }
    });
    write_trace_lines(&ledger_path, &l);
    let (code, stdout, _) = run(&ws, &["audit", &trace.display().to_string()]);
    assert_eq!(code, Some(1), "an unsigned run is a finding: {stdout}");
    assert!(stdout.contains("signature: unsigned ("), "{stdout}");
    assert!(
        stdout.contains("finding: the run is not signed"),
        "{stdout}"
    );
    let (code, out) = verify(&ws, &trace, &["--public-key", &public]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("is not signed"), "{out}");

    // Another key's public key does not verify the genuine trace either.
    let other = Workspace::new();
    other.write("finance/travel.md", TRAVEL);
    let other_public = generate(&other, "other.pub");
    write_trace_lines(&ledger_path, &original_ledger);
    let (code, out) = verify(
        &ws,
        &trace,
        &["--public-key", &other_public.display().to_string()],
    );
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("not by the given key"), "{out}");
}

#[test]
fn removing_the_last_run_is_caught_against_a_pinned_head() {
    let ws = setup();
    let public = generate(&ws, "operator.pub").display().to_string();
    let first = ask(&ws, QUESTION);
    let last = ask(&ws, "机票报销要什么凭证？");
    let (code, head, _) = run(&ws, &["ledger", "head"]);
    assert_eq!(code, Some(0));
    let head = head.trim().to_string();
    assert!(head.starts_with("1:"), "{head}");
    let pin = [
        "--public-key",
        public.as_str(),
        "--ledger-head",
        head.as_str(),
    ];
    let (code, out) = verify(&ws, &first, &pin);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("the ledger holds the pinned head"), "{out}");

    // The last run removed whole: its trace and its ledger line.
    std::fs::remove_file(&last).expect("remove trace");
    let ledger_path = first.with_file_name("ledger.jsonl");
    let mut l = trace_lines(&ledger_path);
    l.pop();
    write_trace_lines(&ledger_path, &l);
    // Every remaining check passes: nothing else can tell.
    let (code, out) = verify(&ws, &first, &["--public-key", &public]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = verify(&ws, &first, &pin);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("the ledger ends at seq 0, before the pinned head 1:"),
        "{out}"
    );
    let (code, out) = verify(&ws, &first, &["--ledger-head", "1:xyz"]);
    assert_eq!(code, Some(2), "a malformed head is a usage error: {out}");
}

#[test]
fn a_key_elsewhere_and_a_rotated_key_both_verify_with_their_own_public_keys() {
    let ws = setup();
    let first_public = generate(&ws, "first.pub").display().to_string();
    let first = ask(&ws, QUESTION);
    // Rotate: a new key in another place, named by RAGTRAIL_SIGNING_KEY.
    let elsewhere = ws.dir.path().join("keys/operator-2026-12");
    let env = [("RAGTRAIL_SIGNING_KEY", elsewhere.to_str().expect("utf-8"))];
    let out = ragtrail_with_env(ws.dir.path(), &["keys", "generate"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let second_public = ws.dir.path().join("second.pub");
    std::fs::write(&second_public, &out.stdout).expect("write");
    let second_public = second_public.display().to_string();
    let out = ragtrail_with_env(
        ws.dir.path(),
        &["ask", "机票报销要什么凭证？", "--today", "2026-11-30"],
        &env,
    );
    let stdout = text(&out).0;
    let second = ws.dir.path().join(
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("trace: "))
            .expect("trace"),
    );
    // Each run verifies with the key that signed it; the other key alone is refused.
    assert_eq!(
        verify(&ws, &first, &["--public-key", &first_public]).0,
        Some(0)
    );
    let (code, out) = verify(&ws, &second, &["--public-key", &first_public]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("not by the given key"), "{out}");
    let (code, out) = verify(
        &ws,
        &second,
        &[
            "--public-key",
            &first_public,
            "--public-key",
            &second_public,
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("2 of 2 ledger entries signed by the given key verify"),
        "{out}"
    );
    // A named key that does not exist is an error, not an unsigned run.
    let missing = [("RAGTRAIL_SIGNING_KEY", "/nonexistent/key")];
    let out = ragtrail_with_env(ws.dir.path(), &["ask", QUESTION], &missing);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out).1.contains("RAGTRAIL_SIGNING_KEY names it"),
        "{}",
        text(&out).1
    );
}

impl Workspace {
    /// The signing key's default place: `signing-key` in the default data directory.
    fn data_dir_key(&self) -> PathBuf {
        self.dir.path().join(".ragtrail/signing-key")
    }
}
