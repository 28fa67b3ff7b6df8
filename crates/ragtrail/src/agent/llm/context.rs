//! Keeping each request inside the model's context (`RAGTRAIL_LLM_CONTEXT_TOKENS`).
//!
//! The planner counts what it sends — the system prompt, the tools, earlier turns of a
//! conversation, every tool result with its passages — and, when the request would not leave
//! room for a reply, trims the oldest evidence first: the lowest-ranked passages of the oldest
//! search go first, the best of the latest search last. A trimmed tool result keeps its round,
//! its keywords and the numbers of the passages it lost, so the model knows they existed (a
//! number stays citable: the planner maps it back to its chunk whatever the model still sees).
//! Only then are earlier conversation answers shortened. The model's own earlier replies in the
//! run are trimmable too: a small model may write thousands of characters of prose or of tool
//! arguments in one reply, which every later request would carry. Their prose is left out and
//! long strings in their arguments shortened — the calls stay, so their tool messages still
//! pair with them — oldest first and before any evidence: a hit is worth more to the next reply
//! than what the model wrote before it. What was left out goes to the trace.
//!
//! Token counts are estimates: no tokenizer of an arbitrary remote model is at hand. The
//! estimate is corrected by the prompt tokens the server reports for the previous request,
//! so after the first turn it is the server's own count, scaled to the new request.

use serde_json::Value;

use super::messages::RoundMessage;
use crate::llm::ChatMessage;
use crate::trace::ContextFit;

/// Tokens per message the chat templates add (role markers, separators), roughly.
const MESSAGE_OVERHEAD: u32 = 4;

/// Tokens counted per character other than ASCII: SmolLM2's byte-level tokenizer spends 95
/// tokens on 47 Chinese characters of the bundled knowledge (2.0 each); counting one let a
/// Chinese-heavy prompt overrun a 4,096-token context.
const TOKENS_PER_OTHER_CHAR: u32 = 2;

/// A rough, deliberately high token count for text: a token per three ASCII characters (about
/// four per token in English), [`TOKENS_PER_OTHER_CHAR`] per other character.
pub fn estimate_tokens(text: &str) -> u32 {
    let (ascii, other) = text.chars().fold((0u32, 0u32), |(a, o), c| {
        if c.is_ascii() {
            (a.saturating_add(1), o)
        } else {
            (a, o.saturating_add(1))
        }
    });
    ascii
        .div_ceil(3)
        .saturating_add(other.saturating_mul(TOKENS_PER_OTHER_CHAR))
}

/// Estimated tokens of one message as sent.
pub fn message_tokens(m: &ChatMessage) -> u32 {
    let body = match m {
        ChatMessage::System { content } | ChatMessage::User { content } => estimate_tokens(content),
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => estimate_tokens(tool_call_id).saturating_add(estimate_tokens(content)),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => tool_calls
            .iter()
            .fold(content.as_deref().map_or(0, estimate_tokens), |n, c| {
                n.saturating_add(estimate_tokens(&c.function.name))
                    .saturating_add(estimate_tokens(&c.function.arguments))
                    .saturating_add(MESSAGE_OVERHEAD)
            }),
    };
    body.saturating_add(MESSAGE_OVERHEAD)
}

/// Tokens kept free for the model's reply: a quarter of the context, at most 1024.
pub fn reply_reserve(budget: u32) -> u32 {
    (budget / 4).min(1024)
}

/// A message that carries a search's passages, and how many of them are still sent.
#[derive(Debug, Clone)]
struct Evidence {
    /// Index in the planner's messages.
    index: usize,
    /// The message as first sent (with every passage).
    full: RoundMessage,
    kept: usize,
}

/// An earlier answer of the conversation sent with the question, and whether it was shortened.
#[derive(Debug, Clone)]
struct EarlierAnswer {
    index: usize,
    shortened: bool,
}

/// Sent in place of an earlier conversation answer that did not fit.
pub const EARLIER_ANSWER_LEFT_OUT: &str =
    "(earlier answer left out to fit the model's context; its question is above)";

/// Sent in place of the prose of one of the model's earlier replies in this run that did not fit.
pub const OWN_REPLY_LEFT_OUT: &str =
    "(your earlier reply here was left out to fit the model's context)";

/// Longest string kept in the arguments of an earlier tool call once trimmed, in characters.
const TRIMMED_ARGUMENT_CHARS: usize = 120;

/// What of the planner's conversation may be trimmed, and how the estimate is calibrated.
#[derive(Debug, Clone)]
pub struct ContextBudget {
    budget: u32,
    evidence: Vec<Evidence>,
    earlier: Vec<EarlierAnswer>,
    /// The model's own replies in this run (assistant messages), oldest first.
    own: Vec<EarlierAnswer>,
    /// Server-reported prompt tokens over the estimate of the same request.
    scale: f64,
    last_estimate: u32,
}

impl ContextBudget {
    pub fn new(budget: u32) -> Self {
        Self {
            budget,
            evidence: Vec::new(),
            earlier: Vec::new(),
            own: Vec::new(),
            scale: 1.0,
            last_estimate: 0,
        }
    }

    /// Notes that `messages[index]` carries the passages of a search, as `message` shows them.
    pub fn evidence_at(&mut self, index: usize, message: RoundMessage) {
        let kept = message.passages();
        if kept > 0 {
            self.evidence.push(Evidence {
                index,
                full: message,
                kept,
            });
        }
    }

    /// Notes that `messages[index]` is an earlier answer of the conversation.
    pub fn earlier_answer_at(&mut self, index: usize) {
        self.earlier.push(EarlierAnswer {
            index,
            shortened: false,
        });
    }

    /// Notes that `messages[index]` is one of the model's own replies in this run.
    pub fn own_reply_at(&mut self, index: usize) {
        self.own.push(EarlierAnswer {
            index,
            shortened: false,
        });
    }

    /// Corrects later estimates with the prompt tokens the server counted for the last request.
    pub fn calibrate(&mut self, reported_prompt_tokens: u32) {
        if self.last_estimate > 0 && reported_prompt_tokens > 0 {
            self.scale =
                (f64::from(reported_prompt_tokens) / f64::from(self.last_estimate)).clamp(0.5, 4.0);
        }
    }

    /// The server counted the last prompt as longer than its context although the estimate
    /// fitted: count every character as half as many tokens again (up to the calibration's
    /// bound), so the next [`ContextBudget::fit`] trims more.
    pub fn count_denser(&mut self) {
        self.scale = (self.scale * 1.5).min(4.0);
    }

    fn scaled(&self, raw: u32) -> u32 {
        (f64::from(raw) * self.scale)
            .ceil()
            .min(f64::from(u32::MAX)) as u32
    }

    /// Trims `messages` in place until the request (with `tools`) leaves room for a reply, and
    /// says what this call trimmed.
    pub fn fit(&mut self, messages: &mut [ChatMessage], tools: &Value) -> ContextFit {
        let limit = self.budget.saturating_sub(reply_reserve(self.budget));
        let mut raw = messages
            .iter()
            .map(message_tokens)
            .fold(estimate_tokens(&tools.to_string()), u32::saturating_add);
        let mut fit = ContextFit {
            budget_tokens: self.budget,
            ..ContextFit::default()
        };
        // The model's own replies, oldest first.
        for a in &mut self.own {
            if self.scale * f64::from(raw) <= f64::from(limit) {
                break;
            }
            raw = shorten_own_reply(a, messages, raw, &mut fit);
        }
        // Oldest search first; within it the lowest-ranked hit first.
        for e in &mut self.evidence {
            if self.scale * f64::from(raw) <= f64::from(limit) {
                break;
            }
            let Some(message) = messages.get_mut(e.index) else {
                continue;
            };
            while e.kept > 0 && self.scale * f64::from(raw) > f64::from(limit) {
                e.kept -= 1;
                if let Some(id) = e.full.chunk_id(e.kept) {
                    fit.trimmed_chunks.push(id.to_string());
                }
                let before = message_tokens(message);
                set_content(message, e.full.render(e.kept));
                raw = raw
                    .saturating_sub(before)
                    .saturating_add(message_tokens(message));
                if fit.trimmed_rounds.last() != Some(&e.full.round) {
                    fit.trimmed_rounds.push(e.full.round);
                }
            }
        }
        for a in &mut self.earlier {
            if self.scale * f64::from(raw) <= f64::from(limit) {
                break;
            }
            if a.shortened {
                continue;
            }
            let Some(message) = messages.get_mut(a.index) else {
                continue;
            };
            let before = message_tokens(message);
            set_content(message, EARLIER_ANSWER_LEFT_OUT.to_string());
            raw = raw
                .saturating_sub(before)
                .saturating_add(message_tokens(message));
            a.shortened = true;
            fit.trimmed_history_turns += 1;
        }
        self.last_estimate = raw;
        fit.prompt_tokens_estimate = self.scaled(raw);
        fit.over_budget = fit.prompt_tokens_estimate > limit;
        fit
    }
}

/// Leaves out the prose of one of the model's replies and shortens the long strings of its
/// tool calls' arguments (their ids, names and the JSON shape stay); returns the new raw count.
fn shorten_own_reply(
    a: &mut EarlierAnswer,
    messages: &mut [ChatMessage],
    raw: u32,
    fit: &mut ContextFit,
) -> u32 {
    if a.shortened {
        return raw;
    }
    let Some(message) = messages.get_mut(a.index) else {
        return raw;
    };
    let before = message_tokens(message);
    if let ChatMessage::Assistant {
        content,
        tool_calls,
    } = message
    {
        if content
            .as_deref()
            .is_some_and(|c| c.chars().count() > OWN_REPLY_LEFT_OUT.chars().count())
        {
            *content = Some(OWN_REPLY_LEFT_OUT.to_string());
        }
        for call in tool_calls {
            call.function.arguments = shorten_arguments(&call.function.arguments);
        }
    }
    a.shortened = true;
    let after = message_tokens(message);
    if after < before {
        fit.trimmed_replies += 1;
    }
    raw.saturating_sub(before).saturating_add(after)
}

/// Tool-call arguments with every long string cut to [`TRIMMED_ARGUMENT_CHARS`]; text that is
/// not JSON is cut as a whole.
fn shorten_arguments(arguments: &str) -> String {
    fn shorten(v: &mut Value) {
        match v {
            Value::String(s) if s.chars().count() > TRIMMED_ARGUMENT_CHARS => {
                *s = format!(
                    "{}…",
                    crate::text::truncate_chars(s, TRIMMED_ARGUMENT_CHARS)
                );
            }
            Value::Array(items) => items.iter_mut().for_each(shorten),
            Value::Object(map) => map.values_mut().for_each(shorten),
            _ => {}
        }
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut v) => {
            shorten(&mut v);
            v.to_string()
        }
        Err(_) if arguments.chars().count() > TRIMMED_ARGUMENT_CHARS => {
            crate::text::truncate_chars(arguments, TRIMMED_ARGUMENT_CHARS).to_string()
        }
        Err(_) => arguments.to_string(),
    }
}

fn set_content(message: &mut ChatMessage, text: String) {
    match message {
        ChatMessage::System { content }
        | ChatMessage::User { content }
        | ChatMessage::Tool { content, .. } => *content = text,
        ChatMessage::Assistant { content, .. } => *content = Some(text),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hits_message(round: u32, n: usize, text_len: usize) -> (ChatMessage, RoundMessage) {
        let passages: Vec<(usize, String, String)> = (0..n)
            .map(|i| {
                let number = (round as usize - 1) * n + i + 1;
                (
                    number,
                    format!("r{round}_c{i}"),
                    format!("[{number}] t\n{}", "x".repeat(text_len)),
                )
            })
            .collect();
        let m = RoundMessage::new(
            crate::text::Lang::En,
            round,
            &["k".to_string()],
            1,
            &crate::search::sufficiency::Sufficiency::default(),
            passages,
        );
        (
            ChatMessage::Tool {
                tool_call_id: format!("call_{round}"),
                content: m.render(n),
            },
            m,
        )
    }

    fn conversation(rounds: u32) -> (Vec<ChatMessage>, ContextBudget) {
        let mut messages = vec![
            ChatMessage::System {
                content: "s".repeat(300),
            },
            ChatMessage::User {
                content: "q".into(),
            },
        ];
        let mut budget = ContextBudget::new(2048);
        for r in 1..=rounds {
            messages.push(ChatMessage::Assistant {
                content: None,
                tool_calls: Vec::new(),
            });
            let (m, v) = hits_message(r, 5, 300);
            budget.evidence_at(messages.len(), v);
            messages.push(m);
        }
        (messages, budget)
    }

    #[test]
    fn nothing_is_trimmed_when_the_request_fits() {
        let (mut messages, mut budget) = conversation(1);
        let before = messages.clone();
        let fit = budget.fit(&mut messages, &json!([]));
        assert_eq!(messages, before);
        assert!(fit.trimmed_chunks.is_empty() && !fit.over_budget, "{fit:?}");
        assert!(fit.prompt_tokens_estimate > 0);
    }

    #[test]
    fn the_oldest_rounds_lowest_hits_go_first_and_the_latest_best_hit_stays() {
        let (mut messages, mut budget) = conversation(3);
        let fit = budget.fit(&mut messages, &json!([]));
        assert!(!fit.over_budget, "{fit:?}");
        assert!(fit.prompt_tokens_estimate <= 2048 - reply_reserve(2048));
        assert_eq!(fit.trimmed_rounds[0], 1, "{fit:?}");
        assert_eq!(
            fit.trimmed_chunks[0], "r1_c4",
            "the oldest round's last hit first"
        );
        let content = |m: &ChatMessage| match m {
            ChatMessage::Tool { content, .. } => content.clone(),
            other => panic!("{other:?}"),
        };
        let latest = content(&messages[messages.len() - 1]);
        assert!(
            latest.contains("[11] t\n"),
            "the latest best passage stays: {latest}"
        );
        // The trimmed round still names what it lost.
        let oldest = content(&messages[3]);
        assert!(oldest.starts_with("Search 1 (keywords: k)"), "{oldest}");
        assert!(!oldest.contains("[5] t\n"), "{oldest}");
        assert!(
            oldest.contains("[5] of this search were left out"),
            "{oldest}"
        );
        // A second fit of the same messages trims nothing more.
        let again = budget.fit(&mut messages, &json!([]));
        assert!(again.trimmed_chunks.is_empty(), "{again:?}");
    }

    #[test]
    fn counting_denser_after_an_overflow_trims_a_request_that_fitted() {
        // A conversation that fits at the character estimate but not at 1.5 times it.
        let (mut messages, mut budget) = conversation(2);
        let first = budget.fit(&mut messages, &json!([]));
        assert!(first.trimmed_chunks.is_empty(), "{first:?}");
        let limit = 2048 - reply_reserve(2048);
        assert!(first.prompt_tokens_estimate * 3 / 2 > limit, "{first:?}");
        budget.count_denser();
        let second = budget.fit(&mut messages, &json!([]));
        assert!(!second.trimmed_chunks.is_empty(), "{second:?}");
        assert!(second.prompt_tokens_estimate <= limit, "{second:?}");
    }

    #[test]
    fn a_server_count_higher_than_the_estimate_trims_more_next_time() {
        let (mut messages, mut budget) = conversation(1);
        let first = budget.fit(&mut messages, &json!([]));
        assert!(first.trimmed_chunks.is_empty());
        budget.calibrate(first.prompt_tokens_estimate * 3);
        let second = budget.fit(&mut messages, &json!([]));
        assert!(!second.trimmed_chunks.is_empty(), "{second:?}");
    }

    #[test]
    fn earlier_answers_go_after_all_evidence_and_overflow_is_reported() {
        let mut messages = vec![
            ChatMessage::System {
                content: "s".repeat(9000),
            },
            ChatMessage::User {
                content: "earlier question".into(),
            },
            ChatMessage::Assistant {
                content: Some("a".repeat(600)),
                tool_calls: Vec::new(),
            },
            ChatMessage::User {
                content: "q".into(),
            },
        ];
        let mut budget = ContextBudget::new(2048);
        budget.earlier_answer_at(2);
        let fit = budget.fit(&mut messages, &json!([]));
        assert_eq!(fit.trimmed_history_turns, 1);
        assert!(
            fit.over_budget,
            "the system prompt alone is too long: {fit:?}"
        );
        assert_eq!(
            messages[2],
            ChatMessage::Assistant {
                content: Some(EARLIER_ANSWER_LEFT_OUT.into()),
                tool_calls: Vec::new()
            }
        );
    }

    #[test]
    fn the_models_own_long_reply_goes_before_any_hit_and_keeps_its_calls() {
        let (mut messages, mut budget) = conversation(1);
        let args = json!({"keywords": ["高铁票"], "reason": "r".repeat(9000)}).to_string();
        budget.own_reply_at(messages.len());
        messages.push(ChatMessage::Assistant {
            content: Some("p".repeat(3000)),
            tool_calls: vec![crate::llm::WireToolCall::function(
                "call_9".into(),
                "searchDocs".into(),
                args,
            )],
        });
        let fit = budget.fit(&mut messages, &json!([]));
        assert_eq!(fit.trimmed_replies, 1, "{fit:?}");
        assert!(fit.trimmed_chunks.is_empty(), "no hit was needed: {fit:?}");
        assert!(!fit.over_budget, "{fit:?}");
        let ChatMessage::Assistant {
            content,
            tool_calls,
        } = &messages[messages.len() - 1]
        else {
            panic!("an assistant message");
        };
        assert_eq!(content.as_deref(), Some(OWN_REPLY_LEFT_OUT));
        assert_eq!(tool_calls[0].id, "call_9");
        let kept: Value = serde_json::from_str(&tool_calls[0].function.arguments).expect("json");
        assert_eq!(kept["keywords"], json!(["高铁票"]));
        assert_eq!(
            kept["reason"].as_str().map(|r| r.chars().count()),
            Some(TRIMMED_ARGUMENT_CHARS + 1)
        );
    }

    #[test]
    fn estimates_count_cjk_per_character() {
        assert_eq!(estimate_tokens("abcdef"), 2);
        assert_eq!(estimate_tokens("高铁票"), 6);
        assert_eq!(estimate_tokens(""), 0);
    }
}
