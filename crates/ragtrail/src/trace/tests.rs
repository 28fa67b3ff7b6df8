//! End-to-end tests on real files: writing, reading, and catching every kind of tampering.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tempfile::TempDir;
use uuid::Uuid;

use super::*;
use crate::access::AccessContext;

const KEY: &[u8] = b"operator trace key";

fn hit(chunk: &str, score: f64) -> TracedHit {
    TracedHit {
        hit: HitRecord {
            chunk_id: chunk.to_string(),
            title_path: "Leave policy > Annual leave".to_string(),
            snippet: format!("Employees accrue 年假 per month ({chunk})"),
            source_uri: "knowledge/leave.md".to_string(),
            score,
            metadata: BTreeMap::from([("effective".to_string(), "2026-01-01".to_string())]),
        },
        content_hash: format!("{:064x}", chunk.len()),
    }
}

fn run_started() -> EventBody {
    EventBody::RunStarted(RunStarted {
        question: "How many days of annual leave do I get?".to_string(),
        options: json!({"maxRounds": 3, "topK": 5}),
        access: AccessContext {
            tenant: "acme".to_string(),
            roles: vec!["hr".to_string()],
        },
        planner: "llm".to_string(),
        model: Some("small-chat".to_string()),
        embedder: EmbedderInfo {
            kind: "hash".to_string(),
            model: "fnv".to_string(),
            dims: 64,
            ..Default::default()
        },
        index_fingerprint: "idx-1".to_string(),
        version: "0.1.0".to_string(),
        today: "2026-11-30".to_string(),
        session_id: None,
        turn: Some(1),
        knowledge_base: String::new(),
        earlier_turns: Vec::new(),
        caller: None,
    })
}

fn search(round: u32, hits: Vec<TracedHit>) -> EventBody {
    EventBody::Search(SearchRound {
        round,
        keywords: vec!["annual leave".to_string(), format!("round {round}")],
        reason: "find the accrual rule".to_string(),
        top_k: 5,
        fusion: "rrf".to_string(),
        weights: None,
        filters: SearchFilters {
            tenant: "acme".to_string(),
            roles: vec!["hr".to_string()],
            include_superseded: false,
        },
        legs: BTreeMap::from([
            (
                "bm25".to_string(),
                LegRecord {
                    count: 2,
                    latency_ms: 3.25,
                },
            ),
            (
                "dense".to_string(),
                LegRecord {
                    count: 1,
                    latency_ms: 7.5,
                },
            ),
        ]),
        hits,
        sufficiency: SufficiencyRecord {
            sufficient: round > 1,
            reason: "accrual found".to_string(),
            ..SufficiencyRecord::default()
        },
        repeated: round > 1,
        cached: None,
        query: None,
        overrode_give_up: None,
    })
}

/// The events of a complete run, before `run_finished`. Floats avoid forms like `3.0`, whose
/// `3e0` spelling is the same number and so (rightly) hashes the same.
fn run_bodies() -> Vec<EventBody> {
    vec![
        run_started(),
        EventBody::LlmTurn(LlmTurn {
            turn: 1,
            output: json!({"toolCalls": [{"name": "searchDocs", "keywords": ["annual leave"]}]}),
            message_count: Some(2),
            usage: Some(TokenUsage {
                prompt_tokens: 120,
                completion_tokens: 14,
            }),
            latency_ms: 12.5,
            retries: 0,
            finish_reason: Some("tool_calls".into()),
            reply: None,
            note: None,
            context_fit: None,
        }),
        search(1, vec![hit("c1", 0.5), hit("c2", 0.25)]),
        search(2, vec![hit("c3", 0.75)]),
        EventBody::Answer(AnswerEvent {
            text: "You accrue 2 days per month.".to_string(),
            citations: vec![Citation {
                chunk_id: "c1".to_string(),
                quote: "accrue".to_string(),
                title_path: "Leave policy > Annual leave".to_string(),
                source_uri: "knowledge/leave.md".to_string(),
            }],
            grounded: true,
            refused: vec![RefusedCitation {
                chunk_id: "c9".to_string(),
                quote: "never returned".to_string(),
                reason: "not in hits".to_string(),
            }],
            unsourced: false,
        }),
    ]
}

struct Run {
    dir: TempDir,
    finished: FinishedTrace,
    events: Vec<TraceEvent>,
}

impl Run {
    fn file_name(&self) -> String {
        file_name(&self.finished.path)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn write_run(key: Option<&[u8]>) -> Run {
    let dir = TempDir::new().unwrap();
    let mut writer =
        TraceWriter::create(dir.path(), Uuid::now_v7(), key.map(<[u8]>::to_vec)).unwrap();
    let mut events: Vec<TraceEvent> = run_bodies()
        .into_iter()
        .map(|b| writer.append(b).unwrap())
        .collect();
    let last = writer.last_hash().to_string();
    let finished = writer
        .finish(RunStatus::Answered, "answered", 2, 2)
        .unwrap();
    let trace = read_trace(&finished.path).unwrap();
    assert_eq!(trace.lines[trace.lines.len() - 2].event.hash, last);
    events.push(trace.lines.last().unwrap().event.clone());
    Run {
        dir,
        finished,
        events,
    }
}

fn raw_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(str::to_string).collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// Recomputes `hash` of a value by hand, as a forger (or a newer writer) would.
fn rehash(mut value: Value, key: Option<&[u8]>) -> String {
    let map = value.as_object_mut().unwrap();
    map.remove("hash");
    let hash = event_hash(&value, key);
    value
        .as_object_mut()
        .unwrap()
        .insert("hash".to_string(), Value::String(hash));
    canonical_json(&value)
}

/// Re-chains every line: new seq, prevHash and hash throughout, as a full rewrite would.
fn rechain(values: Vec<Value>, key: Option<&[u8]>) -> Vec<String> {
    rechain_with(values, key, true)
}

fn rechain_with(values: Vec<Value>, key: Option<&[u8]>, renumber: bool) -> Vec<String> {
    let mut prev = ZERO_HASH.to_string();
    values
        .into_iter()
        .enumerate()
        .map(|(seq, mut value)| {
            if renumber {
                value["seq"] = json!(seq);
            }
            value["prevHash"] = json!(prev);
            let line = rehash(value, key);
            let parsed: Value = serde_json::from_str(&line).unwrap();
            prev = parsed["hash"].as_str().unwrap().to_string();
            line
        })
        .collect()
}

fn values(path: &Path) -> Vec<Value> {
    raw_lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tampered_copy(run: &Run, lines: &[String]) -> PathBuf {
    let path = run.dir.path().join("tampered.jsonl");
    write_lines(&path, lines);
    path
}

fn check(run: &Run, path: &Path, key: Option<&[u8]>) -> (ChainReport, LedgerCheck, Verdict) {
    let trace = read_trace(path).unwrap();
    let chain = verify_chain(&trace, key);
    let ledger = check_ledger(run.dir.path(), &trace, &run.file_name(), key).unwrap();
    let verdict = assess(&chain, &ledger);
    (chain, ledger, verdict)
}

fn problem_at(chain: &ChainReport) -> (usize, ProblemKind) {
    let problem = chain
        .problem
        .clone()
        .unwrap_or_else(|| panic!("no problem found: {chain:?}"));
    (problem.line, problem.kind)
}

#[test]
fn a_written_run_reads_back_verifies_and_matches_the_ledger() {
    let run = write_run(None);
    let trace = read_trace(&run.finished.path).unwrap();
    let read: Vec<TraceEvent> = trace.events().cloned().collect();
    assert_eq!(read, run.events);
    assert_eq!(trace.torn_tail, None);
    assert_eq!(run.finished.lines, 6);
    assert_eq!(trace.final_hash(), Some(run.finished.final_hash.as_str()));
    // Payloads survive unchanged, including the flattened hit and optional fields.
    assert_eq!(
        read[2].body,
        search(1, vec![hit("c1", 0.5), hit("c2", 0.25)])
    );
    assert_eq!(read[0].body, run_started());
    let EventBody::RunFinished(finished) = &read[5].body else {
        panic!("last is not run_finished")
    };
    assert_eq!(
        (finished.status, finished.lines, finished.reason.as_str()),
        (RunStatus::Answered, 6, "answered")
    );

    // Envelope: v, seq, one runId, chained hashes, and each line in canonical form.
    for (i, line) in trace.lines.iter().enumerate() {
        assert_eq!(line.line_no, i + 1);
        assert_eq!(line.event.v, 1);
        assert_eq!(line.event.seq, i as u64);
        assert_eq!(line.event.run_id, read[0].run_id);
        let expected_prev = if i == 0 {
            ZERO_HASH
        } else {
            trace.lines[i - 1].event.hash.as_str()
        };
        assert_eq!(line.event.prev_hash, expected_prev);
        assert_eq!(event_hash(&line.value, None), line.event.hash);
    }
    for (raw, line) in raw_lines(&run.finished.path).iter().zip(&trace.lines) {
        assert_eq!(raw, &canonical_json(&line.value));
        let ts = line.value["ts"].as_str().unwrap();
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && &ts[19..20] == ".",
            "{ts}"
        );
    }
    let name = run.file_name();
    assert!(
        name.ends_with(&format!("-{}.jsonl", read[0].run_id)),
        "{name}"
    );
    assert_eq!(name.find('T'), Some(8), "{name}");

    let (chain, ledger, verdict) = check(&run, &run.finished.path, None);
    assert_eq!(chain.status(), ChainStatus::Valid, "{chain:?}");
    assert_eq!(ledger, LedgerCheck::Matches { ledger_line: 1 });
    assert_eq!((verdict, verdict.exit_code()), (Verdict::Clean, 0));
}

#[test]
fn any_flipped_byte_in_a_line_is_detected() {
    let run = write_run(None);
    let original = std::fs::read(&run.finished.path).unwrap();
    let mut offsets = vec![0usize];
    offsets.extend(
        original
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    let target = run.dir.path().join("flipped.jsonl");
    let strategy = (any::<Index>(), any::<Index>(), 1u8..=255);
    let mut runner = TestRunner::new(Config {
        cases: 512,
        ..Config::default()
    });
    let outcome = runner.run(&strategy, |(line_pick, byte_pick, mask)| {
        let line = line_pick.index(offsets.len() - 1);
        let (start, end) = (offsets[line], offsets[line + 1] - 1); // content, without its newline
        let at = start + byte_pick.index(end - start);
        let mut bytes = original.clone();
        bytes[at] ^= mask;
        std::fs::write(&target, &bytes).unwrap();
        let line_no = line + 1;
        match read_trace(&target) {
            Err(TraceError::Malformed { line, .. }) => prop_assert_eq!(line, line_no),
            Err(TraceError::UnsupportedVersion { .. }) => {}
            Err(other) => return Err(TestCaseError::fail(format!("unexpected error {other}"))),
            Ok(trace) => {
                let chain = verify_chain(&trace, None);
                let problem = chain.problem.clone();
                prop_assert!(
                    problem
                        .as_ref()
                        .is_some_and(|p| p.line == line_no || p.line == line_no + 1),
                    "flip at line {} byte {} not pinned: {:?}",
                    line_no,
                    at - start,
                    problem
                );
                let ledger = check_ledger(run.dir.path(), &trace, &run.file_name(), None).unwrap();
                prop_assert_eq!(assess(&chain, &ledger), Verdict::IntegrityFailure);
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[test]
fn deleted_swapped_and_forged_lines_are_pinned_to_their_line() {
    let run = write_run(None);
    let lines = raw_lines(&run.finished.path);

    let mut deleted = lines.clone();
    deleted.remove(2); // line 3
    let (chain, _, verdict) = check(&run, &tampered_copy(&run, &deleted), None);
    assert!(
        matches!(problem_at(&chain), (3, ProblemKind::BrokenLink { .. })),
        "{chain:?}"
    );
    assert_eq!(verdict, Verdict::IntegrityFailure);

    let mut swapped = lines.clone();
    swapped.swap(2, 3); // lines 3 and 4
    let (chain, _, verdict) = check(&run, &tampered_copy(&run, &swapped), None);
    assert!(
        matches!(problem_at(&chain), (3, ProblemKind::BrokenLink { .. })),
        "{chain:?}"
    );
    assert_eq!(verdict, Verdict::IntegrityFailure);

    // Forge line 4: change a hit's score and recompute that line's hash only.
    let mut forged = lines.clone();
    let mut value: Value = serde_json::from_str(&lines[3]).unwrap();
    value["hits"][0]["score"] = json!(0.875);
    forged[3] = rehash(value, None);
    let (chain, _, verdict) = check(&run, &tampered_copy(&run, &forged), None);
    let (line, kind) = problem_at(&chain);
    assert_eq!(line, 5, "{kind}");
    let forged_hash = serde_json::from_str::<Value>(&forged[3]).unwrap()["hash"].clone();
    assert_eq!(
        kind,
        ProblemKind::BrokenLink {
            expected: forged_hash.as_str().unwrap().to_string(),
            found: serde_json::from_str::<Value>(&lines[3]).unwrap()["hash"]
                .as_str()
                .unwrap()
                .to_string(),
        }
    );
    assert_eq!(verdict, Verdict::IntegrityFailure);

    // Editing without re-hashing fails on the edited line itself.
    let mut edited = lines.clone();
    edited[1] = edited[1].replace("\"retries\":0", "\"retries\":4");
    let (chain, _, _) = check(&run, &tampered_copy(&run, &edited), None);
    assert!(
        matches!(problem_at(&chain), (2, ProblemKind::HashMismatch { .. })),
        "{chain:?}"
    );
}

#[test]
fn a_clean_cut_of_the_last_lines_is_an_integrity_failure_not_a_crash() {
    let run = write_run(None);
    let mut lines = raw_lines(&run.finished.path);
    lines.truncate(lines.len() - 2);
    let (chain, ledger, verdict) = check(&run, &tampered_copy(&run, &lines), None);
    assert_eq!(chain.status(), ChainStatus::Incomplete, "{chain:?}");
    assert_eq!(problem_at(&chain), (5, ProblemKind::MissingRunFinished));
    assert_eq!(
        ledger,
        LedgerCheck::LinesDiffer {
            ledger: 6,
            actual: 4
        }
    );
    assert_eq!(
        (verdict, verdict.exit_code()),
        (Verdict::IntegrityFailure, 3)
    );
}

#[test]
fn a_consistently_rewritten_trace_is_caught_by_the_ledger() {
    let run = write_run(None);
    let mut vals = values(&run.finished.path);
    vals[3]["hits"][0]["snippet"] = json!("Employees accrue 5 days per month");
    let rewritten = rechain(vals, None);
    let (chain, ledger, verdict) = check(&run, &tampered_copy(&run, &rewritten), None);
    assert_eq!(chain.status(), ChainStatus::Valid, "{chain:?}");
    assert!(
        matches!(ledger, LedgerCheck::FinalHashDiffers { .. }),
        "{ledger:?}"
    );
    assert_eq!(verdict, Verdict::IntegrityFailure);
}

#[test]
fn with_a_trace_key_a_rewrite_without_the_key_fails_the_hmac_check() {
    let run = write_run(Some(KEY));
    let (chain, ledger, verdict) = check(&run, &run.finished.path, Some(KEY));
    assert_eq!(
        (chain.status(), &ledger, verdict),
        (
            ChainStatus::Valid,
            &LedgerCheck::Matches { ledger_line: 1 },
            Verdict::Clean
        )
    );
    // Without the key the keyed hashes do not verify.
    let (chain, _, _) = check(&run, &run.finished.path, None);
    assert!(
        matches!(problem_at(&chain), (1, ProblemKind::HashMismatch { .. })),
        "{chain:?}"
    );

    let mut vals = values(&run.finished.path);
    vals[2]["hits"][0]["snippet"] = json!("Employees accrue 5 days per month");
    let rewritten = rechain(vals, None);
    let (chain, _, verdict) = check(&run, &tampered_copy(&run, &rewritten), Some(KEY));
    assert_eq!(problem_at(&chain), (1, ProblemKind::WrittenWithoutKey));
    assert_eq!(verdict, Verdict::IntegrityFailure);
    // A rewrite with a guessed key fails the same way, just less politely.
    let guessed = rechain(values(&run.finished.path), Some(b"guess"));
    let (chain, _, _) = check(&run, &tampered_copy(&run, &guessed), Some(KEY));
    assert!(
        matches!(problem_at(&chain), (1, ProblemKind::HashMismatch { .. })),
        "{chain:?}"
    );
}

#[test]
fn a_torn_last_line_is_an_incomplete_run_not_tampering() {
    let dir = TempDir::new().unwrap();
    let mut writer = TraceWriter::create(dir.path(), Uuid::now_v7(), None).unwrap();
    for body in run_bodies().into_iter().take(3) {
        writer.append(body).unwrap();
    }
    let path = writer.path().to_path_buf();
    drop(writer); // the process "crashes": no run_finished, no ledger entry
    let bytes = std::fs::read(&path).unwrap();
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (bytes.len() - last_start) / 2;
    std::fs::write(&path, &bytes[..cut]).unwrap();

    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.torn_tail, Some(3));
    assert_eq!(trace.lines.len(), 2);
    let chain = verify_chain(&trace, None);
    assert_eq!(chain.status(), ChainStatus::Incomplete);
    assert_eq!(problem_at(&chain), (3, ProblemKind::MissingRunFinished));
    // No run has finished in this directory yet, so there is no ledger at all.
    let ledger = check_ledger(dir.path(), &trace, &file_name(&path), None).unwrap();
    assert_eq!(ledger, LedgerCheck::LedgerMissing);
    assert_eq!(assess(&chain, &ledger), Verdict::Findings);
    // Once another run has finished, the ledger exists and simply has no entry for this one.
    write_run_in(dir.path());
    let ledger = check_ledger(dir.path(), &trace, &file_name(&path), None).unwrap();
    assert!(
        matches!(ledger, LedgerCheck::NotInLedger { .. }),
        "{ledger:?}"
    );
    assert_eq!((assess(&chain, &ledger).exit_code()), 1);
}

fn write_run_in(dir: &Path) -> FinishedTrace {
    let mut writer = TraceWriter::create(dir, Uuid::now_v7(), None).unwrap();
    writer.append(run_started()).unwrap();
    writer
        .finish(RunStatus::InsufficientEvidence, "no_relevant_hits", 0, 0)
        .unwrap()
}

#[test]
fn a_finished_trace_missing_from_the_ledger_is_an_integrity_failure() {
    let run = write_run(None);
    let other = TempDir::new().unwrap();
    let foreign = write_run_in(other.path());
    let trace = read_trace(&foreign.path).unwrap();
    let chain = verify_chain(&trace, None);
    let ledger = check_ledger(run.dir.path(), &trace, &file_name(&foreign.path), None).unwrap();
    assert_eq!(
        ledger,
        LedgerCheck::NotInLedger {
            note: NOT_IN_LEDGER_NOTE
        }
    );
    assert_eq!(assess(&chain, &ledger), Verdict::IntegrityFailure);
}

#[test]
fn unknown_fields_and_event_types_still_read_and_verify() {
    let run = write_run(None);
    let mut vals = values(&run.finished.path);
    vals[2]["rerankerModel"] = json!({"name": "future", "version": 2});
    let future_event = json!({
        "v": 1, "runId": vals[0]["runId"], "seq": 0, "ts": "2026-11-30T06:25:01.500Z",
        "type": "tool_audit", "prevHash": "", "tool": "calculator", "args": [1, 2],
    });
    vals.insert(4, future_event);
    let finished = vals.len() - 1;
    vals[finished]["lines"] = json!(vals.len());
    let lines = rechain(vals, None);
    let path = tampered_copy(&run, &lines);

    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.lines.len(), 7);
    let EventBody::Search(search) = &trace.lines[2].event.body else {
        panic!("line 3 is not a search")
    };
    assert_eq!(search.round, 1);
    assert_eq!(
        trace.lines[2].value["rerankerModel"]["name"],
        json!("future")
    );
    let EventBody::Unknown(fields) = &trace.lines[4].event.body else {
        panic!("line 5 is not unknown")
    };
    assert_eq!(trace.lines[4].event.body.type_name(), "tool_audit");
    assert_eq!(fields.get("tool"), Some(&json!("calculator")));
    let chain = verify_chain(&trace, None);
    assert_eq!(chain.status(), ChainStatus::Valid, "{chain:?}");

    // The unknown parts are covered by the hash all the same.
    let mut edited = lines.clone();
    edited[4] = edited[4].replace("calculator", "calculatoR");
    let (chain, _, _) = check(&run, &tampered_copy(&run, &edited), None);
    assert!(
        matches!(problem_at(&chain), (5, ProblemKind::HashMismatch { .. })),
        "{chain:?}"
    );
}

#[test]
fn a_newer_major_version_is_refused_with_an_upgrade_hint() {
    let run = write_run(None);
    let mut vals = values(&run.finished.path);
    vals[0]["v"] = json!(2);
    let path = tampered_copy(&run, &rechain(vals, None));
    let err = read_trace(&path).unwrap_err();
    assert!(
        matches!(
            err,
            TraceError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade ragtrail"), "{err}");
}

#[test]
fn malformed_and_empty_files_are_errors() {
    let run = write_run(None);
    let mut lines = raw_lines(&run.finished.path);
    lines[1].truncate(20); // a broken line that is not the last one
    let err = read_trace(&tampered_copy(&run, &lines)).unwrap_err();
    assert!(
        matches!(err, TraceError::Malformed { line: 2, .. }),
        "{err:?}"
    );
    assert_eq!(
        Verdict::for_read_error(&err).map(Verdict::exit_code),
        Some(3)
    );

    let path = run.dir.path().join("empty.jsonl");
    std::fs::write(&path, "").unwrap();
    assert!(matches!(read_trace(&path), Err(TraceError::Empty { .. })));

    // A whole last line that only lost its newline is not torn.
    let bytes = std::fs::read(&run.finished.path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let trace = read_trace(&path).unwrap();
    assert_eq!((trace.lines.len(), trace.torn_tail), (6, None));
}

#[test]
fn writer_refuses_events_that_would_not_verify() {
    let dir = TempDir::new().unwrap();
    let mut writer = TraceWriter::create(dir.path(), Uuid::now_v7(), None).unwrap();
    assert!(matches!(
        writer.append(search(1, vec![])),
        Err(TraceError::Misuse(_))
    ));
    writer.append(run_started()).unwrap();
    assert!(matches!(
        writer.append(run_started()),
        Err(TraceError::Misuse(_))
    ));
    let finished = EventBody::RunFinished(RunFinished {
        status: RunStatus::Answered,
        reason: String::new(),
        rounds: 0,
        searches: 0,
        lines: 2,
    });
    assert!(matches!(
        writer.append(finished),
        Err(TraceError::Misuse(_))
    ));
    assert_eq!(writer.lines(), 1);
    // The key never shows in debug output.
    let keyed = TraceWriter::create(dir.path(), Uuid::now_v7(), Some(KEY.to_vec())).unwrap();
    assert!(!format!("{keyed:?}").contains("operator"));
}

#[cfg(unix)]
#[test]
fn trace_and_ledger_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let run = write_run(None);
    for path in [
        run.finished.path.clone(),
        run.dir.path().join(LEDGER_FILE_NAME),
    ] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

#[test]
fn concurrent_finishes_keep_one_ledger_chain() {
    const THREADS: usize = 6;
    const RUNS: usize = 4;
    let dir = TempDir::new().unwrap();
    let finished: Vec<FinishedTrace> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..RUNS)
                        .map(|_| {
                            let mut writer =
                                TraceWriter::create(dir.path(), Uuid::now_v7(), Some(KEY.to_vec()))
                                    .unwrap();
                            writer.append(run_started()).unwrap();
                            writer.append(search(1, vec![hit("c1", 0.5)])).unwrap();
                            writer
                                .finish(RunStatus::Answered, "answered", 1, 1)
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let ledger = read_ledger(&ledger_path(dir.path())).unwrap();
    assert_eq!(ledger.entries.len(), THREADS * RUNS);
    assert_eq!(verify_ledger(&ledger, Some(KEY)), None);
    let mut seqs: Vec<u64> = finished.iter().map(|f| f.ledger_seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..(THREADS * RUNS) as u64).collect::<Vec<_>>());
    for f in &finished {
        let trace = read_trace(&f.path).unwrap();
        let check = check_ledger(dir.path(), &trace, &file_name(&f.path), Some(KEY)).unwrap();
        assert!(matches!(check, LedgerCheck::Matches { .. }), "{check:?}");
    }
}

#[test]
fn a_torn_ledger_tail_is_appended_after_and_still_verifies() {
    let run = write_run(None);
    let ledger_file = run.dir.path().join(LEDGER_FILE_NAME);
    let mut bytes = std::fs::read(&ledger_file).unwrap();
    bytes.extend_from_slice(br#"{"v":1,"seq":1,"ts":"2026-"#);
    std::fs::write(&ledger_file, &bytes).unwrap();
    let second = write_run_in(run.dir.path());
    assert_eq!(second.ledger_seq, 1);

    let ledger = read_ledger(&ledger_file).unwrap();
    assert_eq!(ledger.torn_lines, vec![2]);
    assert_eq!(
        ledger.entries.iter().map(|l| l.line_no).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(verify_ledger(&ledger, None), None);
    let trace = read_trace(&second.path).unwrap();
    let check = check_ledger(&ledger_file, &trace, &file_name(&second.path), None).unwrap();
    assert_eq!(check, LedgerCheck::Matches { ledger_line: 3 });
}

#[test]
fn an_edited_or_dropped_ledger_entry_breaks_the_ledger() {
    let run = write_run(None);
    let _second = write_run_in(run.dir.path());
    let third = write_run_in(run.dir.path());
    let ledger_file = run.dir.path().join(LEDGER_FILE_NAME);
    let lines = raw_lines(&ledger_file);
    let trace = read_trace(&third.path).unwrap();

    let mut edited = lines.clone();
    edited[0] = edited[0].replace("\"lines\":6", "\"lines\":4");
    write_lines(&ledger_file, &edited);
    let check = check_ledger(run.dir.path(), &trace, &file_name(&third.path), None).unwrap();
    assert!(
        matches!(
            check,
            LedgerCheck::LedgerBroken {
                line: 1,
                problem: ProblemKind::HashMismatch { .. }
            }
        ),
        "{check:?}"
    );

    let mut dropped = lines.clone();
    dropped.remove(1);
    write_lines(&ledger_file, &dropped);
    let check = check_ledger(run.dir.path(), &trace, &file_name(&third.path), None).unwrap();
    assert!(
        matches!(
            check,
            LedgerCheck::LedgerBroken {
                line: 2,
                problem: ProblemKind::BrokenLink { .. }
            }
        ),
        "{check:?}"
    );
    assert_eq!(
        assess(&verify_chain(&trace, None), &check),
        Verdict::IntegrityFailure
    );
}

#[test]
fn scores_whose_text_does_not_parse_back_exactly_still_verify() {
    // Fused scores such as 1/61 + 1/63 print with 17 digits; serde_json's default parser can land
    // one ulp away from them, so the writer must hash what a reader will parse.
    let dir = TempDir::new().unwrap();
    let mut writer = TraceWriter::create(dir.path(), Uuid::now_v7(), None).unwrap();
    writer.append(run_started()).unwrap();
    let hits: Vec<TracedHit> = (0..200u32)
        .map(|i| {
            hit(
                &format!("c{i}"),
                1.0 / (61.0 + f64::from(i)) + 1.0 / (60.0 + f64::from(i % 7) * 3.0),
            )
        })
        .collect();
    let written = writer.append(search(1, hits)).unwrap();
    let finished = writer
        .finish(RunStatus::Answered, "answered", 1, 1)
        .unwrap();
    let trace = read_trace(&finished.path).unwrap();
    assert_eq!(trace.lines[1].event, written);
    let chain = verify_chain(&trace, None);
    assert_eq!(chain.status(), ChainStatus::Valid, "{chain:?}");
}

#[test]
fn structural_problems_in_a_re_hashed_chain_are_named() {
    let run = write_run(None);
    let vals = values(&run.finished.path);
    let verify = |vals: Vec<Value>, renumber: bool| {
        let path = tampered_copy(&run, &rechain_with(vals, None, renumber));
        problem_at(&verify_chain(&read_trace(&path).unwrap(), None))
    };

    let mut dropped = vals.clone();
    dropped.remove(2);
    assert_eq!(
        verify(dropped.clone(), false),
        (
            3,
            ProblemKind::SeqGap {
                expected: 2,
                found: 3
            }
        )
    );
    assert_eq!(
        verify(dropped, true),
        (
            5,
            ProblemKind::LineCountMismatch {
                recorded: 6,
                actual: 5
            }
        )
    );

    let mut other_run = vals.clone();
    let foreign = Uuid::now_v7();
    other_run[3]["runId"] = json!(foreign);
    let (line, kind) = verify(other_run, true);
    assert_eq!(
        (line, kind),
        (
            4,
            ProblemKind::RunIdChanged {
                expected: run.events[0].run_id,
                found: foreign
            }
        )
    );

    let headless = vals[1..].to_vec();
    assert_eq!(
        verify(headless, true),
        (
            1,
            ProblemKind::MissingRunStarted {
                found: "llm_turn".to_string()
            }
        )
    );

    let mut finished_early = vals.clone();
    let finished = finished_early.remove(5);
    finished_early.insert(3, finished);
    assert_eq!(
        verify(finished_early, true),
        (4, ProblemKind::RunFinishedNotLast)
    );

    // Bytes after run_finished that are not a line are not a crash: writers stop at finish.
    let path = tampered_copy(&run, &raw_lines(&run.finished.path));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"v\":1,");
    std::fs::write(&path, bytes).unwrap();
    let chain = verify_chain(&read_trace(&path).unwrap(), None);
    assert_eq!(
        (problem_at(&chain), chain.status()),
        ((7, ProblemKind::DataAfterFinish), ChainStatus::Tampered)
    );
}

#[test]
fn the_last_ledger_entry_is_found_behind_a_long_torn_remnant() {
    // Longer than the first tail window, so the appender has to widen its search.
    let run = write_run(None);
    let ledger_file = run.dir.path().join(LEDGER_FILE_NAME);
    let mut bytes = std::fs::read(&ledger_file).unwrap();
    bytes.extend(std::iter::repeat_n(b'x', 50_000));
    std::fs::write(&ledger_file, &bytes).unwrap();
    let second = write_run_in(run.dir.path());
    assert_eq!(second.ledger_seq, 1);
    let ledger = read_ledger(&ledger_file).unwrap();
    assert_eq!(verify_ledger(&ledger, None), None);
    assert_eq!(ledger.torn_lines, vec![2]);
}
