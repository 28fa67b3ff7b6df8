//! Where the chat endpoint is and how patient to be with it: flags < environment (with `.env`
//! loaded into it) < nothing, in that order of precedence from the flag down.
//!
//! | setting | flag | variables, first set wins |
//! |---|---|---|
//! | base URL | `--llm-base-url` | `RAGTRAIL_LLM_BASE_URL`, `OPENAI_BASE_URL` |
//! | API key | — (never on a command line) | `RAGTRAIL_LLM_API_KEY`, `OPENAI_API_KEY` |
//! | model | `--llm-model` | `RAGTRAIL_LLM_MODEL` |
//! | request timeout | `--llm-timeout` | `RAGTRAIL_LLM_TIMEOUT_SECS` (default 120) |
//! | connect timeout | — | `RAGTRAIL_LLM_CONNECT_TIMEOUT_SECS` (default 10) |
//! | retries | — | `RAGTRAIL_LLM_MAX_RETRIES` (default 2) |
//! | run budget | `--llm-budget` | `RAGTRAIL_LLM_BUDGET_SECS` (default 600, 0 = none) |
//! | largest reply | — | `RAGTRAIL_LLM_MAX_REPLY_BYTES` (default 4 MiB) |
//! | all replies of a run | — | `RAGTRAIL_LLM_MAX_RUN_REPLY_BYTES` (default 16 MiB) |
//! | context size | `--llm-context-tokens` | `RAGTRAIL_LLM_CONTEXT_TOKENS` (default: none, nothing trimmed) |
//!
//! A chat endpoint counts as configured when a base URL is set; an API key alone does not send
//! questions to a hosted provider. Errors name the setting that supplied the value (a base URL
//! taken from `OPENAI_BASE_URL` is reported as `OPENAI_BASE_URL`).

use std::time::Duration;

use super::LlmError;
use crate::http::{EndpointSettings, RetryPolicy};

/// Wall-clock budget for all the model calls of one run, by default.
pub const DEFAULT_RUN_BUDGET_SECS: u64 = 600;

/// The most bytes one chat reply may have, by default: a tool call or an answer is a few KiB.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 4 * 1024 * 1024;
/// The most bytes all the replies of one run may have together, by default.
pub const DEFAULT_MAX_RUN_REPLY_BYTES: u64 = 16 * 1024 * 1024;

/// Values given on the command line; unset ones come from the environment.
#[derive(Debug, Clone, Default)]
pub struct LlmFlags {
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// Request timeout in seconds.
    pub timeout_secs: Option<f64>,
    /// Run budget in seconds (0: none).
    pub budget_secs: Option<f64>,
    /// The model's context size in tokens (0: unknown, nothing trimmed).
    pub context_tokens: Option<u32>,
}

/// A resolved chat endpoint.
#[derive(Clone)]
pub struct ChatConfig {
    /// Base URL, usually ending in `/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; never logged, traced or shown.
    pub api_key: Option<String>,
    pub model: String,
    pub policy: RetryPolicy,
    /// Wall-clock budget for all the model calls of one run (`None`: unbounded).
    pub run_budget: Option<Duration>,
    /// Names of the settings that supplied the values, for error messages.
    pub settings: EndpointSettings,
    pub timeout_setting: &'static str,
    pub budget_setting: &'static str,
    /// The most bytes one reply may have; checked while reading it.
    pub max_reply_bytes: u64,
    /// The most bytes all the replies of one run (one client) may have together.
    pub max_run_reply_bytes: u64,
    /// The model's context size in tokens: the planner trims the oldest evidence to stay
    /// inside it (`None`: unknown, nothing trimmed).
    pub context_tokens: Option<u32>,
}

impl std::fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatConfig")
            .field("base_url", &crate::http::display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("policy", &self.policy)
            .field("run_budget", &self.run_budget)
            .field("context_tokens", &self.context_tokens)
            .finish()
    }
}

/// The setting names used when the values do not come from a flag or a fallback variable.
pub const CHAT_SETTINGS: EndpointSettings = EndpointSettings {
    purpose: "chat",
    base_url: "RAGTRAIL_LLM_BASE_URL",
    api_key: "RAGTRAIL_LLM_API_KEY",
    model: "RAGTRAIL_LLM_MODEL",
};

impl ChatConfig {
    /// An endpoint with the default policy and budget.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            policy: RetryPolicy::default(),
            run_budget: Some(Duration::from_secs(DEFAULT_RUN_BUDGET_SECS)),
            settings: CHAT_SETTINGS,
            timeout_setting: "RAGTRAIL_LLM_TIMEOUT_SECS",
            budget_setting: "RAGTRAIL_LLM_BUDGET_SECS",
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_run_reply_bytes: DEFAULT_MAX_RUN_REPLY_BYTES,
            context_tokens: None,
        }
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }
}

fn nonblank(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The first set value among the flag and the variables, with the name of its setting.
fn first(
    flag: (&'static str, Option<&String>),
    vars: &[&'static str],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, &'static str)> {
    if let Some(v) = nonblank(flag.1.cloned()) {
        return Some((v, flag.0));
    }
    vars.iter()
        .find_map(|name| nonblank(env(name)).map(|v| (v, *name)))
}

fn seconds(
    flag: (&'static str, Option<f64>),
    var: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(f64, &'static str)>, LlmError> {
    let (value, setting) = match flag.1 {
        Some(v) => (v, flag.0),
        None => match nonblank(env(var)) {
            Some(text) => (
                text.parse::<f64>().map_err(|_| {
                    LlmError::Config(format!("{var}={text:?} is not a number of seconds"))
                })?,
                var,
            ),
            None => return Ok(None),
        },
    };
    if !value.is_finite() || !(0.0..=86_400.0).contains(&value) {
        return Err(LlmError::Config(format!(
            "{setting} must be between 0 and 86400 seconds, not {value}"
        )));
    }
    Ok(Some((value, setting)))
}

/// Smallest context size accepted: the system prompt and the tools alone take about this much.
pub const MIN_CONTEXT_TOKENS: u32 = 512;

fn context_tokens(
    flag: Option<u32>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<u32>, LlmError> {
    const VAR: &str = "RAGTRAIL_LLM_CONTEXT_TOKENS";
    let (n, setting) = match flag {
        Some(n) => (n, "--llm-context-tokens"),
        None => match nonblank(env(VAR)) {
            Some(text) => (
                text.parse::<u32>().map_err(|_| {
                    LlmError::Config(format!(
                        "{VAR}={text:?} must be a whole number of tokens (the model's context size)"
                    ))
                })?,
                VAR,
            ),
            None => return Ok(None),
        },
    };
    if n == 0 {
        return Ok(None);
    }
    if n < MIN_CONTEXT_TOKENS {
        return Err(LlmError::Config(format!(
            "{setting} is {n}; the system prompt and the tools alone need about {MIN_CONTEXT_TOKENS} tokens (0 turns trimming off)"
        )));
    }
    Ok(Some(n))
}

/// Whether a chat endpoint is configured (a base URL is set).
pub fn chat_endpoint_configured(flags: &LlmFlags, env: &dyn Fn(&str) -> Option<String>) -> bool {
    first(
        ("--llm-base-url", flags.base_url.as_ref()),
        &["RAGTRAIL_LLM_BASE_URL", "OPENAI_BASE_URL"],
        env,
    )
    .is_some()
}

/// Resolves the chat endpoint from flags and the environment (`env` reads a variable; the CLI
/// passes `std::env::var`). `Ok(None)`: no endpoint configured.
pub fn resolve_chat_config(
    flags: &LlmFlags,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ChatConfig>, LlmError> {
    let Some((base_url, base_setting)) = first(
        ("--llm-base-url", flags.base_url.as_ref()),
        &["RAGTRAIL_LLM_BASE_URL", "OPENAI_BASE_URL"],
        env,
    ) else {
        return Ok(None);
    };
    let (model, model_setting) = first(
        ("--llm-model", flags.model.as_ref()),
        &["RAGTRAIL_LLM_MODEL"],
        env,
    )
    .ok_or_else(|| {
        LlmError::Config(format!(
            "the chat endpoint {} needs a model name: set RAGTRAIL_LLM_MODEL (or --llm-model)",
            crate::http::display_url(&base_url)
        ))
    })?;
    let key = first(("", None), &["RAGTRAIL_LLM_API_KEY", "OPENAI_API_KEY"], env);
    let mut config = ChatConfig::new(base_url, model);
    config.settings = EndpointSettings {
        purpose: "chat",
        base_url: base_setting,
        api_key: key.as_ref().map_or("RAGTRAIL_LLM_API_KEY", |k| k.1),
        model: model_setting,
    };
    config.api_key = key.map(|k| k.0);
    if let Some((secs, setting)) = seconds(
        ("--llm-timeout", flags.timeout_secs),
        "RAGTRAIL_LLM_TIMEOUT_SECS",
        env,
    )? {
        if secs <= 0.0 {
            return Err(LlmError::Config(format!(
                "{setting} must be more than 0 seconds"
            )));
        }
        config.policy.request_timeout = Duration::from_secs_f64(secs);
        config.timeout_setting = setting;
    }
    if let Some((secs, setting)) = seconds(("", None), "RAGTRAIL_LLM_CONNECT_TIMEOUT_SECS", env)? {
        if secs <= 0.0 {
            return Err(LlmError::Config(format!(
                "{setting} must be more than 0 seconds"
            )));
        }
        config.policy.connect_timeout = Duration::from_secs_f64(secs);
    }
    if let Some(text) = nonblank(env("RAGTRAIL_LLM_MAX_RETRIES")) {
        config.policy.max_retries =
            text.parse::<u32>()
                .ok()
                .filter(|n| *n <= 10)
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "RAGTRAIL_LLM_MAX_RETRIES={text:?} must be a whole number from 0 to 10"
                    ))
                })?;
    }
    for (var, slot) in [
        ("RAGTRAIL_LLM_MAX_REPLY_BYTES", &mut config.max_reply_bytes),
        (
            "RAGTRAIL_LLM_MAX_RUN_REPLY_BYTES",
            &mut config.max_run_reply_bytes,
        ),
    ] {
        if let Some(text) = nonblank(env(var)) {
            *slot = text
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= 1024)
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "{var}={text:?} must be a whole number of bytes, at least 1024"
                    ))
                })?;
        }
    }
    if let Some((secs, setting)) = seconds(
        ("--llm-budget", flags.budget_secs),
        "RAGTRAIL_LLM_BUDGET_SECS",
        env,
    )? {
        config.run_budget = (secs > 0.0).then(|| Duration::from_secs_f64(secs));
        config.budget_setting = setting;
    }
    config.context_tokens = context_tokens(flags.context_tokens, env)?;
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn nothing_set_means_no_endpoint_and_a_key_alone_does_not_count() {
        let e = env(&[("OPENAI_API_KEY", "sk-x")]);
        assert!(!chat_endpoint_configured(&LlmFlags::default(), &e));
        assert!(
            resolve_chat_config(&LlmFlags::default(), &e)
                .expect("ok")
                .is_none()
        );
    }

    #[test]
    fn flags_beat_ragtrail_variables_which_beat_openai_ones() {
        let e = env(&[
            ("OPENAI_BASE_URL", "http://openai/v1"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("RAGTRAIL_LLM_MODEL", "m-env"),
        ]);
        let c = resolve_chat_config(&LlmFlags::default(), &e)
            .expect("ok")
            .expect("configured");
        assert_eq!(c.base_url, "http://openai/v1");
        assert_eq!(c.api_key.as_deref(), Some("sk-openai"));
        assert_eq!(c.settings.base_url, "OPENAI_BASE_URL");
        assert_eq!(c.settings.api_key, "OPENAI_API_KEY");

        let e = env(&[
            ("OPENAI_BASE_URL", "http://openai/v1"),
            ("RAGTRAIL_LLM_BASE_URL", "http://rt/v1"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("RAGTRAIL_LLM_API_KEY", "sk-rt"),
            ("RAGTRAIL_LLM_MODEL", "m-env"),
            ("RAGTRAIL_LLM_TIMEOUT_SECS", "7"),
            ("RAGTRAIL_LLM_MAX_RETRIES", "0"),
        ]);
        let c = resolve_chat_config(&LlmFlags::default(), &e)
            .expect("ok")
            .expect("configured");
        assert_eq!(
            (c.base_url.as_str(), c.api_key.as_deref(), c.model.as_str()),
            ("http://rt/v1", Some("sk-rt"), "m-env")
        );
        assert_eq!(c.policy.request_timeout, Duration::from_secs(7));
        assert_eq!(c.policy.max_retries, 0);
        assert_eq!(c.settings.model, "RAGTRAIL_LLM_MODEL");
        assert_eq!(c.context_tokens, None, "no budget unless one is set");

        let flags = LlmFlags {
            base_url: Some("http://flag/v1".into()),
            model: Some("m-flag".into()),
            timeout_secs: Some(3.0),
            budget_secs: Some(0.0),
            context_tokens: Some(2048),
        };
        let c = resolve_chat_config(&flags, &e)
            .expect("ok")
            .expect("configured");
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://flag/v1", "m-flag")
        );
        assert_eq!(c.settings.base_url, "--llm-base-url");
        assert_eq!(c.policy.request_timeout, Duration::from_secs(3));
        assert_eq!(c.run_budget, None, "0 means no budget");
        assert_eq!(c.context_tokens, Some(2048));
        assert!(!format!("{c:?}").contains("sk-rt"));
    }

    #[test]
    fn a_missing_model_or_a_bad_number_names_the_setting() {
        let e = env(&[("RAGTRAIL_LLM_BASE_URL", "http://rt/v1")]);
        let err = resolve_chat_config(&LlmFlags::default(), &e).expect_err("no model");
        assert!(err.to_string().contains("RAGTRAIL_LLM_MODEL"), "{err}");
        let e = env(&[
            ("RAGTRAIL_LLM_BASE_URL", "http://rt/v1"),
            ("RAGTRAIL_LLM_MODEL", "m"),
            ("RAGTRAIL_LLM_BUDGET_SECS", "soon"),
        ]);
        let err = resolve_chat_config(&LlmFlags::default(), &e).expect_err("bad budget");
        assert!(
            err.to_string().contains("RAGTRAIL_LLM_BUDGET_SECS"),
            "{err}"
        );
        let e = env(&[
            ("RAGTRAIL_LLM_BASE_URL", "http://rt/v1"),
            ("RAGTRAIL_LLM_MODEL", "m"),
            ("RAGTRAIL_LLM_MAX_RETRIES", "-1"),
        ]);
        let err = resolve_chat_config(&LlmFlags::default(), &e).expect_err("bad retries");
        assert!(
            err.to_string().contains("RAGTRAIL_LLM_MAX_RETRIES"),
            "{err}"
        );
        for (value, ok) in [("4096", Some(4096)), ("0", None)] {
            let pairs = [
                ("RAGTRAIL_LLM_BASE_URL", "http://rt/v1"),
                ("RAGTRAIL_LLM_MODEL", "m"),
                ("RAGTRAIL_LLM_CONTEXT_TOKENS", value),
            ];
            let e = env(&pairs);
            let c = resolve_chat_config(&LlmFlags::default(), &e).expect("ok");
            assert_eq!(c.expect("configured").context_tokens, ok, "{value}");
        }
        for value in ["4k", "100", "-1"] {
            let pairs = [
                ("RAGTRAIL_LLM_BASE_URL", "http://rt/v1"),
                ("RAGTRAIL_LLM_MODEL", "m"),
                ("RAGTRAIL_LLM_CONTEXT_TOKENS", value),
            ];
            let e = env(&pairs);
            let err = resolve_chat_config(&LlmFlags::default(), &e).expect_err(value);
            assert!(
                err.to_string().contains("RAGTRAIL_LLM_CONTEXT_TOKENS"),
                "{err}"
            );
        }
    }
}
