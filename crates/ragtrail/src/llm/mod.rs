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

impl From<HttpError> for LlmError {
    fn from(e: HttpError) -> Self {
        LlmError::Http(Box::new(e))
    }
}
