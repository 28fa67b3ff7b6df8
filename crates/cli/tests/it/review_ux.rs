//! Replay and audit a person can act on, through the binary as a user runs it: the `next:`
//! hints carry the flags that chose the data, `last` and runIds name traces, another knowledge
//! base is refused, diffs show titlePaths and text, the audit header says what the run was
//! made against, a refused run lists its hits and its table agrees with its verdict, and
//! `traces --json` filters.

use std::path::{Path, PathBuf};

use crate::common::cli::{ragtrail, text};
use crate::common::{TRAVEL, Workspace};

const ANSWERED: &str = "高铁票报销需要什么凭证？";
/// Its key words are covered by the travel policy's hits (`searchDocs` calls the round
/// sufficient), but 洗衣服 is in no chunk, so the run ends with insufficient evidence.
const REFUSED: &str = "出差住宿可以报销洗衣服的费用吗？";

/// A workspace whose knowledge, data and traces live in non-default folders.
struct Dirs {
    ws: Workspace,
}

impl Dirs {
    fn new() -> Self {
        let ws = Workspace::new();
        ws.write("finance/travel.md", TRAVEL);
        Self { ws }
    }
    fn root(&self) -> &Path {
        self.ws.dir.path()
    }
    fn flags(&self) -> Vec<String> {
        let p = |s: &str| self.root().join(s).display().to_string();
        vec![
            "--data-dir".into(),
            p("data"),
            "--knowledge".into(),
            p("knowledge"),
            "--trace-dir".into(),
            p("runs"),
        ]
    }
    /// `ragtrail FLAGS ARGS` in the workspace root.
    fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut all: Vec<String> = self.flags();
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = ragtrail(self.root(), &all);
        let (stdout, stderr) = text(&out);
        (out.status.code(), stdout, stderr)
    }
    fn ask(&self, question: &str, extra: &[&str]) -> (Option<i32>, String, PathBuf) {
        let mut args = vec!["ask", question, "--today", "2026-11-30"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = self.run(&args);
        let trace = stdout
            .lines()
            .find_map(|l| {
                l.strip_prefix("trace: ")
                    .or_else(|| l.strip_prefix("轨迹："))
            })
            .unwrap_or_else(|| panic!("no trace line: {stdout}\n{stderr}"));
        (code, stdout.clone(), PathBuf::from(trace))
    }
}

fn run_id_of(trace: &Path) -> String {
    let name = trace.file_stem().and_then(|n| n.to_str()).expect("name");
    name.split_once('-').expect("time-runId").1.to_string()
}

#[test]
fn next_hints_repeat_the_directory_flags_and_the_printed_command_replays() {
    let d = Dirs::new();
    let (code, stdout, trace) = d.ask(ANSWERED, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let flags = d.flags().join(" ");
    let replay = stdout
        .lines()
        .find_map(|l| {
            l.trim_start_matches("next:")
                .trim_start_matches("复核：")
                .trim()
                .strip_prefix("ragtrail ")
        })
        .expect("a next: replay line");
    assert_eq!(replay, format!("{flags} replay {}", trace.display()));
    assert!(
        stdout.contains(&format!("ragtrail {flags} audit {}", trace.display())),
        "{stdout}"
    );
    // Run as printed, from another folder: it finds the same knowledge base and reproduces.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let args: Vec<&str> = replay.split_whitespace().collect();
    let out = ragtrail(elsewhere.path(), &args);
    let (out_text, err) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out_text}\n{err}");
    assert!(out_text.contains("result: reproduced"), "{out_text}");
}

#[test]
fn replay_against_another_knowledge_base_is_refused_unless_forced() {
    let d = Dirs::new();
    let (_, _, trace) = d.ask(ANSWERED, &[]);
    let other = d.root().join("other-data");
    let other_knowledge = d.root().join("other-knowledge");
    std::fs::create_dir_all(other_knowledge.join("finance")).expect("mkdir");
    std::fs::write(other_knowledge.join("finance/travel.md"), TRAVEL).expect("write");
    let args = |force: bool| {
        let mut a = vec![
            "--data-dir".to_string(),
            other.display().to_string(),
            "--knowledge".to_string(),
            other_knowledge.display().to_string(),
            "replay".to_string(),
            trace.display().to_string(),
        ];
        if force {
            a.push("--force".into());
        }
        a
    };
    let run = |force| {
        let a = args(force);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = ragtrail(d.root(), &a);
        let (o, e) = text(&out);
        (out.status.code(), o, e)
    };
    let (code, stdout, stderr) = run(false);
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("this run searched knowledge base kb-") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!stdout.contains("missing"), "{stdout}");
    let (code, stdout, stderr) = run(true);
    assert!(stderr.contains("warning (--force)"), "{stderr}");
    assert!(
        stdout.contains("compared against another knowledge base"),
        "{stdout}"
    );
    // Same text, same place-based ids: the comparison itself finds nothing else.
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn last_and_run_ids_name_traces_and_a_missing_one_is_one_clear_error() {
    let d = Dirs::new();
    let (_, _, first) = d.ask(ANSWERED, &[]);
    let (_, _, second) = d.ask(REFUSED, &[]);
    let (code, stdout, _) = d.run(&["audit", "last"]);
    assert!(code == Some(0) || code == Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("audit of run {}", run_id_of(&second))),
        "{stdout}"
    );
    let id = run_id_of(&first);
    let (code, stdout, _) = d.run(&["audit", &id[..13]]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains(&format!("audit of run {id}")), "{stdout}");
    let (code, stdout, _) = d.run(&["audit", &id]);
    assert_eq!(code, Some(0), "{stdout}");
    let (code, stdout, _) = d.run(&["replay", "last"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains(&run_id_of(&second)), "{stdout}");
    // No such file: said once, with what to give instead.
    let (code, _, stderr) = d.run(&["audit", "nosuch.jsonl"]);
    assert_eq!(code, Some(3));
    assert!(
        stderr.contains("no trace file nosuch.jsonl") && stderr.contains("`last`"),
        "{stderr}"
    );
    let (code, _, stderr) = d.run(&["replay", "0123456789abcdef"]);
    assert_eq!(code, Some(3));
    assert!(
        stderr.contains("no trace of run 0123456789abcdef in"),
        "{stderr}"
    );
    // Something that is not a trace, newest in the folder, is passed over by `last`.
    let odd = d.root().join("runs/29991231T000000Z-notatrace.jsonl");
    std::fs::create_dir_all(&odd).expect("a directory in its place");
    let (_, stdout, _) = d.run(&["audit", "last"]);
    assert!(
        stdout.contains(&format!("audit of run {}", run_id_of(&second))),
        "{stdout}"
    );
}

#[test]
fn the_audit_header_says_what_the_run_was_made_against() {
    let d = Dirs::new();
    let (_, _, _) = d.ask(ANSWERED, &["--session", "s1"]);
    let (_, _, trace) = d.ask("那飞机呢？", &["--session", "s1"]);
    let (_, stdout, _) = d.run(&["audit", &trace.display().to_string()]);
    for expected in [
        format!("trace: {}", trace.display()),
        "access: tenant default roles []".to_string(),
        "knowledge base: kb-".to_string(),
        "version gen-1:".to_string(),
        "embedder: hashing".to_string(),
        "planner: offline".to_string(),
        "date: 2026-11-30".to_string(),
        "conversation: session s1, turn 2, 1 earlier turn".to_string(),
        format!("  turn 1: {ANSWERED}"),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} not in:\n{stdout}");
    }
    let (_, markdown, _) = d.run(&[
        "audit",
        &trace.display().to_string(),
        "--format",
        "markdown",
    ]);
    assert!(markdown.contains("- **Knowledge base:** kb-"), "{markdown}");
    assert!(
        markdown.contains(&format!("  - turn 1: {ANSWERED} → ")),
        "{markdown}"
    );
}

#[test]
fn a_refused_run_lists_its_hits_and_its_table_agrees_with_its_verdict() {
    let d = Dirs::new();
    let (code, stdout, trace) = d.ask(REFUSED, &[]);
    assert_eq!(code, Some(1), "{stdout}");
    let file = ragtrail::trace::read_trace(&trace).expect("read");
    // The case that used to contradict itself: searchDocs found the keywords covered.
    let round_sufficient = file.events().any(
        |e| matches!(&e.body, ragtrail::trace::EventBody::Search(s) if s.sufficiency.sufficient),
    );
    assert!(
        round_sufficient,
        "the fixture lost its point: no sufficient round"
    );
    let (_, markdown, _) = d.run(&[
        "audit",
        &trace.display().to_string(),
        "--format",
        "markdown",
    ]);
    assert!(
        markdown.contains("- **Status:** insufficient evidence (no_relevant_hits: "),
        "{markdown}"
    );
    assert!(
        markdown.contains("**Decision:** insufficient evidence"),
        "{markdown}"
    );
    assert!(!markdown.contains("| sufficient |"), "{markdown}");
    assert!(!markdown.contains("| true |"), "{markdown}");
    assert!(
        markdown.contains("### Hits shown to the planner"),
        "{markdown}"
    );
    assert!(markdown.contains("住宿费"), "{markdown}");
    let (_, text_out, _) = d.run(&["audit", &trace.display().to_string()]);
    assert!(
        text_out.contains("status: insufficient evidence"),
        "{text_out}"
    );
    assert!(!text_out.contains("InsufficientEvidence"), "{text_out}");
    assert!(text_out.contains("    #1 "), "hits listed: {text_out}");
    assert!(text_out.contains("差旅报销制度 / 住宿费"), "{text_out}");
}

#[test]
fn replay_diff_lines_name_title_paths_and_show_old_and_new_text() {
    let d = Dirs::new();
    let (_, _, trace) = d.ask(ANSWERED, &[]);
    let edited = TRAVEL.replace(
        "高铁票须提供铁路电子客票报销凭证，截图不予报销。",
        "高铁票须提供铁路电子客票报销凭证（2027 年起另附行程单），截图不予报销。",
    );
    d.ws.write("finance/travel.md", &edited);
    let (code, _, _) = d.run(&["ingest"]);
    assert_eq!(code, Some(0));
    let (code, stdout, _) = d.run(&["replay", &trace.display().to_string()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("    changed  差旅报销制度 / 交通费 / 火车票  (c_"),
        "{stdout}"
    );
    assert!(
        stdout.contains("        was: ") && stdout.contains("截图不予报销"),
        "{stdout}"
    );
    assert!(
        stdout.contains("        now: ") && stdout.contains("2027 年起另附行程单"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cited chunk changed: 差旅报销制度 / 交通费 / 火车票"),
        "{stdout}"
    );
    assert!(!stdout.contains("1 hits"), "{stdout}");
    // Deterministic: the same replay prints the same bytes.
    let (_, again, _) = d.run(&["replay", &trace.display().to_string()]);
    assert_eq!(stdout, again);
}

#[test]
fn live_replay_shows_both_answers() {
    let d = Dirs::new();
    let (_, asked, trace) = d.ask(ANSWERED, &[]);
    let (_, stdout, stderr) = d.run(&["replay", &trace.display().to_string(), "--live"]);
    assert!(
        stdout.contains("  status: recorded answered | live answered"),
        "{stdout}\n{stderr}"
    );
    let recorded = stdout
        .split("  recorded answer:\n")
        .nth(1)
        .expect("recorded answer");
    let live = stdout
        .split("  live answer:\n")
        .nth(1)
        .expect("live answer");
    // Both answers quote the rail-ticket rule, as the asked run did.
    assert!(asked.contains("铁路电子客票"));
    assert!(recorded.contains("铁路电子客票"), "{stdout}");
    assert!(live.contains("铁路电子客票"), "{stdout}");
}

#[test]
fn traces_lists_as_json_and_filters_by_status_session_and_time() {
    let d = Dirs::new();
    d.ask(ANSWERED, &["--session", "s1"]);
    d.ask(REFUSED, &[]);
    let list = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec!["traces", "--json"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = d.run(&args);
        assert_eq!(code, Some(0), "{stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let all = list(&[]);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["status"], "insufficient_evidence");
    assert_eq!(all[0]["question"], REFUSED);
    assert_eq!(all[1]["status"], "answered");
    assert_eq!(all[1]["session"], "s1");
    assert_eq!(all[1]["tenant"], "default");
    let refused = list(&["--status", "insufficient"]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["question"], REFUSED);
    let s1 = list(&["--session", "s1"]);
    assert_eq!(s1.len(), 1);
    assert_eq!(s1[0]["question"], ANSWERED);
    assert!(list(&["--since", "2999-01-01"]).is_empty());
    assert_eq!(list(&["--since", "2000-01-01T00:00:00Z"]).len(), 2);
    // Another tenant's listing holds none of these runs.
    assert!(list(&["--tenant", "globex"]).is_empty());
    let (code, _, stderr) = d.run(&["traces", "--status", "maybe"]);
    assert_eq!(code, Some(3));
    assert!(stderr.contains("unknown --status maybe"), "{stderr}");
    // Text output: user-facing status names, and one round is "1 round".
    let (_, stdout, _) = d.run(&["traces"]);
    assert!(stdout.contains("insufficient evidence"), "{stdout}");
    assert!(!stdout.contains("InsufficientEvidence"), "{stdout}");
    assert!(!stdout.contains(" 1 rounds"), "{stdout}");
    assert!(
        stdout.contains(" 1 round ") || stdout.contains(" 2 rounds "),
        "{stdout}"
    );
}

#[test]
fn counterfactual_replay_under_rrf_shows_the_hits_that_move_and_is_deterministic() {
    let d = Dirs::new();
    let (_, _, trace) = d.ask(ANSWERED, &[]);
    // The recorded order, as the run saw it under the default fusion.
    let file = ragtrail::trace::read_trace(&trace).expect("read");
    let recorded: Vec<String> = file
        .events()
        .find_map(|e| match &e.body {
            ragtrail::trace::EventBody::Search(s) => {
                Some(s.hits.iter().map(|h| h.hit.title_path.clone()).collect())
            }
            _ => None,
        })
        .expect("a search round");
    assert_eq!(
        recorded,
        [
            "差旅报销制度 / 交通费 / 火车票",
            "差旅报销制度 / 交通费 / 飞机票",
            "差旅报销制度 / 住宿费"
        ]
    );
    let path = trace.display().to_string();
    let (code, stdout, stderr) = d.run(&["replay", &path, "--fusion", "rrf"]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("what if: the recorded keywords searched again with fusion rrf:60"),
        "{stdout}"
    );
    assert!(
        stdout.contains("round 1 [凭证, 高铁, 报销]: reordered"),
        "{stdout}"
    );
    // RRF counts ranks only: the vector leg's second place lifts 住宿费 over 飞机票.
    assert!(
        stdout.contains("    moved    #2 → #3 差旅报销制度 / 交通费 / 飞机票  (c_"),
        "{stdout}"
    );
    assert!(
        stdout.contains("    moved    #3 → #2 差旅报销制度 / 住宿费  (c_"),
        "{stdout}"
    );
    assert!(
        stdout.contains("citation [1] 差旅报销制度 / 交通费 / 火车票  (c_")
            && stdout.contains("recorded round 1 #1, now round 1 #1"),
        "{stdout}"
    );
    let (_, again, _) = d.run(&["replay", &path, "--fusion", "rrf"]);
    assert_eq!(stdout, again, "two replays print the same bytes");
    // Fewer hits: the ones cut off are listed as lost, with their text; the citation stays.
    let (_, fewer, _) = d.run(&["replay", &path, "--top-k", "1", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&fewer).expect("json");
    let missing: Vec<&str> = report["rounds"][0]["missing"]
        .as_array()
        .expect("missing")
        .iter()
        .filter_map(|h| h["titlePath"].as_str())
        .collect();
    assert_eq!(
        missing,
        ["差旅报销制度 / 交通费 / 飞机票", "差旅报销制度 / 住宿费"]
    );
    assert_eq!(report["counterfactual"]["topK"], 1);
    assert_eq!(report["citations"][0]["now"]["rank"], 1);
    let (code, _, stderr) = d.run(&["replay", &path, "--fusion", "fancy"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown fusion"), "{stderr}");
}
