//! Long-term memory of the asker (#42), through the binary as an operator runs it on the
//! bundled `knowledge/`: remembered facts choose the table row that answers and are named in
//! the reply and the audit, a fact the question states wins, memory never crosses users or
//! tenants, `forget` removes the fact, `--remember` learns what a question says, and a re-run
//! plans with the facts the trace recorded.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::cli::{ragtrail_with_env, text};
use crate::common::repo_root;

/// The bundled knowledge's allowance table: 伙食补贴 per day by city category, 成都 listed
/// under 二类城市 (100元), 北京 under 一类城市 (120元); the grade plays no part in it.
const ALLOWANCE: &str = "出差一天伙食补贴多少？";

/// A data directory and trace folder of its own over the bundled knowledge.
struct Operator {
    dir: tempfile::TempDir,
}

impl Operator {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn traces(&self) -> PathBuf {
        self.root().join("traces")
    }

    /// `ragtrail --user USER [--tenant T] ARGS`: exit code, stdout, stderr.
    fn run(&self, user: &str, tenant: Option<&str>, args: &[&str]) -> (i32, String, String) {
        self.run_with(user, tenant, args, &[])
    }

    /// [`run`](Self::run) with these environment variables.
    fn run_with(
        &self,
        user: &str,
        tenant: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let knowledge = repo_root().join("knowledge");
        let data = self.root().join("data");
        let traces = self.traces();
        let mut all: Vec<String> = vec![
            "--data-dir".into(),
            data.display().to_string(),
            "--knowledge".into(),
            knowledge.display().to_string(),
            "--trace-dir".into(),
            traces.display().to_string(),
            "--user".into(),
            user.into(),
        ];
        if let Some(t) = tenant {
            all.extend(["--tenant".to_string(), t.to_string()]);
        }
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = ragtrail_with_env(self.root(), &all, env);
        let (stdout, stderr) = text(&out);
        (out.status.code().unwrap_or(-1), stdout, stderr)
    }

    /// `ask --json --planner offline`: exit code and the outcome.
    fn ask(&self, user: &str, question: &str, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["ask", question, "--json", "--planner", "offline"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = self.run(user, None, &args);
        let value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("ask --json: {e}\n{stdout}\n{stderr}"));
        (code, value)
    }

    /// `ragtrail --user USER chat --planner offline ARGS` with `input` piped to it: exit code,
    /// stdout, stderr.
    fn chat(&self, user: &str, input: &str, args: &[&str]) -> (i32, String, String) {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragtrail"));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("RAGTRAIL_") {
                cmd.env_remove(&key);
            }
        }
        crate::common::cli::pin_hashing(&mut cmd);
        cmd.current_dir(self.root())
            .arg("--data-dir")
            .arg(self.root().join("data"))
            .arg("--knowledge")
            .arg(repo_root().join("knowledge"))
            .arg("--trace-dir")
            .arg(self.traces())
            .args(["--user", user, "chat", "--planner", "offline"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start ragtrail chat");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write the input");
        let out = child.wait_with_output().expect("chat");
        let (stdout, stderr) = text(&out);
        (out.status.code().unwrap_or(-1), stdout, stderr)
    }

    fn facts(&self, user: &str, tenant: Option<&str>) -> Vec<(String, String)> {
        let (code, stdout, stderr) = self.run(user, tenant, &["memory", "list", "--json"]);
        assert_eq!(code, 0, "{stderr}");
        let facts: Vec<Value> = serde_json::from_str(&stdout).expect("list --json");
        facts
            .iter()
            .map(|f| {
                (
                    f["key"].as_str().unwrap_or_default().to_string(),
                    f["value"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    fn set(&self, user: &str, key: &str, value: &str) {
        let (code, stdout, stderr) = self.run(user, None, &["memory", "set", key, value]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stdout.contains(&format!("remembered: {key} = {value}")),
            "{stdout}"
        );
    }
}

/// The titlePaths and quotes an outcome cites.
fn cited(outcome: &Value) -> Vec<(String, String)> {
    outcome["citations"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["titlePath"].as_str().unwrap_or_default().to_string(),
                        c["quote"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn trace_of(outcome: &Value) -> String {
    outcome["trace"]
        .as_str()
        .or_else(|| outcome["trace"]["path"].as_str())
        .unwrap_or_else(|| panic!("no trace in {outcome}"))
        .to_string()
}

/// The done-when test of #42: with grade B and base city 成都 remembered, the allowance
/// question answers 100元 from the 二类城市 row, cites the row and the sentence listing 成都
/// under 二类城市, says which fact it used, and the audit names both facts (the city used,
/// the grade not bearing: the table does not depend on it). Without memory the reply is the
/// table as evidence. A city the question names wins over the remembered one.
#[test]
fn remembered_facts_choose_the_row_and_the_audit_names_them() {
    let op = Operator::new();
    op.set("alice", "grade", "B");
    op.set("alice", "base city", "成都");

    let (code, outcome) = op.ask("alice", ALLOWANCE, &[]);
    assert_eq!(code, 0, "{outcome}");
    assert_eq!(outcome["status"], "answered", "{outcome}");
    let answer = outcome["answer"].as_str().expect("answer");
    assert!(answer.contains("100元"), "{answer}");
    assert!(
        answer.contains("你记住的常驻城市 成都（属二类城市）"),
        "the reply names the fact it used: {answer}"
    );
    assert!(
        !answer.contains("120元") && !answer.contains("80元"),
        "{answer}"
    );
    let citations = cited(&outcome);
    assert!(
        citations
            .iter()
            .any(|(title, quote)| title.ends_with("补贴标准表")
                && quote.contains("二类城市")
                && quote.contains("100元")),
        "{citations:?}"
    );
    assert!(
        citations
            .iter()
            .any(|(title, quote)| title.ends_with("城市类别") && quote.contains("成都")),
        "{citations:?}"
    );

    let trace = trace_of(&outcome);
    // The facts' own search is lexical: their values are names and codes a passage states as
    // written, which a model's leg, given a bare list of them, would crowd out.
    let fusions: Vec<(Vec<String>, String)> = ragtrail::trace::read_trace(Path::new(&trace))
        .expect("read the trace")
        .events()
        .filter_map(|e| match &e.body {
            ragtrail::trace::EventBody::Search(s) => Some((s.keywords.clone(), s.fusion.clone())),
            _ => None,
        })
        .collect();
    let facts_round = fusions
        .iter()
        .find(|(k, _)| k.iter().any(|w| w == "成都"))
        .unwrap_or_else(|| panic!("a search with the remembered city: {fusions:?}"));
    assert_eq!(facts_round.1, "bm25", "{fusions:?}");
    assert_ne!(
        fusions[0].1, "bm25",
        "the question's own search fuses: {fusions:?}"
    );
    let (code, audit, stderr) = op.run("alice", None, &["audit", &trace]);
    assert!(code == 0 || code == 1, "{audit}{stderr}");
    assert!(audit.contains("remembered facts:"), "{audit}");
    assert!(
        audit.contains("used: base city = 成都 (set by the asker"),
        "{audit}"
    );
    assert!(
        audit.contains("not bearing on the question: grade"),
        "{audit}"
    );

    // Without memory: the table's passages as evidence, no figure chosen.
    let (code, outcome) = op.ask("bob", ALLOWANCE, &[]);
    assert_eq!(code, 4, "{outcome}");
    assert_eq!(outcome["status"], "evidence", "{outcome}");
    assert!(
        cited(&outcome)
            .iter()
            .any(|(title, _)| title.ends_with("补贴标准表")),
        "{outcome}"
    );
    let (_, audit, _) = op.run("bob", None, &["audit", &trace_of(&outcome)]);
    assert!(!audit.contains("remembered facts:"), "{audit}");

    // Nothing remembered, but the question says where the asker is based: that chooses the row.
    let (code, outcome) = op.ask("bob", "我常驻成都，出差一天伙食补贴多少？", &[]);
    assert_eq!(code, 0, "{outcome}");
    let answer = outcome["answer"].as_str().expect("answer");
    assert!(
        answer.contains("100元") && !answer.contains("120元"),
        "{answer}"
    );
    assert!(answer.contains("问题中的成都（属二类城市）"), "{answer}");
    assert!(!answer.contains("你记住的"), "{answer}");
    assert!(op.facts("bob", None).is_empty(), "nothing was kept");

    // A city the question names wins: 北京 is listed under 一类城市.
    let (code, outcome) = op.ask("alice", "去北京出差一天伙食补贴多少？", &[]);
    assert_eq!(code, 0, "{outcome}");
    let answer = outcome["answer"].as_str().expect("answer");
    assert!(
        answer.contains("120元") && !answer.contains("100元"),
        "{answer}"
    );
    assert!(answer.contains("问题中的北京（属一类城市）"), "{answer}");
    let (_, audit, _) = op.run("alice", None, &["audit", &trace_of(&outcome)]);
    assert!(
        audit.contains("stated in the question instead: base city"),
        "{audit}"
    );
    assert!(audit.contains("used: none"), "{audit}");
}

/// Both remembered facts decide the hotel cap: the grade picks the row, the city's category
/// the column (B类, 二类城市: 500元).
#[test]
fn two_facts_choose_row_and_column() {
    let op = Operator::new();
    op.set("alice", "grade", "B");
    op.set("alice", "base city", "成都");
    let (code, outcome) = op.ask("alice", "出差住宿每晚限额多少？", &[]);
    assert_eq!(code, 0, "{outcome}");
    let answer = outcome["answer"].as_str().expect("answer");
    assert!(answer.contains("B类，二类城市：500元"), "{answer}");
    let (_, audit, _) = op.run("alice", None, &["audit", &trace_of(&outcome)]);
    assert!(audit.contains("used: grade = B"), "{audit}");
    assert!(audit.contains("used: base city = 成都"), "{audit}");

    // In English, a city listed in a table cell among others picks its row (Zone 1).
    op.set("dave", "base city", "Singapore");
    let (code, outcome) = op.ask(
        "dave",
        "What is the hotel cap per night when travelling abroad?",
        &[],
    );
    assert_eq!(code, 0, "{outcome}");
    let answer = outcome["answer"].as_str().expect("answer");
    assert!(
        answer.contains("going by what you told me (base city Singapore)")
            && answer.contains("Lodging cap per night (USD): 280"),
        "{answer}"
    );
}

/// One user's facts are never another user's, nor the same user's in another tenant; the
/// user comes from `--user` or `RAGTRAIL_USER`; `forget` removes the fact from the file.
#[test]
fn memory_never_crosses_users_or_tenants_and_forget_removes() {
    let op = Operator::new();
    op.set("alice", "grade", "B");
    assert_eq!(
        op.facts("alice", None),
        [("grade".to_string(), "B".to_string())]
    );
    assert!(op.facts("bob", None).is_empty());
    assert!(op.facts("alice", Some("globex")).is_empty());
    let (_, listed, _) = op.run("bob", None, &["memory", "list"]);
    assert!(
        listed.contains("nothing remembered for user bob in tenant default"),
        "{listed}"
    );
    // RAGTRAIL_USER names the user when --user is not given.
    let data = op.root().join("data");
    let out = ragtrail_with_env(
        op.root(),
        &[
            "--data-dir",
            &data.display().to_string(),
            "memory",
            "list",
            "--json",
        ],
        &[("RAGTRAIL_USER", "alice")],
    );
    let (stdout, _) = text(&out);
    assert!(stdout.contains("\"value\": \"B\""), "{stdout}");

    // Forgotten: gone from the file, and the second time there is nothing to forget.
    let (code, stdout, _) = op.run("alice", None, &["memory", "forget", "Grade"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("forgotten: grade = B"), "{stdout}");
    assert!(op.facts("alice", None).is_empty());
    let files: Vec<String> = crate::common::files_under(&data.join("memory"))
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(files.iter().all(|t| !t.contains("\"B\"")), "{files:?}");
    let (code, stdout, _) = op.run("alice", None, &["memory", "forget", "grade"]);
    assert_eq!(code, 1, "{stdout}");

    // A memory file that cannot be read stops `memory` and `ask` with its name, exit 3.
    op.set("alice", "grade", "B");
    let file = crate::common::files_under(&data.join("memory"))
        .pop()
        .expect("memory file");
    std::fs::write(&file, "{\"version\": 1, \"facts\": [").expect("corrupt it");
    let (code, _, stderr) = op.run("alice", None, &["memory", "list"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("is corrupt") && stderr.contains(&file.display().to_string()),
        "{stderr}"
    );
    let (code, _, stderr) = op.run("alice", None, &["ask", ALLOWANCE, "--planner", "offline"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("reading the asker's memory"), "{stderr}");
}

/// `--remember` keeps what the question says of the asker, as said in that run; without it
/// nothing is kept. A re-run of a recorded run plans with the facts the trace recorded, even
/// after they were forgotten.
#[test]
fn remember_learns_and_rerun_uses_the_recorded_facts() {
    let op = Operator::new();
    let (_, outcome) = op.ask("carol", "我常驻成都，出差一天伙食补贴多少？", &[]);
    assert!(op.facts("carol", None).is_empty(), "{outcome}");
    let (_, outcome) = op.ask(
        "carol",
        "我常驻成都，出差一天伙食补贴多少？",
        &["--remember"],
    );
    assert_eq!(
        op.facts("carol", None),
        [("base city".to_string(), "成都".to_string())]
    );
    assert_eq!(outcome["remembered"][0]["key"], "base city", "{outcome}");
    assert_eq!(
        outcome["remembered"][0]["source"]["runId"], outcome["runId"],
        "{outcome}"
    );
    // A year said relative to the run's day is kept as the year it means.
    op.ask(
        "dave",
        "我去年7月入职，年假有几天？",
        &["--remember", "--today", "2026-11-30"],
    );
    assert_eq!(
        op.facts("dave", None),
        [("start date".to_string(), "2025-07".to_string())]
    );

    let (code, outcome) = op.ask("carol", ALLOWANCE, &[]);
    assert_eq!(code, 0, "{outcome}");
    let trace = trace_of(&outcome);
    op.run("carol", None, &["memory", "forget", "base city"]);
    let (_, rerun, stderr) = op.run("carol", None, &["replay", "--rerun", &trace]);
    assert!(
        rerun.contains("status: recorded answered | re-run answered"),
        "{rerun}{stderr}"
    );
    assert!(rerun.contains("answer: same"), "{rerun}");
    // Today's memory no longer has the city: the re-run says what it would change.
    assert!(
        rerun.contains("today's memory differs from the run's: base city: 成都 → forgotten"),
        "{rerun}"
    );
    assert!(
        rerun.contains("with it the offline planner answers differently"),
        "{rerun}"
    );
}

/// The `memory_read` event of a trace: (used keys, stated keys), `None` when it has none.
fn memory_read_of(trace: &str) -> Option<(Vec<String>, Vec<String>)> {
    let file = ragtrail::trace::read_trace(Path::new(trace)).expect("read the trace");
    file.events().find_map(|e| match &e.body {
        ragtrail::trace::EventBody::MemoryRead(m) => Some((
            m.used.iter().map(|f| f.key.clone()).collect(),
            m.stated.clone(),
        )),
        _ => None,
    })
}

/// A scripted model: its first reply of a run makes `first` (tool calls as id, name,
/// arguments); once it was shown hits, it answers with the longest sentence of the first hit,
/// cited.
fn model_citing_the_first_hit(
    first: Vec<(&'static str, &'static str, Value)>,
) -> crate::common::chat_server::ChatServer {
    use crate::common::chat_server::{ChatServer, tool_calls};
    ChatServer::start(move |reqs| {
        let req = reqs.last().expect("a request");
        match req.passages().into_iter().next() {
            None => tool_calls(&first),
            Some(passage) => {
                let quote = (passage.text.split(['。', '；', '\n']))
                    .map(str::trim)
                    .max_by_key(|s| s.chars().count())
                    .unwrap_or_default()
                    .to_string();
                tool_calls(&[(
                    "a",
                    "submitAnswer",
                    serde_json::json!({"answer": quote, "citations": [passage.number]}),
                )])
            }
        }
    })
}

/// The LLM planner is told the asker's facts in its system prompt, in the question's language,
/// with the rule that the question's own facts win, and its run records them in a
/// `memory_read` event; another asker's run is told nothing. A scripted server stands in for
/// the model (it searches, then cites the first hit), so the test is about what is sent.
#[test]
fn the_llm_planner_is_told_the_remembered_facts_and_the_trace_names_them() {
    use serde_json::json;

    let server = model_citing_the_first_hit(vec![(
        "s",
        "searchDocs",
        json!({"keywords": ["伙食补贴", "城市"]}),
    )]);
    let env = [
        ("RAGTRAIL_LLM_BASE_URL", server.base_url.as_str()),
        ("RAGTRAIL_LLM_MODEL", "scripted-model"),
    ];
    let op = Operator::new();
    op.set("alice", "grade", "B");
    op.set("alice", "base city", "成都");
    let ask = |user: &str, question: &str| {
        let args = [
            "ask",
            question,
            "--json",
            "--planner",
            "llm",
            "--max-rounds",
            "2",
        ];
        let (code, stdout, stderr) = op.run_with(user, None, &args, &env);
        let outcome: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("ask --json: {e}\n{stdout}\n{stderr}"));
        assert_eq!(code, 0, "{outcome}\n{stderr}");
        outcome
    };
    let system_of_last_run = |runs_before: usize| {
        let reqs = server.requests();
        let first = reqs.get(runs_before).expect("the run's first request");
        first.messages()[0]["content"]
            .as_str()
            .expect("the system prompt")
            .to_string()
    };

    let outcome = ask("alice", ALLOWANCE);
    let system = system_of_last_run(0);
    assert!(
        system.contains(
            "提问者告诉过我们的事实（记住的，可能与问题有关）：\n- grade：B\n- base city：成都"
        ),
        "{system}"
    );
    assert!(system.contains("问题本身说明的事实优先"), "{system}");
    let (used, stated) = memory_read_of(&trace_of(&outcome)).expect("a memory_read event");
    assert_eq!(used, ["grade", "base city"]);
    assert!(stated.is_empty(), "{stated:?}");
    // The audit says the facts were given to the model, not that the model used them.
    let (_, audit, stderr) = op.run("alice", None, &["audit", &trace_of(&outcome)]);
    assert!(
        audit.contains("given to the model: base city = 成都 (set by the asker"),
        "{audit}{stderr}"
    );
    assert!(!audit.contains("  used:"), "{audit}");

    // A city the question states: still told (the rule says the question wins), named as stated.
    let before = server.requests().len();
    let outcome = ask("alice", "我常驻北京，出差一天伙食补贴多少？");
    assert!(system_of_last_run(before).contains("- base city：成都"));
    let (_, stated) = memory_read_of(&trace_of(&outcome)).expect("a memory_read event");
    assert_eq!(stated, ["base city"]);

    // English question, English words; another asker is told nothing and records nothing.
    let before = server.requests().len();
    ask(
        "alice",
        "What is the daily meal allowance on a business trip?",
    );
    let system = system_of_last_run(before);
    assert!(
        system.contains("Facts the asker has told us") && system.contains("- base city: 成都"),
        "{system}"
    );
    let before = server.requests().len();
    let outcome = ask("bob", ALLOWANCE);
    let system = system_of_last_run(before);
    assert!(
        !system.contains("成都") && !system.contains("提问者告诉过我们"),
        "{system}"
    );
    assert!(memory_read_of(&trace_of(&outcome)).is_none());
}

/// The LLM planner's `proposeFact` tool (#42 item 2): a fact the model reads in the question
/// that the fixed patterns miss ("我们团队在成都") is kept and, with `--remember`, remembered as
/// said in the run; a value the question never states (a grade the model guessed) is refused,
/// the model is told why, and the trace records both proposals. Without `--remember` nothing
/// is kept. A scripted server stands in for the model, so the test is about what the run does
/// with a proposal, whatever a model proposes.
#[test]
fn the_models_proposed_facts_are_kept_only_when_the_question_states_them() {
    use serde_json::json;

    let server = model_citing_the_first_hit(vec![
        (
            "f1",
            "proposeFact",
            json!({"key": "base city", "value": "成都"}),
        ),
        ("f2", "proposeFact", json!({"key": "grade", "value": "B类"})),
        ("s", "searchDocs", json!({"keywords": ["伙食补贴", "城市"]})),
    ]);
    let env = [
        ("RAGTRAIL_LLM_BASE_URL", server.base_url.as_str()),
        ("RAGTRAIL_LLM_MODEL", "scripted-model"),
    ];
    let question = "我们团队在成都，出差一天伙食补贴多少？";
    assert!(
        ragtrail::facts_stated_in(question, "2026-11-30").is_empty(),
        "the fixed patterns must miss this question for the test to be about the tool"
    );
    let op = Operator::new();
    let ask = |user: &str, extra: &[&str]| {
        let mut args = vec!["ask", question, "--json", "--planner", "llm"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = op.run_with(user, None, &args, &env);
        let outcome: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("ask --json: {e}\n{stdout}\n{stderr}"));
        assert_eq!(code, 0, "{outcome}\n{stderr}");
        (outcome, stderr)
    };

    let (outcome, _) = ask("erin", &[]);
    assert_eq!(
        outcome["proposedFacts"],
        json!([{"key": "base city", "value": "成都"}]),
        "{outcome}"
    );
    assert!(op.facts("erin", None).is_empty(), "kept without --remember");
    // The model was told which proposal was kept and why the other was not.
    let told: Vec<String> = server.requests()[1]
        .tool_results()
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| v.starts_with("已记下") || v.starts_with("没有记下"))
        .collect();
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(
        told[0].starts_with("已记下：base city = 成都。"),
        "{told:?}"
    );
    assert!(told[1].starts_with("没有记下（"), "{told:?}");
    assert!(told[1].contains("not in the question"), "{told:?}");
    let file = ragtrail::trace::read_trace(Path::new(&trace_of(&outcome))).expect("the trace");
    let proposed: Vec<(String, String, bool)> = file
        .events()
        .filter_map(|e| match &e.body {
            ragtrail::trace::EventBody::FactProposed(f) => {
                Some((f.key.clone(), f.value.clone(), f.kept))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        proposed,
        [
            ("base city".to_string(), "成都".to_string(), true),
            ("grade".to_string(), "B类".to_string(), false)
        ]
    );

    let (outcome, stderr) = ask("erin", &["--remember"]);
    assert_eq!(
        op.facts("erin", None),
        [("base city".to_string(), "成都".to_string())]
    );
    assert!(stderr.contains("已记住：base city = 成都"), "{stderr}");
    assert_eq!(
        outcome["remembered"][0]["source"]["runId"], outcome["runId"],
        "{outcome}"
    );
}

/// `chat` asks once, in the message's language, whether to remember what a message says about
/// the asker, and remembers only on yes, as said in that turn's run; the next turn uses it.
/// Without a flag a piped chat neither asks nor remembers; a fact already held with that value
/// is not asked about again.
#[test]
fn chat_asks_before_remembering_what_a_message_says() {
    let op = Operator::new();
    // Piped without --remember: no question, nothing kept.
    let said = "我常驻成都，出差一天伙食补贴多少？";
    let (code, stdout, stderr) = op.chat("dave", &format!("{said}\n/quit\n"), &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("记住"), "{stdout}");
    assert!(op.facts("dave", None).is_empty());

    // A no keeps nothing; the no is not taken for a question.
    let (_, stdout, _) = op.chat(
        "dave",
        &format!("{said}\nn\n/quit\n"),
        &["--remember", "ask"],
    );
    assert!(
        stdout.contains("记住：base city = 成都？[y/N] n\n没有记住"),
        "{stdout}"
    );
    assert!(!stdout.contains("第 2 问"), "{stdout}");
    assert!(op.facts("dave", None).is_empty());

    // A yes keeps it, as said in the turn's run, and the next turn answers with it.
    let input = format!("{said}\ny\n{ALLOWANCE}\n/quit\n");
    let (code, stdout, stderr) = op.chat("dave", &input, &["--remember", "ask"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("记住：base city = 成都？[y/N] y\n已记住：base city = 成都"),
        "{stdout}"
    );
    let (_, listed, _) = op.run("dave", None, &["memory", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&listed).expect("list --json");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["source"]["kind"], "said", "{listed:?}");
    let run_id = listed[0]["source"]["runId"].as_str().expect("runId");
    assert!(
        crate::common::files_under(&op.traces())
            .iter()
            .any(|p| p.to_string_lossy().contains(run_id)),
        "the fact names the run of the turn that said it: {run_id}"
    );
    let second = stdout.split("第 2 问 › ").nth(1).expect("a second turn");
    assert!(
        second.contains("按你记住的常驻城市 成都（属二类城市）") && second.contains("100元"),
        "{second}"
    );

    // Already remembered with that value: not asked again; English asks in English.
    let input = format!("{said}\nI'm based in Singapore. What is the per diem?\ny\n/quit\n");
    let (_, stdout, _) = op.chat("dave", &input, &["--remember", "ask"]);
    assert_eq!(stdout.matches("[y/N]").count(), 1, "{stdout}");
    assert!(
        stdout.contains(
            "Remember: base city = Singapore? [y/N] y\nremembered: base city = Singapore"
        ),
        "{stdout}"
    );
    // --remember alone keeps without asking, as `ask --remember` does.
    let (_, stdout, _) = op.chat(
        "erin",
        "我是B类员工，出差住宿标准多少？\n/quit\n",
        &["--remember"],
    );
    assert!(!stdout.contains("[y/N]"), "{stdout}");
    assert!(stdout.contains("已记住：grade = B类"), "{stdout}");
    assert_eq!(
        op.facts("erin", None),
        [("grade".to_string(), "B类".to_string())]
    );
}

/// Over HTTP the token's name is the asker: one token's facts are never another's, `DELETE`
/// removes them, and `/v1/ask` answers with the caller's own facts.
#[test]
fn http_memory_is_the_tokens_own() {
    use crate::common::server::{Serve, add_token};
    use crate::common::{TRAVEL, Workspace};
    use serde_json::json;

    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let bob = add_token(root, "bob", "default", &[]);
    let serve = Serve::start(root);
    let call = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        serve.call(method, path, Some(token), body.map(|b| b.to_string()))
    };

    let (status, fact) = call(
        reqwest::Method::PUT,
        "/v1/memory/city%20tier",
        &alice,
        Some(json!({"value": "一线城市"})),
    );
    assert_eq!(status, 200, "{fact}");
    assert_eq!(fact["key"], "city tier", "{fact}");
    assert_eq!(fact["source"]["kind"], "asker", "{fact}");
    let (_, listed) = serve.get("/v1/memory", &alice);
    assert_eq!(listed[0]["value"], "一线城市", "{listed}");
    let (_, listed) = serve.get("/v1/memory", &bob);
    assert_eq!(listed, json!([]), "{listed}");
    let (status, _) = call(
        reqwest::Method::DELETE,
        "/v1/memory/city%20tier",
        &bob,
        None,
    );
    assert_eq!(status, 404);
    let (status, bad) = call(
        reqwest::Method::PUT,
        "/v1/memory/grade",
        &alice,
        Some(json!({"value": ""})),
    );
    assert_eq!(status, 400, "{bad}");

    // The table row alice's fact names answers her; bob is shown the table.
    let question = "住宿费标准是多少？";
    let (status, outcome) = serve.post("/v1/ask", &alice, json!({"question": question}));
    assert_eq!(status, 200, "{outcome}");
    let answer = outcome["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("你记住的") && answer.contains("600元") && !answer.contains("400元"),
        "{outcome}"
    );
    let (_, outcome) = serve.post("/v1/ask", &bob, json!({"question": question}));
    assert!(
        !outcome["answer"]
            .as_str()
            .unwrap_or_default()
            .contains("你记住的"),
        "{outcome}"
    );

    let (status, gone) = call(
        reqwest::Method::DELETE,
        "/v1/memory/CITY%20TIER",
        &alice,
        None,
    );
    assert_eq!(status, 200, "{gone}");
    assert_eq!(gone["value"], "一线城市", "{gone}");
    let (_, listed) = serve.get("/v1/memory", &alice);
    assert_eq!(listed, json!([]), "{listed}");
}

/// The MCP memory tools keep the facts of the operator's `--caller`, and another caller's
/// connection does not see them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_memory_tools_are_the_callers_own() {
    use crate::common::server::command;
    use crate::common::{TRAVEL, Workspace};
    use crate::mcp::args;
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use serde_json::json;

    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    let root = ws.dir.path();
    let connect = |caller: &str| {
        let mut cmd = command(root);
        cmd.args(["mcp", "--planner", "offline", "--caller", caller]);
        TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("spawn mcp")
    };
    let agent = ().serve(connect("agent-7")).await.expect("initialize");
    let set = agent
        .call_tool(
            CallToolRequestParams::new("memorySet")
                .with_arguments(args(json!({"key": "grade", "value": "B"}))),
        )
        .await
        .expect("memorySet");
    let facts = set.structured_content.expect("structured");
    assert_eq!(facts["facts"][0]["value"], "B", "{facts}");
    assert_eq!(facts["facts"][0]["source"], "set by the asker", "{facts}");
    agent.cancel().await.expect("close");

    let other = ().serve(connect("agent-8")).await.expect("initialize");
    let listed = other
        .call_tool(CallToolRequestParams::new("memoryList").with_arguments(args(json!({}))))
        .await
        .expect("memoryList");
    let facts = listed.structured_content.expect("structured");
    assert_eq!(facts["facts"], json!([]), "{facts}");
    other.cancel().await.expect("close");

    // The same caller name in another tenant is another asker.
    let mut cmd = command(root);
    cmd.args([
        "--tenant",
        "acme",
        "mcp",
        "--planner",
        "offline",
        "--caller",
        "agent-7",
    ]);
    let elsewhere =
        ().serve(TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("spawn mcp"))
            .await
            .expect("initialize");
    let listed = elsewhere
        .call_tool(CallToolRequestParams::new("memoryList").with_arguments(args(json!({}))))
        .await
        .expect("memoryList");
    let facts = listed.structured_content.expect("structured");
    assert_eq!(facts["facts"], json!([]), "{facts}");
    elsewhere.cancel().await.expect("close");

    let agent = ().serve(connect("agent-7")).await.expect("initialize");
    let forgot = agent
        .call_tool(
            CallToolRequestParams::new("memoryForget")
                .with_arguments(args(json!({"key": "grade"}))),
        )
        .await
        .expect("memoryForget");
    let facts = forgot.structured_content.expect("structured");
    assert_eq!(facts["facts"], json!([]), "{facts}");
    agent.cancel().await.expect("close");
}
