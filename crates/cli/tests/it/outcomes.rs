//! The three outcomes of a run over the bundled knowledge: an answer, evidence (cited passages
//! to read when no answer can be stood behind) and a refusal, each with its exit status, its
//! JSON and its words in the question's language; an evidence run audits and replays like an
//! answer.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::common::cli::{ragtrail_with_env, text};
use crate::common::repo_root;

/// Runs `ragtrail` over the bundled knowledge with its data and traces in `dir`.
fn bundled(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    bundled_env(dir, &[], args)
}

/// [`bundled`] with `env` set.
fn bundled_env(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let data = dir.join("data");
    let traces = dir.join("traces");
    let knowledge = repo_root().join("knowledge");
    let mut all = vec![
        "--data-dir",
        data.to_str().expect("utf-8"),
        "--knowledge",
        knowledge.to_str().expect("utf-8"),
        "--trace-dir",
        traces.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(args);
    let out = ragtrail_with_env(dir, &all, env);
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

fn ask_json(dir: &Path, question: &str) -> (Option<i32>, Value) {
    let (code, stdout, stderr) = bundled(dir, &["ask", "--json", question]);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json output ({e}): {stdout}\n{stderr}"));
    (code, json)
}

/// The paternity-leave question in everyday words: the documents say 配偶 and 生育, never 老婆
/// or 孩子, and 下个月 is in none of them. It finds the 陪产假 section; the word no document uses
/// keeps an answer from being composed, not the section from being shown.
const PATERNITY_EVERYDAY: &str = "我老婆下个月生孩子，我能休几天假？";
const PATERNITY_SECTION: &str = "生育与育儿假规定 / 陪产假";

#[test]
fn everyday_words_the_documents_do_not_use_give_evidence_citing_the_section() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, result) = ask_json(tmp.path(), PATERNITY_EVERYDAY);
    assert_eq!(result["status"], "evidence", "{result:#}");
    assert_eq!(code, Some(4), "{result:#}");
    let citations = result["citations"].as_array().expect("citations");
    assert!(
        citations
            .iter()
            .any(|c| c["titlePath"] == PATERNITY_SECTION),
        "{result:#}"
    );
    // Every cited passage is one of the run's hits, quoted from it.
    let hits: HashSet<&str> = result["rounds"]
        .as_array()
        .expect("rounds")
        .iter()
        .flat_map(|r| r["hits"].as_array().expect("hits"))
        .filter_map(|h| h["chunkId"].as_str())
        .collect();
    for c in citations {
        let id = c["chunkId"].as_str().expect("chunkId");
        assert!(hits.contains(id), "{id} was not returned: {result:#}");
        assert!(!c["quote"].as_str().expect("quote").is_empty());
    }
    // Said plainly, in Chinese: evidence to read, not an answer.
    let answer = result["answer"].as_str().expect("answer text");
    assert!(answer.contains("没有哪段原文直接写明答案"), "{answer}");
}

#[test]
fn an_evidence_run_is_shown_as_evidence_and_audits_and_replays() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, stdout, stderr) = bundled(tmp.path(), &["ask", PATERNITY_EVERYDAY]);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(stdout.contains("没有哪段原文直接写明答案"), "{stdout}");
    assert!(
        !stdout.contains("根据知识库"),
        "not worded as an answer: {stdout}"
    );
    let sources = stdout.split("来源：").nth(1).expect("a sources list");
    assert!(sources.contains(PATERNITY_SECTION), "{stdout}");
    assert!(
        sources.contains('“'),
        "each source quotes its passage: {stdout}"
    );
    let trace = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("trace: ")
                .or_else(|| l.strip_prefix("轨迹："))
        })
        .expect("trace line")
        .trim()
        .to_string();
    // Round 1 searched the question's words and handed the question itself to the vector leg;
    // later rounds follow what the hits name and carry no question.
    let searches: Vec<Value> = std::fs::read_to_string(&trace)
        .expect("trace")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "search")
        .collect();
    assert_eq!(
        searches[0]["query"], PATERNITY_EVERYDAY,
        "{:#}",
        searches[0]
    );
    assert!(searches[1..].iter().all(|s| s.get("query").is_none()));
    let (code, audit, stderr) = bundled(tmp.path(), &["audit", &trace]);
    assert_eq!(code, Some(0), "{audit}\n{stderr}");
    assert!(audit.contains("evidence"), "{audit}");
    assert!(audit.contains(PATERNITY_SECTION), "{audit}");
    let (code, replay, stderr) = bundled(tmp.path(), &["replay", &trace]);
    assert_eq!(code, Some(0), "{replay}\n{stderr}");
}

#[test]
fn the_same_section_asked_in_its_own_words_is_answered() {
    let tmp = tempfile::tempdir().expect("tempdir");
    assert_answered_citing(tmp.path(), "陪产假有几天？", PATERNITY_SECTION);
}

/// "手机丢了怎么办" turns on one character: no index term is 丢 alone (the rules write 丢失),
/// and without it the question is only about phones, which the rule for changing phones answers.
/// Read where a passage writes it, 丢 makes the lost-device rule the answer.
#[test]
fn a_single_character_the_rules_write_inside_a_word_still_counts_in_the_answer() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, result) = ask_json(tmp.path(), "手机丢了怎么办？");
    assert_eq!(result["status"], "answered", "{result:#}");
    assert_eq!(code, Some(0));
    let citations = result["citations"].as_array().expect("citations");
    assert!(
        citations
            .iter()
            .all(|c| c["titlePath"] == "信息安全管理规范 / 设备丢失 / 报告时限"),
        "{result:#}"
    );
    let answer = result["answer"].as_str().expect("answer");
    assert!(
        answer.contains("丢失") && answer.contains("2小时内报告"),
        "{answer}"
    );
    assert!(!answer.contains("更换手机前"), "{answer}");
}

/// "薪水几号发" asks for a day of the month, and the knowledge base names none: the sick-leave
/// rule "前5天病假，按本人月工资的100%发放" has a number and the word for salary, but a duration is
/// no date. It is shown as the closest passage, never as the answer.
#[test]
fn a_question_for_a_date_is_not_answered_by_a_duration() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, result) = ask_json(tmp.path(), "薪水几号发？");
    assert_eq!(result["status"], "evidence", "{result:#}");
    assert_eq!(code, Some(4), "{result:#}");
    let reply = result["answer"]
        .as_str()
        .expect("the evidence is the reply");
    assert!(reply.starts_with("没有哪段原文直接写明答案"), "{reply}");
}

/// `ask` answers `question` (exit 0) citing the section `title_path`.
fn assert_answered_citing(dir: &Path, question: &str, title_path: &str) {
    let (code, result) = ask_json(dir, question);
    assert_eq!(result["status"], "answered", "{result:#}");
    assert_eq!(code, Some(0));
    assert!(
        result["citations"]
            .as_array()
            .expect("citations")
            .iter()
            .any(|c| c["titlePath"] == title_path),
        "{result:#}"
    );
}

#[test]
fn a_rare_word_no_document_uses_is_still_refused_in_the_questions_language() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 婚假 names a topic of its own, which the bundled knowledge does not hold.
    let (code, result) = ask_json(tmp.path(), "婚假可以休几天？");
    assert_eq!(result["status"], "insufficient_evidence", "{result:#}");
    assert_eq!(code, Some(1));
    assert!(
        result["citations"]
            .as_array()
            .expect("citations")
            .is_empty(),
        "{result:#}"
    );
    let message = result["answer"].as_str().expect("message");
    assert!(message.contains("知识库中没有足够的依据"), "{message}");
    assert!(message.contains("已尝试的词："), "{message}");
    assert!(!message.contains("Keywords tried"), "{message}");
}

#[test]
fn words_the_segmenter_made_up_and_no_document_uses_do_not_sink_a_question() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // jieba's HMM joins 要 + 交 into 要交, a word its dictionary lacks and no document uses: it
    // stands for its dictionary words (none of two characters), so it no longer counts against
    // the section on sick-leave papers, which is shown first. 礼拜 and 回来 are in no document
    // either, so the section is evidence rather than an answer.
    let (code, result) = ask_json(tmp.path(), "病了一个礼拜没上班，回来要交什么材料？");
    assert_eq!(result["status"], "evidence", "{result:#}");
    assert_eq!(code, Some(4));
    assert_eq!(
        result["citations"][0]["titlePath"], "病假管理规定 / 证明材料",
        "{result:#}"
    );
}

/// The fusion every search round of a run's trace records.
fn trace_fusions(json: &Value) -> Vec<String> {
    let path = json["trace"].as_str().expect("the run's trace file");
    std::fs::read_to_string(path)
        .expect("read the trace")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["type"] == "search")
        .map(|e| e["fusion"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_agents_fusion_is_the_operators_choice_and_is_traced() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let question = "住深圳的酒店每晚最多报多少？";
    let (_, default) = ask_json(tmp.path(), question);
    let fusions = trace_fusions(&default);
    assert!(!fusions.is_empty(), "{default}");
    assert!(fusions.iter().all(|f| f == "agree:0.5"), "{fusions:?}");

    let (_, stdout, stderr) = bundled(
        tmp.path(),
        &["--agent-fusion", "bm25", "ask", "--json", question],
    );
    let chosen: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json output ({e}): {stdout}\n{stderr}"));
    let fusions = trace_fusions(&chosen);
    assert!(!fusions.is_empty(), "{chosen}");
    assert!(fusions.iter().all(|f| f == "bm25"), "{fusions:?}");

    let (code, _, stderr) = bundled(tmp.path(), &["--agent-fusion", "loudest", "ask", question]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--agent-fusion"), "{stderr}");

    // Every search's fusion, set through the environment: the agent's too.
    let (_, stdout, stderr) = bundled_env(
        tmp.path(),
        &[("RAGTRAIL_SEARCH_FUSION", "minmax:0.7")],
        &["ask", "--json", question],
    );
    let chosen: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json output ({e}): {stdout}\n{stderr}"));
    let fusions = trace_fusions(&chosen);
    assert!(!fusions.is_empty(), "{chosen}");
    assert!(fusions.iter().all(|f| f == "minmax:0.7"), "{fusions:?}");
}
