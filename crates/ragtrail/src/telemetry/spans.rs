//! A finished run's recorded events turned into spans, following the OpenTelemetry GenAI
//! conventions: one `invoke_agent` span for the run, a `retrieval` span per search round and a
//! `chat` span per model call under it. Each span also carries the OpenInference names
//! (`openinference.span.kind`, `retrieval.documents.N.document.*`, `llm.*`) that Phoenix's
//! trace view reads.
//!
//! The trace id is the run id (both are 16 bytes), so a trace found in a dashboard is the run
//! `ragtrail audit` reads; span ids are derived from it, so they are the same however often the
//! spans are built. Every span carries `ragtrail.run.id` and, when the run wrote one,
//! `ragtrail.trace.file`.
//!
//! Content (the question, the answer, snippets, the query text, titlePaths, the model's
//! decision) is added only with `capture_content`; ids, scores, keywords, counts, timings and
//! the outcome always are. Nothing here sees an API key or another run's events.

use std::time::{Duration, SystemTime};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::agent::observe::{ObservedEvent, ObservedRun};
use crate::trace::{AnswerEvent, EventBody, LlmTurn, RunStarted, RunStatus, SearchRound};

/// One attribute value (the OTLP `AnyValue` kinds used here).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    StrArray(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    Client,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpanStatus {
    Unset,
    Error(String),
}

/// One span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_id: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(String, AttrValue)>,
    pub status: SpanStatus,
}

impl Span {
    fn attr(&mut self, key: &str, value: AttrValue) {
        self.attributes.push((key.to_string(), value));
    }
    fn str(&mut self, key: &str, value: impl Into<String>) {
        self.attr(key, AttrValue::Str(value.into()));
    }
    fn int(&mut self, key: &str, value: impl Into<i64>) {
        self.attr(key, AttrValue::Int(value.into()));
    }
}

/// The name the conventions give the agent (`gen_ai.agent.name`).
pub const AGENT_NAME: &str = "ragtrail";

/// The spans of one finished run: the agent span first, then its children in run order.
pub fn run_spans(run: &ObservedRun<'_>, capture_content: bool) -> Vec<Span> {
    let trace_id = *run.run_id.as_bytes();
    let agent_id = span_id(&trace_id, "agent");
    let started = run.events.iter().find_map(|e| match &e.body {
        EventBody::RunStarted(s) => Some(s),
        _ => None,
    });
    let common = |span: &mut Span| {
        span.str("ragtrail.run.id", run.run_id.to_string());
        if let Some(file) = &run.trace_file {
            span.str("ragtrail.trace.file", file.clone());
        }
        if let Some(session) = started.and_then(|s| s.session_id.as_ref()) {
            span.str("gen_ai.conversation.id", session.clone());
        }
    };
    let new_span = |id: [u8; 8], parent: Option<[u8; 8]>, name: String, kind, start, end| Span {
        trace_id,
        span_id: id,
        parent_id: parent,
        name,
        kind,
        start,
        end,
        attributes: Vec::new(),
        status: SpanStatus::Unset,
    };

    let mut agent = new_span(
        agent_id,
        None,
        format!("invoke_agent {AGENT_NAME}"),
        SpanKind::Internal,
        run.started,
        run.finished,
    );
    agent.str("gen_ai.operation.name", "invoke_agent");
    agent.str("gen_ai.agent.name", AGENT_NAME);
    agent.str("openinference.span.kind", "AGENT");
    common(&mut agent);
    agent.str("ragtrail.run.status", run.status.name());
    agent.str("ragtrail.run.reason", run.reason);
    if let Some(s) = started {
        agent_started(&mut agent, s, capture_content);
    }
    if run.status == RunStatus::Error {
        let kind = run.reason.split(':').next().unwrap_or(run.reason);
        agent.str("error.type", kind);
        agent.status = SpanStatus::Error(run.reason.to_string());
    }

    let mut children = Vec::new();
    let mut rounds = 0i64;
    // Each step ended when its event was recorded and began when the one before it was.
    let mut previous = run.started;
    for ObservedEvent { at, body } in run.events {
        match body {
            EventBody::Search(search) if !search.repeated => {
                rounds += 1;
                let id = span_id(&trace_id, &format!("search:{}", children.len()));
                let mut span = new_span(
                    id,
                    Some(agent_id),
                    "retrieval".to_string(),
                    SpanKind::Internal,
                    previous,
                    *at,
                );
                common(&mut span);
                retrieval(&mut span, search, started, capture_content);
                children.push(span);
            }
            EventBody::LlmTurn(turn) if turn.message_count.is_some() => {
                let end = *at;
                let took = Duration::from_secs_f64(turn.latency_ms.max(0.0) / 1e3);
                let start = end.checked_sub(took).unwrap_or(end).max(previous);
                let model = started.and_then(|s| s.model.clone()).unwrap_or_default();
                let id = span_id(&trace_id, &format!("chat:{}", children.len()));
                let name = if model.is_empty() {
                    "chat".to_string()
                } else {
                    format!("chat {model}")
                };
                let mut span = new_span(id, Some(agent_id), name, SpanKind::Client, start, end);
                common(&mut span);
                chat(&mut span, turn, &model, capture_content);
                children.push(span);
            }
            EventBody::Answer(answer) if capture_content => answer_content(&mut agent, answer),
            _ => {}
        }
        previous = *at;
    }
    agent.int("ragtrail.run.rounds", rounds);
    let mut spans = vec![agent];
    spans.extend(children);
    spans
}

fn agent_started(agent: &mut Span, s: &RunStarted, capture_content: bool) {
    agent.str("ragtrail.planner", s.planner.clone());
    if let Some(model) = &s.model {
        agent.str("gen_ai.request.model", model.clone());
    }
    if !s.knowledge_base.is_empty() {
        agent.str("gen_ai.data_source.id", s.knowledge_base.clone());
    }
    agent.str("ragtrail.access.tenant", s.access.tenant.clone());
    if let Some(caller) = &s.caller {
        agent.str("ragtrail.caller", caller.clone());
    }
    if capture_content {
        let messages =
            json!([{"role": "user", "parts": [{"type": "text", "content": s.question}]}]);
        agent.str("gen_ai.input.messages", messages.to_string());
        agent.str("input.value", s.question.clone());
    }
}

/// The run's last answer event is its answer (earlier ones were refused).
fn answer_content(agent: &mut Span, answer: &AnswerEvent) {
    agent
        .attributes
        .retain(|(k, _)| k != "gen_ai.output.messages" && k != "output.value");
    let messages = json!([{
        "role": "assistant",
        "parts": [{"type": "text", "content": answer.text}],
        "finish_reason": "stop",
    }]);
    agent.str("gen_ai.output.messages", messages.to_string());
    agent.str("output.value", answer.text.clone());
}

fn retrieval(
    span: &mut Span,
    search: &SearchRound,
    started: Option<&RunStarted>,
    capture_content: bool,
) {
    span.str("gen_ai.operation.name", "retrieval");
    span.str("openinference.span.kind", "RETRIEVER");
    if let Some(kb) = started.map(|s| &s.knowledge_base).filter(|k| !k.is_empty()) {
        span.str("gen_ai.data_source.id", kb.clone());
    }
    span.int("gen_ai.retrieval.top_k", search.top_k);
    span.int("ragtrail.search.round", search.round);
    span.attr(
        "ragtrail.search.keywords",
        AttrValue::StrArray(search.keywords.clone()),
    );
    span.str("input.value", search.keywords.join(" "));
    span.str("ragtrail.search.fusion", search.fusion.clone());
    span.int("ragtrail.search.hits", search.hits.len() as i64);
    span.attr(
        "ragtrail.search.sufficient",
        AttrValue::Bool(search.sufficiency.sufficient),
    );
    if let Some(round) = search.cached {
        span.int("ragtrail.search.cached_round", round);
    }
    let documents: Vec<_> = (search.hits.iter())
        .map(|h| json!({"id": h.hit.chunk_id, "score": h.hit.score}))
        .collect();
    span.str(
        "gen_ai.retrieval.documents",
        serde_json::Value::Array(documents).to_string(),
    );
    for (i, h) in search.hits.iter().enumerate() {
        let key = |field: &str| format!("retrieval.documents.{i}.document.{field}");
        span.str(&key("id"), h.hit.chunk_id.clone());
        span.attr(&key("score"), AttrValue::Double(h.hit.score));
        if capture_content {
            span.str(&key("content"), h.hit.snippet.clone());
            let meta = json!({"titlePath": h.hit.title_path, "sourceUri": h.hit.source_uri});
            span.str(&key("metadata"), meta.to_string());
        }
    }
    if capture_content && let Some(query) = &search.query {
        span.str("gen_ai.retrieval.query.text", query.clone());
    }
}

fn chat(span: &mut Span, turn: &LlmTurn, model: &str, capture_content: bool) {
    span.str("gen_ai.operation.name", "chat");
    span.str("openinference.span.kind", "LLM");
    if !model.is_empty() {
        span.str("gen_ai.request.model", model);
        span.str("llm.model_name", model);
    }
    if let Some(usage) = &turn.usage {
        span.int("gen_ai.usage.input_tokens", usage.prompt_tokens);
        span.int("gen_ai.usage.output_tokens", usage.completion_tokens);
        span.int("llm.token_count.prompt", usage.prompt_tokens);
        span.int("llm.token_count.completion", usage.completion_tokens);
    }
    if let Some(reason) = &turn.finish_reason {
        span.attr(
            "gen_ai.response.finish_reasons",
            AttrValue::StrArray(vec![reason.clone()]),
        );
    }
    span.int("ragtrail.llm.turn", turn.turn);
    span.int("ragtrail.llm.retries", turn.retries);
    span.attr(
        "ragtrail.llm.latency_ms",
        AttrValue::Double(turn.latency_ms),
    );
    if capture_content {
        span.str("output.value", turn.output.to_string());
    }
}

/// A span id derived from the trace id and the span's place in the run (never all zeros).
fn span_id(trace_id: &[u8; 16], label: &str) -> [u8; 8] {
    let digest = Sha256::new()
        .chain_update(trace_id)
        .chain_update(label.as_bytes())
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn event<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("event")
    }

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + ms)
    }

    /// A run of the LLM planner: one model call, one search with two hits, a second call, the
    /// answer.
    fn events() -> Vec<ObservedEvent> {
        let started: RunStarted = event(json!({
            "question": "How many days of annual leave?", "access": {"tenant": "acme", "roles": []},
            "planner": "llm", "model": "smollm2", "knowledgeBase": "kb-1", "sessionId": "s-9",
        }));
        let turn = |n: u32, reason: &str| LlmTurn {
            turn: n,
            output: json!({"toolCalls": []}),
            message_count: Some(2),
            usage: Some(crate::trace::TokenUsage {
                prompt_tokens: 100,
                completion_tokens: 7,
            }),
            latency_ms: 40.0,
            retries: 0,
            finish_reason: Some(reason.into()),
            reply: None,
            note: None,
            context_fit: None,
        };
        let search: SearchRound = event(json!({
            "round": 1, "keywords": ["annual leave", "days"], "reason": "r", "topK": 5,
            "fusion": "standout", "filters": {"tenant": "acme", "roles": []},
            "legs": {}, "sufficiency": {"sufficient": true},
            "query": "How many days of annual leave?",
            "hits": [
                {"chunkId": "leave.md#1", "titlePath": "Leave / Annual", "snippet": "Staff get 15 days.",
                 "sourceUri": "leave.md", "score": 0.9, "metadata": {}, "contentHash": "h1"},
                {"chunkId": "leave.md#2", "titlePath": "Leave / Sick", "snippet": "Sick leave is paid.",
                 "sourceUri": "leave.md", "score": 0.4, "metadata": {}, "contentHash": "h2"},
            ],
        }));
        let answer = AnswerEvent {
            text: "15 days [1]".into(),
            grounded: true,
            ..Default::default()
        };
        vec![
            ObservedEvent {
                at: at(1),
                body: EventBody::RunStarted(started),
            },
            ObservedEvent {
                at: at(50),
                body: EventBody::LlmTurn(turn(0, "tool_calls")),
            },
            ObservedEvent {
                at: at(60),
                body: EventBody::Search(search),
            },
            ObservedEvent {
                at: at(110),
                body: EventBody::LlmTurn(turn(1, "stop")),
            },
            ObservedEvent {
                at: at(111),
                body: EventBody::Answer(answer),
            },
        ]
    }

    fn run<'a>(events: &'a [ObservedEvent], status: RunStatus, reason: &'a str) -> ObservedRun<'a> {
        ObservedRun {
            run_id: uuid::Uuid::parse_str("01970000-0000-7000-8000-0000000000aa").unwrap(),
            trace_file: Some("20261130T062501Z-01970000-0000-7000-8000-0000000000aa.jsonl".into()),
            started: at(0),
            finished: at(112),
            status,
            reason,
            events,
        }
    }

    fn attr(span: &Span, key: &str) -> Option<AttrValue> {
        span.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn s(v: &str) -> Option<AttrValue> {
        Some(AttrValue::Str(v.into()))
    }

    #[test]
    fn one_agent_span_with_a_chat_and_retrieval_child_per_step() {
        let events = events();
        let spans = run_spans(&run(&events, RunStatus::Answered, "answered"), false);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "invoke_agent ragtrail",
                "chat smollm2",
                "retrieval",
                "chat smollm2"
            ]
        );
        let agent = &spans[0];
        assert_eq!(agent.parent_id, None);
        assert_eq!(
            agent.trace_id,
            *run(&events, RunStatus::Answered, "").run_id.as_bytes()
        );
        for child in &spans[1..] {
            assert_eq!(child.parent_id, Some(agent.span_id));
            assert_eq!(child.trace_id, agent.trace_id);
            assert_ne!(child.span_id, agent.span_id);
        }
        for span in &spans {
            assert_eq!(
                attr(span, "ragtrail.run.id"),
                s("01970000-0000-7000-8000-0000000000aa")
            );
            assert_eq!(
                attr(span, "ragtrail.trace.file"),
                s("20261130T062501Z-01970000-0000-7000-8000-0000000000aa.jsonl")
            );
            assert_eq!(attr(span, "gen_ai.conversation.id"), s("s-9"));
        }
        assert_eq!(attr(agent, "gen_ai.operation.name"), s("invoke_agent"));
        assert_eq!(attr(agent, "ragtrail.run.status"), s("answered"));
        assert_eq!(attr(agent, "ragtrail.run.rounds"), Some(AttrValue::Int(1)));
        assert_eq!(agent.status, SpanStatus::Unset);

        let chat = &spans[1];
        assert_eq!(chat.kind, SpanKind::Client);
        assert_eq!(
            attr(chat, "gen_ai.usage.input_tokens"),
            Some(AttrValue::Int(100))
        );
        assert_eq!(
            attr(chat, "gen_ai.response.finish_reasons"),
            Some(AttrValue::StrArray(vec!["tool_calls".into()]))
        );
        // The call took its latency, ending when its turn was recorded.
        assert_eq!(chat.start, at(10));
        assert_eq!(chat.end, at(50));

        let search = &spans[2];
        assert_eq!((search.start, search.end), (at(50), at(60)));
        assert_eq!(
            attr(search, "gen_ai.retrieval.top_k"),
            Some(AttrValue::Int(5))
        );
        assert_eq!(attr(search, "ragtrail.search.fusion"), s("standout"));
        assert_eq!(
            attr(search, "ragtrail.search.keywords"),
            Some(AttrValue::StrArray(vec![
                "annual leave".into(),
                "days".into()
            ]))
        );
        assert_eq!(
            attr(search, "gen_ai.retrieval.documents"),
            s(r#"[{"id":"leave.md#1","score":0.9},{"id":"leave.md#2","score":0.4}]"#)
        );
        assert_eq!(
            attr(search, "retrieval.documents.1.document.id"),
            s("leave.md#2")
        );
    }

    #[test]
    fn content_only_when_asked_for() {
        let events = events();
        let off = run_spans(&run(&events, RunStatus::Answered, "answered"), false);
        let text: String = format!("{off:?}");
        for content in [
            "How many days",
            "Staff get 15 days",
            "15 days [1]",
            "Leave / Annual",
        ] {
            assert!(
                !text.contains(content),
                "{content} exported without capture"
            );
        }
        let on = run_spans(&run(&events, RunStatus::Answered, "answered"), true);
        assert_eq!(
            attr(&on[0], "input.value"),
            s("How many days of annual leave?")
        );
        assert_eq!(attr(&on[0], "output.value"), s("15 days [1]"));
        assert_eq!(
            attr(&on[2], "retrieval.documents.0.document.content"),
            s("Staff get 15 days.")
        );
        assert_eq!(
            attr(&on[2], "gen_ai.retrieval.query.text"),
            s("How many days of annual leave?")
        );
    }

    #[test]
    fn an_error_run_is_an_error_span_and_ids_are_stable() {
        let events = events();
        let a = run_spans(
            &run(&events, RunStatus::Error, "planner_error: no model"),
            false,
        );
        assert_eq!(
            a[0].status,
            SpanStatus::Error("planner_error: no model".into())
        );
        assert_eq!(attr(&a[0], "error.type"), s("planner_error"));
        let b = run_spans(
            &run(&events, RunStatus::Error, "planner_error: no model"),
            false,
        );
        let ids = |spans: &[Span]| spans.iter().map(|s| s.span_id).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b));
    }
}
