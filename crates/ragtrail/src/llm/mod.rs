//! OpenAI-compatible chat completions with tool calling: where the endpoint is configured
//! ([`config`]) and a blocking client for `/chat/completions` ([`chat`]).
//!
//! Any server that speaks that API works: hosted providers, vLLM, Ollama, the llama.cpp server.
//! Timeouts, retries and error explanations are the shared [`crate::http`] policy; every request
//! of one agent run also shares a time budget.

pub mod chat;
pub mod config;

pub use chat::{ChatClient, ChatMessage, WireToolCall};
pub use config::{ChatConfig, LlmFlags, chat_endpoint_configured, resolve_chat_config};

use crate::http::HttpError;

/// Why a chat request failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The configuration is incomplete or invalid; the message names the setting to fix.
    #[error("{0}")]
    Config(String),
    /// The endpoint could not be reached or answered with an error status (after retries).
    #[error("{0}")]
    Http(Box<HttpError>),
    /// Every attempt of a request timed out.
    #[error("{source}; for a slow model raise {setting}")]
    Timeout {
        source: Box<HttpError>,
        setting: &'static str,
    },
    /// The run's time budget for model calls ran out.
    #[error(
        "{source}: the run allows {budget:?} for all its model calls; raise {setting} if the model needs more"
    )]
    Budget {
        source: Box<HttpError>,
        budget: std::time::Duration,
        setting: &'static str,
    },
    /// The endpoint answered 2xx with something that is not a chat completion.
    #[error(
        "the chat endpoint {url} sent a reply that cannot be used ({attempts} attempts): {message}"
    )]
    Reply {
        url: String,
        attempts: u32,
        message: String,
    },
}

impl LlmError {
    /// Whether the server refused the request as longer than the model's context (HTTP 400
    /// naming the context, as OpenAI, llama.cpp, vLLM and Ollama word it): the prompt was
    /// counted in more tokens than estimated, and a shorter one may pass.
    pub fn is_context_overflow(&self) -> bool {
        let LlmError::Http(e) = self else {
            return false;
        };
        let HttpError::Status {
            status: 400,
            detail,
            ..
        } = e.as_ref()
        else {
            return false;
        };
        let detail = detail.to_lowercase();
        detail.contains("context")
            && ["length", "size", "window", "exceed", "too long", "tokens"]
                .iter()
                .any(|w| detail.contains(w))
    }
}

impl From<HttpError> for LlmError {
    fn from(e: HttpError) -> Self {
        LlmError::Http(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, detail: &str) -> LlmError {
        LlmError::Http(Box::new(HttpError::Status {
            purpose: "chat",
            url: "http://127.0.0.1:1/v1/chat/completions".into(),
            status,
            attempts: 1,
            detail: format!(": {detail}"),
        }))
    }

    #[test]
    fn context_overflows_are_told_from_other_refusals() {
        for detail in [
            // llama-cpp-python and OpenAI
            "This model's maximum context length is 4096 tokens. However, you requested 5121 tokens (4097 in the messages, 1024 in the completion).",
            // llama.cpp's server
            "the request exceeds the available context size, try increasing it",
            // vLLM
            "This model's maximum context length is 2048 tokens. However, your request has 2300 input tokens.",
        ] {
            assert!(status(400, detail).is_context_overflow(), "{detail}");
        }
        assert!(!status(400, "unknown model: smollm3").is_context_overflow());
        assert!(!status(500, "maximum context length exceeded").is_context_overflow());
        assert!(!LlmError::Config("context length".into()).is_context_overflow());
    }
}
