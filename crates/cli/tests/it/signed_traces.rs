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
    // Answered, evidence or refused: each run leaves a signed trace.
    assert!(matches!(code, Some(0 | 1 | 4)), "{stdout}\n{stderr}");
    let trace = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("trace: ")
                .or_else(|| l.strip_prefix("轨迹："))
        })
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
            .find_map(|l| {
                l.strip_prefix("trace: ")
                    .or_else(|| l.strip_prefix("轨迹："))
            })
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

/// Forges the run's ledger entry: `edit` changes it, then the ledger is re-chained (the
/// entry's `signature` kept as it was unless `edit` replaced it).
fn forge_ledger(trace: &Path, edit: impl FnMut(usize, &mut Value)) {
    let ledger = trace.with_file_name("ledger.jsonl");
    let mut l = trace_lines(&ledger);
    rechain(&mut l, edit);
    write_trace_lines(&ledger, &l);
}

/// The answer changed and the trace and its ledger entry re-chained, the entry's signatures
/// kept: what someone who can write the trace folder, but holds no key, can do.
fn forge_answer(trace: &Path) {
    let mut t = trace_lines(trace);
    let at = t
        .iter()
        .position(|l| l.contains("\"type\":\"answer\""))
        .or_else(|| t.iter().position(|l| l.contains("\"type\":\"search\"")))
        .expect("an answer or search line");
    t[at] = t[at].replacen("\"text\":\"", "\"text\":\"截图亦可报销。", 1);
    t[at] = t[at].replacen("\"snippet\":\"", "\"snippet\":\"截图亦可报销。", 1);
    let final_hash = rechain(&mut t, |_, _| {});
    write_trace_lines(trace, &t);
    forge_ledger(trace, |_, v| {
        v["finalHash"] = Value::String(final_hash.clone())
    });
}

/// Another well-formed Ed25519 signature (of something else), as a forger would put in.
fn other_signature() -> String {
    let key = ragtrail::trace::SigningKey::generate().expect("key");
    key.sign(b"not this run")
}

#[test]
fn the_http_audit_and_replay_judge_the_signature_as_the_cli_does() {
    use crate::common::server::{Serve, add_token, command, error_code};
    let ws = setup();
    let root = ws.dir.path();
    let out = command(root)
        .args(["keys", "generate"])
        .output()
        .expect("keys");
    assert!(out.status.success(), "{}", text(&out).1);
    let alice = add_token(root, "alice", "default", &[]);
    let serve = Serve::start(root);
    let (status, asked) = serve.post(
        "/v1/ask",
        &alice,
        serde_json::json!({ "question": QUESTION }),
    );
    assert_eq!(status, 200, "{asked}");
    let run_id = asked["runId"].as_str().expect("runId").to_string();
    let trace = root.join(asked["trace"].as_str().expect("trace"));
    let (status, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), &alice);
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["signature"]["state"], "valid", "{audit}");
    assert_eq!(audit["result"], "clean", "{audit}");

    forge_answer(&trace);
    // The command line's verdict...
    let out = command(root)
        .args(["audit", &trace.display().to_string(), "--json"])
        .output()
        .expect("audit");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out).0);
    let cli: Value = serde_json::from_slice(&out.stdout).expect("audit json");
    assert_eq!(
        cli["result"], "integrity failure (invalid signature)",
        "{cli}"
    );
    // ...is the server's, in JSON and in Markdown.
    let (status, audit) = serve.get(&format!("/v1/traces/{run_id}/audit"), &alice);
    assert_eq!(status, 200, "{audit}");
    assert_eq!(
        audit["integrity"]["status"], "clean",
        "the chain was re-made: {audit}"
    );
    assert_eq!(audit["signature"]["state"], "invalid", "{audit}");
    assert_eq!(audit["signature"], cli["signature"]);
    assert_eq!(
        audit["result"], "integrity failure (invalid signature)",
        "{audit}"
    );
    assert_eq!(audit["exitCode"], 3, "{audit}");
    let (_, markdown) = serve.get(
        &format!("/v1/traces/{run_id}/audit?format=markdown"),
        &alice,
    );
    let markdown = markdown.as_str().expect("markdown").to_string();
    assert!(markdown.contains("invalid"), "{markdown}");
    // The replay refuses it, as any tampered trace.
    let (status, err) = serve.post(
        &format!("/v1/traces/{run_id}/replay"),
        &alice,
        serde_json::json!({}),
    );
    assert_eq!(
        (status, error_code(&err)),
        (422, "integrity_failure"),
        "{err}"
    );
    assert!(
        err["error"]["message"].as_str().is_some_and(|m| m
            .contains("invalid signature: the signature of the run's final hash does not verify")),
        "{err}"
    );
}

#[test]
fn replay_refuses_a_trace_whose_signature_does_not_verify() {
    let ws = setup();
    generate(&ws, "operator.pub");
    let trace = ask(&ws, QUESTION);
    let trace_arg = trace.display().to_string();
    let ledger = trace.with_file_name("ledger.jsonl");
    let genuine_ledger = trace_lines(&ledger);
    let genuine_trace = trace_lines(&trace);
    let (code, _, stderr) = run(&ws, &["replay", &trace_arg]);
    assert_eq!(code, Some(0), "the genuine run reproduces: {stderr}");

    // A forged signature on the ledger entry (not covered by its hash: no re-chaining needed).
    let mut l = genuine_ledger.clone();
    let mut entry: Value = serde_json::from_str(l.last().expect("entry")).expect("json");
    entry["signature"] = Value::String(other_signature());
    *l.last_mut().expect("entry") = canonical_json(&entry);
    write_trace_lines(&ledger, &l);
    let (code, stdout, stderr) = run(&ws, &["replay", &trace_arg]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(
        stderr.contains("invalid signature: the signature of ledger entry seq 0 does not verify"),
        "{stderr}"
    );
    assert!(!stdout.contains("reproduced"), "{stdout}");

    // A forged run signature, the ledger re-chained over it.
    write_trace_lines(&ledger, &genuine_ledger);
    forge_ledger(&trace, |_, v| {
        v["runSignature"] = Value::String(other_signature())
    });
    let (code, _, stderr) = run(&ws, &["replay", &trace_arg]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("invalid signature"), "{stderr}");

    // The trace re-chained with its ledger entry.
    write_trace_lines(&ledger, &genuine_ledger);
    forge_answer(&trace);
    let (code, _, stderr) = run(&ws, &["replay", &trace_arg, "--json"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("invalid signature: the signature of the run's final hash does not verify"),
        "{stderr}"
    );
    write_trace_lines(&trace, &genuine_trace);
    write_trace_lines(&ledger, &genuine_ledger);
    assert_eq!(run(&ws, &["replay", &trace_arg]).0, Some(0));
}

#[test]
fn after_a_rotation_older_runs_verify_with_the_retired_key_in_the_keyring() {
    let ws = setup();
    let first_public = generate(&ws, "first.pub");
    let first = ask(&ws, QUESTION);
    let first_arg = first.display().to_string();
    let old_id = {
        let (_, listed, _) = run(&ws, &["keys", "list"]);
        listed
            .split_whitespace()
            .next()
            .expect("a key id")
            .to_string()
    };
    // The documented rotation: the old key moved away, a new one generated.
    std::fs::rename(ws.data_dir_key(), ws.dir.path().join("retired-signing-key")).expect("mv");
    generate(&ws, "second.pub");
    let second = ask(&ws, "机票报销要什么凭证？");

    let (code, stdout, _) = run(&ws, &["audit", &first_arg]);
    assert_eq!(code, Some(0), "a genuine older run is clean: {stdout}");
    assert!(
        stdout.contains(&format!(
            "signature: valid (the final hash and ledger entry seq 0 are signed by key {old_id})"
        )),
        "{stdout}"
    );
    assert_eq!(
        run(&ws, &["audit", &second.display().to_string()]).0,
        Some(0)
    );
    let (_, listed, _) = run(&ws, &["keys", "list"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.starts_with(&format!("{old_id}  ragtrail-ed25519 ")),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .nth(1)
            .is_some_and(|l| l.ends_with("(signing now)")),
        "{listed}"
    );

    // The operator withdraws trust in the old key: its runs are "signed by a key not at hand",
    // a finding, not tampering.
    std::fs::remove_file(ws.dir.path().join(".ragtrail/keyring")).expect("rm keyring");
    let (code, stdout, _) = run(&ws, &["audit", &first_arg]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "signature: key not at hand (the run was signed by key {old_id}"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "finding: the run was signed by a key not at hand ({old_id})"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("result: findings"), "{stdout}");
    assert!(!stdout.contains("invalid"), "{stdout}");
    let (code, json, _) = run(&ws, &["audit", &first_arg, "--json"]);
    assert_eq!(code, Some(1));
    let report: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        report["signature"]["state"], "key not at hand",
        "{report:#}"
    );
    // Replay warns and replays: nothing says the run was altered.
    let (code, _, stderr) = run(&ws, &["replay", &first_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: signature key not at hand"),
        "{stderr}"
    );
    // Trusted again from its public key file.
    let (code, _, stderr) = run(&ws, &["keys", "trust", &first_public.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("key {old_id} added to the keyring")),
        "{stderr}"
    );
    assert_eq!(run(&ws, &["audit", &first_arg]).0, Some(0));
}

#[test]
fn a_trace_left_empty_by_a_failed_write_is_incomplete_unless_the_ledger_recorded_it() {
    let ws = setup();
    let trace = ask(&ws, QUESTION);
    let dir = trace.parent().expect("traces").to_path_buf();
    let genuine = std::fs::read(&trace).expect("read");
    let first_line = genuine.iter().position(|b| *b == b'\n').expect("a line");
    // What the writer leaves when its first write fails (a full disk): the file it created,
    // empty or holding the start of its first line, and no ledger entry.
    let unrecorded = |name: &str, bytes: &[u8]| {
        let path = dir.join(format!(
            "20261204T000000Z-019aeb1e-{name}-7000-8000-000000000000.jsonl"
        ));
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    for (name, bytes) in [
        ("0000", &genuine[..0]),
        ("0001", &genuine[..first_line / 2]),
    ] {
        let path = unrecorded(name, bytes);
        let (code, stdout, stderr) = run(&ws, &["audit", &path]);
        assert_eq!(code, Some(1), "{} bytes: {stdout}{stderr}", bytes.len());
        assert!(stdout.contains("integrity: incomplete"), "{stdout}");
        assert!(stdout.contains("incomplete: the write failed"), "{stdout}");
        assert!(stdout.contains("result: findings"), "{stdout}");
        let (code, _, stderr) = run(&ws, &["replay", &path]);
        assert_eq!(code, Some(3), "nothing to replay: {stderr}");
        assert!(stderr.contains("holds no run to replay"), "{stderr}");
    }
    // The same bytes where the ledger recorded a finished run: emptied after the fact.
    let trace_arg = trace.display().to_string();
    for bytes in [&genuine[..0], &genuine[..first_line / 2]] {
        std::fs::write(&trace, bytes).expect("truncate");
        let (code, stdout, stderr) = run(&ws, &["audit", &trace_arg]);
        assert_eq!(code, Some(3), "{stdout}{stderr}");
        assert!(
            format!("{stdout}{stderr}").contains("lines were removed after the run finished"),
            "{stdout}{stderr}"
        );
    }
}
