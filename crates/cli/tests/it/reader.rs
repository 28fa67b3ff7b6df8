//! The reader mode (`--planner reader`) against a scripted OpenAI-compatible server over real
//! HTTP: the offline planner searches, the model reads the numbered passages once and answers.
//! Each script reacts to the passages it was sent (it cites a passage by the number the request
//! gave it), and every failure met with a real model has its case here: `NONE`, a passage
//! number that was not shown, an answer citing nothing, a figure the passages do not hold, a
//! server that fails. In all of them the run ends as the offline planner's would.

use std::time::Duration;

use crate::common::chat_server::{Recorded, Reply, ScriptedLlm, completion, error};
use crate::common::*;
use ragtrail::trace::{self, EventBody, LlmTurn, RunStatus};
use ragtrail::{AgentOutcome, ChatConfig, Engine, OfflinePlanner, ReaderPlanner, RetryPolicy};
use serde_json::{Value, json};

fn config(base_url: &str) -> ChatConfig {
    let mut c = ChatConfig::new(base_url, "scripted-model");
    c.policy = RetryPolicy {
        max_retries: 1,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        jitter: false,
        max_retry_after: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(10),
    };
    c.run_budget = Some(Duration::from_secs(30));
    c
}

fn small() -> (Workspace, Engine) {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    (ws, engine)
}

fn text_reply(text: &str) -> Reply {
    completion(json!({"role": "assistant", "content": text}))
}

/// A model that answers `answer` citing the passage titled `title` by its number (`{n}` in
/// `answer`), whatever number the run gave it.
fn citing(title: &'static str, answer: &'static str) -> ScriptedLlm {
    ScriptedLlm::start(config, move |reqs: &[Recorded]| {
        let n = passage_number(reqs.last().expect("request"), title);
        text_reply(&answer.replace("{n}", &n.to_string()))
    })
}

/// The passage numbered `n` in the request's user message: its titlePath line.
fn passage_title(request: &Recorded, n: usize) -> Option<String> {
    let user = request.messages().last()?["content"].as_str()?.to_string();
    let marker = format!("[{n}] ");
    let line = user.lines().find(|l| l.starts_with(&marker))?;
    Some(line[marker.len()..].to_string())
}

/// The number of the passage whose titlePath contains `title`.
fn passage_number(request: &Recorded, title: &str) -> usize {
    (1..=10)
        .find(|&n| passage_title(request, n).is_some_and(|t| t.contains(title)))
        .unwrap_or_else(|| panic!("no passage titled {title}: {:#?}", request.messages()))
}

fn ask(scripted: &ScriptedLlm, ws: &Workspace, engine: &Engine, q: &str) -> AgentOutcome {
    let mut planner = ReaderPlanner::new(&scripted.config).expect("reader");
    ws.ask(engine, &mut planner, q)
}

fn model_turns(outcome: &AgentOutcome) -> Vec<LlmTurn> {
    let path = &outcome.trace.as_ref().expect("trace").path;
    trace::read_trace(path)
        .expect("read trace")
        .events()
        .filter_map(|e| match &e.body {
            EventBody::LlmTurn(t) if t.message_count.is_some() => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// What the offline planner alone replies.
fn offline(ws: &Workspace, engine: &Engine, q: &str) -> AgentOutcome {
    ws.ask(engine, &mut OfflinePlanner::new(), q)
}

fn cited_ids(o: &AgentOutcome) -> Vec<String> {
    o.answer
        .as_ref()
        .map(|a| a.citations.iter().map(|c| c.chunk_id.clone()).collect())
        .unwrap_or_default()
}

#[test]
fn the_models_numbered_citation_becomes_a_checked_quote_of_that_chunk() {
    let (ws, engine) = small();
    let scripted = citing(
        "Annual leave",
        "Employees earn 10 days of annual leave per year, up to 20 days [{n}].",
    );
    let q = "How many days of annual leave do employees earn?";
    let outcome = ask(&scripted, &ws, &engine, q);
    assert_eq!(outcome.status, RunStatus::Answered, "{outcome:?}");
    let answer = outcome.answer.as_ref().expect("answer");
    // The model's [n] is renumbered to the citation list's [1].
    assert_eq!(
        answer.text,
        "Employees earn 10 days of annual leave per year, up to 20 days [1]."
    );
    assert_eq!(answer.citations.len(), 1);
    let c = &answer.citations[0];
    assert!(c.title_path.ends_with("Annual leave"), "{c:?}");
    assert_eq!(
        c.quote,
        "Employees earn 10 days of annual leave per year of service, up to 20 days."
    );
    assert_eq!(outcome.planner, "reader");
    assert_eq!(outcome.model.as_deref(), Some("scripted-model"));
    // One model call, its usage recorded in the outcome and the trace.
    assert_eq!(outcome.model_calls.len(), 1);
    assert_eq!(outcome.model_calls[0].prompt_tokens, Some(100));
    let turns = model_turns(&outcome);
    assert_eq!(turns.len(), 1);
    assert_eq!(
        turns[0].usage.as_ref().map(|u| u.completion_tokens),
        Some(20)
    );
    assert!(turns[0].reply.as_deref().unwrap_or("").contains("10 days"));
    assert_eq!(turns[0].note, None);
    // The request: plain text (no tools), temperature 0, English rules, numbered passages.
    let reqs = scripted.requests();
    assert_eq!(reqs.len(), 1);
    let body = &reqs[0].body;
    assert_eq!(body.get("tools"), None, "{body}");
    assert_eq!(body["temperature"], json!(0.0));
    assert!(body["max_tokens"].as_u64().is_some_and(|m| m <= 320));
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("single word NONE"), "{system}");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.starts_with("Passages:\n[1] "), "{user}");
    assert!(user.ends_with(&format!("Question: {q}")), "{user}");
    assert!(user.chars().count() < 2600, "{user}");
}

#[test]
fn a_chinese_question_is_read_in_chinese() {
    let (ws, engine) = small();
    let scripted = citing(
        "火车票",
        "高铁票须提供铁路电子客票报销凭证，截图不予报销【{n}】。",
    );
    let outcome = ask(&scripted, &ws, &engine, "高铁票报销需要什么凭证？");
    assert_eq!(outcome.status, RunStatus::Answered, "{outcome:?}");
    let answer = outcome.answer.as_ref().expect("answer");
    assert_eq!(
        answer.text,
        "高铁票须提供铁路电子客票报销凭证，截图不予报销[1]。"
    );
    assert_eq!(
        answer.citations[0].quote,
        "高铁票须提供铁路电子客票报销凭证，截图不予报销。"
    );
    let reqs = scripted.requests();
    let system = reqs[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("用中文回答"), "{system}");
    let user = reqs[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(user.starts_with("段落：\n[1] "), "{user}");
    assert!(user.ends_with("问题：高铁票报销需要什么凭证？"), "{user}");
}

/// Every reply that is not a checked answer leaves the offline planner's reply, the same
/// status and citations, with the model's words and why they were not used in the trace.
#[test]
fn unusable_replies_fall_back_to_the_offline_reply() {
    let (ws, engine) = small();
    let q = "How many days of annual leave do employees earn?";
    let expected = offline(&ws, &engine, q);
    // The offline planner answers; the model did not confirm it, so it is given as evidence.
    assert_eq!(expected.status, RunStatus::Answered);
    let cases: [(&str, &str); 6] = [
        (
            "Employees earn 10 days [7].",
            "the reply cites passage 7, but",
        ),
        (
            "Employees earn 10 days of annual leave.",
            "the reply cites no passage",
        ),
        // A figure of the model's own (the passages say 10 and 20).
        (
            "Employees earn 15 days of annual leave [1].",
            "the answer's figure 15 is in no cited passage",
        ),
        ("[1]", "the reply has citations but no answer"),
        // Qwen2.5-Coder-1.5B: a yes that restates the question, and words of its own beside
        // a passage that shares a few of the question's.
        (
            "Yes, employees earn days of annual leave [1].",
            "0 of the 1 words the answer adds",
        ),
        (
            "Employees earn annual leave through the HR portal every quarter [1].",
            "0 of the",
        ),
    ];
    for (reply, why) in cases {
        let scripted = ScriptedLlm::start(config, move |_: &[Recorded]| text_reply(reply));
        let outcome = ask(&scripted, &ws, &engine, q);
        // Qwen2.5-Coder-1.5B on handbook-en: "3.85% of adjusted basic pay …" for a yearly bonus
        // the knowledge base does not state (refused); the offline answer it did not confirm
        // was given as the answer. Now the same passages are shown, as evidence.
        assert_eq!(outcome.status, RunStatus::Evidence, "{reply}: {outcome:?}");
        assert_eq!(cited_ids(&outcome), cited_ids(&expected), "{reply}");
        let text = &outcome.answer.as_ref().expect("evidence").text;
        assert!(
            text.starts_with("No passage states the answer"),
            "{reply}: {text}"
        );
        assert!(
            outcome.reason.contains("did not pass the checks"),
            "{reply}: {}",
            outcome.reason
        );
        let turns = model_turns(&outcome);
        assert_eq!(turns.len(), 1, "{reply}");
        assert_eq!(turns[0].reply.as_deref(), Some(reply));
        let note = turns[0].note.clone().unwrap_or_default();
        assert!(note.starts_with(why), "{reply}: {note}");
        assert_eq!(outcome.model_calls.len(), 1);
    }
}

/// Qwen2.5-Coder-1.5B read the passages of an unanswerable question the offline planner
/// answered (handbook-en: a yearly bonus, answered from a sentence about award percentages)
/// and said `NONE`: the offline answer is shown as evidence instead, the same passages with
/// no claim, in the question's language.
#[test]
fn the_models_none_turns_an_offline_answer_into_evidence() {
    let (ws, engine) = small();
    let q = "How many days of annual leave do employees earn?";
    let expected = offline(&ws, &engine, q);
    assert_eq!(expected.status, RunStatus::Answered, "{expected:?}");
    let scripted = ScriptedLlm::start(config, |_: &[Recorded]| text_reply("NONE"));
    let outcome = ask(&scripted, &ws, &engine, q);
    assert_eq!(outcome.status, RunStatus::Evidence, "{outcome:?}");
    assert_eq!(cited_ids(&outcome), cited_ids(&expected));
    let answer = outcome.answer.as_ref().expect("evidence");
    let offline_text = &expected.answer.as_ref().expect("answer").text;
    assert_ne!(
        &answer.text, offline_text,
        "shown as evidence, not as the answer"
    );
    assert!(
        answer.text.starts_with("No passage states the answer"),
        "{}",
        answer.text
    );
    assert!(
        outcome.reason.contains("the model read the passages"),
        "{}",
        outcome.reason
    );
    let turns = model_turns(&outcome);
    assert_eq!(
        turns[0].note.as_deref(),
        Some("the model said no passage answers")
    );
    // In Chinese, told in Chinese.
    let q = "高铁票报销要什么凭证？";
    let expected = offline(&ws, &engine, q);
    assert_eq!(expected.status, RunStatus::Answered, "{expected:?}");
    let outcome = ask(&scripted, &ws, &engine, q);
    assert_eq!(outcome.status, RunStatus::Evidence, "{q}");
    assert_eq!(cited_ids(&outcome), cited_ids(&expected), "{q}");
    let text = &outcome.answer.as_ref().expect("evidence").text;
    assert!(text.starts_with("没有哪段原文直接写明答案"), "{text}");
}

/// Qwen2.5-Coder-1.5B on handbook-en: "4 hours of sick leave per pay period. [1]" and "2 weeks
/// (80 hours) …" were refused, their figures "in no cited passage", which wrote "four hours"
/// and "two weeks". A passage's number words are read as digits.
#[test]
fn a_figure_the_passage_writes_in_words_is_the_passages() {
    let (ws, engine) = small();
    let scripted = citing("Sick leave", "For sick leave longer than 2 days [{n}].");
    let outcome = ask(
        &scripted,
        &ws,
        &engine,
        "When is a doctor's note required for sick leave?",
    );
    let turns = model_turns(&outcome);
    assert_eq!(turns.len(), 1, "{outcome:?}");
    assert_eq!(turns[0].note, None, "{:?}", turns[0].reply);
    assert_eq!(outcome.status, RunStatus::Answered);
    let answer = outcome.answer.as_ref().expect("answer");
    assert_eq!(answer.text, "For sick leave longer than 2 days [1].");
    assert!(answer.citations[0].title_path.contains("Sick leave"));
    assert!(
        answer.citations[0].quote.contains("two days"),
        "{:?}",
        answer.citations
    );
}

/// A model that answers a question the knowledge base does not cover is never asked: the
/// offline planner's refusal of an unknown subject stands.
#[test]
fn a_subject_no_passage_names_is_refused_without_asking_the_model() {
    let (ws, engine) = small();
    let scripted = ScriptedLlm::start(config, |_: &[Recorded]| {
        text_reply("The company pays 3 months of sabbatical [1].")
    });
    let outcome = ask(
        &scripted,
        &ws,
        &engine,
        "How long is the sabbatical for pilots?",
    );
    assert_eq!(
        outcome.status,
        RunStatus::InsufficientEvidence,
        "{outcome:?}"
    );
    assert!(scripted.requests().is_empty());
    assert!(outcome.model_calls.is_empty());
}

/// A server that fails (after its retries) leaves the offline reply; the error is traced.
#[test]
fn a_failing_server_leaves_the_offline_reply() {
    let (ws, engine) = small();
    let q = "How many days of annual leave do employees earn?";
    let expected = offline(&ws, &engine, q);
    let scripted = ScriptedLlm::start(config, |_: &[Recorded]| error(500, "model crashed", vec![]));
    let outcome = ask(&scripted, &ws, &engine, q);
    assert_eq!(outcome.status, expected.status, "{outcome:?}");
    assert_eq!(cited_ids(&outcome), cited_ids(&expected));
    let turns = model_turns(&outcome);
    assert_eq!(turns.len(), 1);
    let reply = turns[0].reply.clone().unwrap_or_default();
    assert!(
        reply.starts_with("error: ") && reply.contains("500"),
        "{reply}"
    );
    assert!(scripted.requests().len() >= 2, "retried once");
}

/// `ask --planner reader --json` names the mode and the model, and counts the call.
#[test]
fn ask_json_names_the_reader_mode() {
    let (ws, _engine) = small();
    let scripted = citing(
        "Sick leave",
        "A doctor's note is required for sick leave longer than two days [{n}].",
    );
    let base_url = scripted.base_url.clone();
    let out = crate::common::cli::ragtrail_with_env(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--knowledge",
            "knowledge",
            "ask",
            "--planner",
            "reader",
            "--json",
            "--no-trace",
            "--today",
            "2026-11-30",
            "When is a doctor's note required for sick leave?",
        ],
        &[
            ("RAGTRAIL_LLM_BASE_URL", base_url.as_str()),
            ("RAGTRAIL_LLM_MODEL", "scripted-model"),
        ],
    );
    let (stdout, stderr) = crate::common::cli::text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["status"], "answered", "{v}");
    assert_eq!(v["planner"], "reader");
    assert_eq!(v["model"], "scripted-model");
    assert_eq!(v["modelUsage"]["calls"], 1);
    assert_eq!(v["modelUsage"]["promptTokens"], 100);
    assert!(
        v["citations"][0]["titlePath"]
            .as_str()
            .unwrap()
            .ends_with("Sick leave"),
        "{v}"
    );
}

/// `eval agent --planner reader` counts each question's model calls, tokens and model time.
#[test]
fn eval_agent_reports_the_readers_model_usage() {
    let (ws, _engine) = small();
    std::fs::write(
        ws.dir.path().join("golden.jsonl"),
        concat!(
            r#"{"id":"en-1","lang":"en","answerable":true,"turns":[{"question":"When is a doctor's note required for sick leave?","expected":["Leave Policy / Sick leave"],"facts":["two days"]}]}"#,
            "\n",
            r#"{"id":"en-2","lang":"en","answerable":false,"turns":[{"question":"How long is the sabbatical for pilots?"}]}"#,
            "\n"
        ),
    )
    .expect("golden");
    let scripted = citing(
        "Sick leave",
        "A doctor's note is required for sick leave longer than two days [{n}].",
    );
    let base_url = scripted.base_url.clone();
    let out = crate::common::cli::ragtrail_with_env(
        ws.dir.path(),
        &[
            "--data-dir",
            "data",
            "--knowledge",
            "knowledge",
            "eval",
            "agent",
            "--golden",
            "golden.jsonl",
            "--out",
            "run",
            "--planner",
            "reader",
            "--today",
            "2026-11-30",
            "--json",
        ],
        &[
            ("RAGTRAIL_LLM_BASE_URL", base_url.as_str()),
            ("RAGTRAIL_LLM_MODEL", "scripted-model"),
        ],
    );
    let (stdout, stderr) = crate::common::cli::text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["items"][0]["status"], "answered", "{v}");
    assert_eq!(v["items"][0]["modelUsage"]["calls"], 1);
    assert_eq!(v["items"][1]["status"], "insufficient_evidence");
    assert_eq!(v["items"][1]["modelUsage"]["calls"], 0);
    // One call of 100 + 20 tokens over two questions.
    assert_eq!(v["modelCallsPerQuestion"], 0.5);
    assert_eq!(v["promptTokensPerQuestion"], 50.0);
    assert_eq!(v["completionTokensPerQuestion"], 10.0);
    assert_eq!(v["factsFound"], 1.0);
    let md = std::fs::read_to_string(ws.dir.path().join("run/report.md")).expect("report.md");
    assert!(
        md.contains("| model calls, prompt + completion tokens, model seconds per question | 0.50, 50 + 10, "),
        "{md}"
    );
}
