//! `/chat/completions` with tools: the messages sent, the reply read back, and a blocking client.
//!
//! Replies are read leniently, as servers differ: `content` may be null, a string or a list of
//! text parts; `arguments` a JSON string (the standard) or an object; a tool call without an id
//! gets none here (the caller names it). A 2xx answer that is not a chat completion is asked
//! again, up to the policy's retries, and counted as retries.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::LlmError;
use super::config::ChatConfig;
use crate::http::{BodyLimit, HttpError, JsonClient};

/// One message of the conversation, as sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        /// Sent as `""` when the reply had only tool calls: llama-cpp-python's server refuses
        /// `null` (HTTP 500, "Input should be a valid string") and its chat templates fail on a
        /// missing `content` (HTTP 500, "'dict object' has no attribute 'content'"); OpenAI
        /// accepts all three.
        #[serde(serialize_with = "empty_if_none")]
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

fn empty_if_none<S: serde::Serializer>(content: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(content.as_deref().unwrap_or(""))
}

/// A tool call as it is sent back in the assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireFunction {
    pub name: String,
    /// JSON text, as the model produced it.
    pub arguments: String,
}

impl WireToolCall {
    pub fn function(id: String, name: String, arguments: String) -> Self {
        Self {
            id,
            kind: "function",
            function: WireFunction { name, arguments },
        }
    }
}

/// A tool call read from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyToolCall {
    /// `None` when the server sent no id.
    pub id: Option<String>,
    pub name: String,
    /// JSON text (an object sent by the server is re-encoded).
    pub arguments: String,
}

/// The assistant message of a reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssistantReply {
    /// Text, if any (trimmed; `None` when blank).
    pub content: Option<String>,
    pub tool_calls: Vec<ReplyToolCall>,
    pub finish_reason: Option<String>,
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChatUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// A reply and what it took to get it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub message: AssistantReply,
    pub usage: Option<ChatUsage>,
    /// Attempts repeated (HTTP retries plus replies that could not be read).
    pub retries: u32,
}

/// A blocking client for one chat endpoint and model.
#[derive(Debug)]
pub struct ChatClient {
    http: JsonClient,
    url: String,
    model: String,
    run_budget: Option<Duration>,
    budget_setting: &'static str,
    timeout_setting: &'static str,
    deadline: Option<Instant>,
    max_reply_bytes: u64,
    max_run_reply_bytes: u64,
    /// Reply bytes received so far by this client (one run).
    received_bytes: u64,
    max_reply_tokens: Option<u32>,
    temperature: Option<f32>,
}

impl ChatClient {
    /// Checks the URL and builds the HTTP client; sends nothing.
    pub fn new(config: &ChatConfig) -> Result<Self, LlmError> {
        let http = JsonClient::new(
            config.policy.clone(),
            config.settings,
            config.api_key.clone(),
        )?;
        let url = http.endpoint_url(&config.base_url, "chat/completions")?;
        if config.model.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "the chat endpoint needs a model name: set {}",
                config.settings.model
            )));
        }
        Ok(Self {
            http,
            url,
            model: config.model.trim().to_string(),
            run_budget: config.run_budget,
            budget_setting: config.budget_setting,
            timeout_setting: config.timeout_setting,
            deadline: None,
            max_reply_bytes: config.max_reply_bytes,
            max_run_reply_bytes: config.max_run_reply_bytes,
            received_bytes: 0,
            max_reply_tokens: None,
            temperature: None,
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// Starts the run's time budget (the first call starts it when this was not called).
    pub fn start_budget(&mut self) {
        if self.deadline.is_none() {
            self.deadline = self.run_budget.map(|b| Instant::now() + b);
        }
    }

    /// Caps every reply at this many tokens (`max_tokens`), so a reply cannot outgrow the room
    /// left for it in the model's context (`None`: the server's default).
    pub fn set_max_reply_tokens(&mut self, max: Option<u32>) {
        self.max_reply_tokens = max;
    }

    /// Sends this sampling temperature with every request (`None`: the server's default).
    pub fn set_temperature(&mut self, temperature: Option<f32>) {
        self.temperature = temperature;
    }

    /// The request body for these messages and tools; no tools (`null` or `[]`) asks for plain
    /// text, and the body then names none.
    pub fn request_body(&self, messages: &[ChatMessage], tools: &Value) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
        });
        let no_tools = tools.is_null() || tools.as_array().is_some_and(Vec::is_empty);
        if !no_tools {
            body["tools"] = tools.clone();
            body["tool_choice"] = json!("auto");
        }
        if let Some(max) = self.max_reply_tokens {
            body["max_tokens"] = json!(max);
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    /// One chat completion. Retries as the policy allows, inside the run's budget.
    pub fn complete(
        &mut self,
        messages: &[ChatMessage],
        tools: &Value,
    ) -> Result<ChatReply, LlmError> {
        self.start_budget();
        let body = self.request_body(messages, tools);
        let max_retries = self.http.policy().max_retries;
        let mut retries = 0u32;
        let mut unreadable = 0u32;
        loop {
            // The tighter of the two bounds, so the run's total is enforced while reading too.
            let run_left = self.max_run_reply_bytes.saturating_sub(self.received_bytes);
            let limit = if run_left < self.max_reply_bytes {
                BodyLimit {
                    bytes: run_left,
                    what: "the most all the replies of one run may have together",
                    setting: "RAGTRAIL_LLM_MAX_RUN_REPLY_BYTES",
                }
            } else {
                BodyLimit {
                    bytes: self.max_reply_bytes,
                    what: "the most one reply may have",
                    setting: "RAGTRAIL_LLM_MAX_REPLY_BYTES",
                }
            };
            let reply = self
                .http
                .post_json_bounded(&self.url, &body, self.deadline, Some(limit))
                .map_err(|e| self.explain(e))?;
            self.received_bytes = self.received_bytes.saturating_add(reply.body.len() as u64);
            retries += reply.attempts.saturating_sub(1);
            match parse_reply(&reply.body) {
                Ok((message, usage)) => {
                    return Ok(ChatReply {
                        message,
                        usage,
                        retries,
                    });
                }
                Err(message) => {
                    if unreadable >= max_retries {
                        return Err(LlmError::Reply {
                            url: crate::http::display_url(&self.url),
                            attempts: unreadable + 1,
                            message,
                        });
                    }
                    tracing::warn!(
                        url = %crate::http::display_url(&self.url),
                        "the chat endpoint sent an unreadable reply ({message}); asking again"
                    );
                    unreadable += 1;
                    retries += 1;
                }
            }
        }
    }

    fn explain(&self, e: HttpError) -> LlmError {
        match e {
            HttpError::Budget { .. } => LlmError::Budget {
                budget: self.run_budget.unwrap_or_default(),
                setting: self.budget_setting,
                source: Box::new(e),
            },
            HttpError::Timeout { .. } => LlmError::Timeout {
                setting: self.timeout_setting,
                source: Box::new(e),
            },
            e => LlmError::from(e),
        }
    }
}

fn text_of(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                p => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn count(v: Option<&Value>) -> u32 {
    v.and_then(Value::as_u64)
        .map(|n| n.min(u64::from(u32::MAX)) as u32)
        .unwrap_or(0)
}

/// Reads a chat completion: the first choice's message and the usage.
pub fn parse_reply(body: &[u8]) -> Result<(AssistantReply, Option<ChatUsage>), String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON ({e})"))?;
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| err.to_string());
        return Err(format!("an error instead of a completion: {message}"));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("no `choices` in the reply")?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or("the first choice has no `message`")?;
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(&Value::Null);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .to_string();
            let arguments = match function.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => String::new(),
                Some(other) => other.to_string(),
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from);
            tool_calls.push(ReplyToolCall {
                id,
                name,
                arguments,
            });
        }
    }
    let usage = v.get("usage").filter(|u| u.is_object()).map(|u| ChatUsage {
        prompt_tokens: count(u.get("prompt_tokens")),
        completion_tokens: count(u.get("completion_tokens")),
    });
    Ok((
        AssistantReply {
            content: message.get("content").and_then(text_of),
            tool_calls,
            finish_reason: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(String::from),
        },
        usage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_serialise_as_the_openai_api_expects() {
        let msgs = vec![
            ChatMessage::System {
                content: "s".into(),
            },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![WireToolCall::function(
                    "call_1".into(),
                    "searchDocs".into(),
                    r#"{"keywords":["a"]}"#.into(),
                )],
            },
            ChatMessage::Tool {
                tool_call_id: "call_1".into(),
                content: "{}".into(),
            },
            ChatMessage::Assistant {
                content: Some("hi".into()),
                tool_calls: vec![],
            },
        ];
        assert_eq!(
            serde_json::to_value(&msgs).expect("json"),
            json!([
                {"role": "system", "content": "s"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "searchDocs", "arguments": "{\"keywords\":[\"a\"]}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
                {"role": "assistant", "content": "hi"},
            ])
        );
    }

    #[test]
    fn replies_are_read_leniently() {
        let body = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": " thinking "}],
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "searchDocs", "arguments": "{\"keywords\":[\"x\"]}"}},
                    {"function": {"name": "submitAnswer", "arguments": {"answer": "y"}}}
                ]
            }}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        });
        let (m, usage) = parse_reply(body.to_string().as_bytes()).expect("reply");
        assert_eq!(m.content.as_deref(), Some("thinking"));
        assert_eq!(m.tool_calls.len(), 2);
        assert_eq!(m.tool_calls[0].id.as_deref(), Some("a"));
        assert_eq!(m.tool_calls[1].id, None);
        assert_eq!(m.tool_calls[1].arguments, r#"{"answer":"y"}"#);
        assert_eq!(m.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            usage,
            Some(ChatUsage {
                prompt_tokens: 12,
                completion_tokens: 3
            })
        );
        let (m, usage) =
            parse_reply(br#"{"choices":[{"message":{"content":null}}]}"#).expect("empty");
        assert_eq!(m, AssistantReply::default());
        assert_eq!(usage, None);
    }

    #[test]
    fn unusable_replies_are_explained() {
        for (body, needle) in [
            (&b"<html>"[..], "not JSON"),
            (br#"{"object":"list"}"#, "choices"),
            (br#"{"choices":[{}]}"#, "message"),
            (br#"{"error":{"message":"overloaded"}}"#, "overloaded"),
        ] {
            let e = parse_reply(body).expect_err("unusable");
            assert!(e.contains(needle), "{e}");
        }
    }
}
