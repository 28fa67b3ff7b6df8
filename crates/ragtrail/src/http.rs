//! The HTTP policy shared by every OpenAI-compatible endpoint ragtrail talks to (embeddings and
//! chat): timeouts, retries with capped exponential backoff and jitter, `Retry-After`, and
//! errors that say which setting to fix.
//!
//! Blocking on purpose: the engine is synchronous, so clients use `reqwest::blocking` and never
//! start an async runtime of their own.
//!
//! What is retried (at most [`RetryPolicy::max_retries`] times after the first attempt):
//! connection errors, timeouts, a body cut short, and the statuses 408, 409, 429 and 5xx. The
//! delay before retry `n` (from 0) is `initial_backoff · 2ⁿ`, capped at `max_backoff`, less up to
//! a quarter of jitter — unless the server says how long to wait with `retry-after-ms` or
//! `Retry-After` (seconds or an HTTP date), which is honoured up to `max_retry_after`. A longer
//! wait, or one that outlasts the call's time budget, is not retried at all: the error says how
//! long the server asked to wait and which bound that exceeds.
//!
//! Calls may share a time budget ([`JsonClient::post_json_before`]): an agent run gives all its
//! chat requests one deadline, so retries and slow answers cannot stretch a run without bound.
//!
//! The API key is sent as `Authorization: Bearer …` and never appears in a log line, an error
//! or a `Debug` output; a server that echoes it back in an error body has it redacted.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, SystemTime};

use reqwest::StatusCode;
use reqwest::blocking::Client;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};

/// At most this many characters of a server's error body are quoted in an error.
const ERROR_BODY_CHARS: usize = 300;

/// Timeouts and retries of one endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    /// Delay before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// Cap of the computed backoff.
    pub max_backoff: Duration,
    /// Shorten each computed backoff by a random 0–25 %, so clients that failed together do not
    /// retry together.
    pub jitter: bool,
    /// The longest `Retry-After` waited for. A server asking for longer (or for more than a
    /// call's time budget leaves) is not retried: the call fails with
    /// `HttpError::RetryAfterTooLong`, since retrying sooner than asked only meets the same
    /// refusal.
    pub max_retry_after: Duration,
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole request, answer included.
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            jitter: true,
            max_retry_after: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Whether an answer with this status is worth another attempt.
    pub fn is_retryable_status(status: StatusCode) -> bool {
        matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error()
    }

    /// The computed backoff before retry `retry` (0 for the first retry), jitter included.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(30));
        let base = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        if self.jitter {
            base.mul_f64(1.0 - 0.25 * random_unit())
        } else {
            base
        }
    }

    /// How long to wait before retry `retry`: the server's `Retry-After` when it gave a usable
    /// one, the computed backoff otherwise.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(d) if d <= self.max_retry_after => d,
            _ => self.backoff(retry),
        }
    }

    /// A blocking client with this policy's timeouts.
    pub fn client(&self) -> Result<Client, HttpError> {
        client_builder()
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .user_agent(concat!("ragtrail/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| HttpError::Client {
                message: e.to_string(),
            })
    }
}

/// Sets ring as the process's TLS crypto provider, once; one already set is left as it is.
/// reqwest is built without a provider of its own (its default, aws-lc-rs, is the slowest crate
/// of a build) and sets up TLS even for a plain-HTTP client, so a program that builds reqwest
/// clients itself (a test, a benchmark) calls this before its first one; the engine's own
/// clients do.
pub fn use_ring_for_tls() {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // Err only means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A blocking client builder whose TLS uses ring (see [`use_ring_for_tls`]).
pub(crate) fn client_builder() -> reqwest::blocking::ClientBuilder {
    use_ring_for_tls();
    Client::builder()
}

/// The server's requested wait: `retry-after-ms` (milliseconds, as OpenAI sends it), else
/// `Retry-After` as seconds or as an HTTP date (relative to `now`; a date in the past is 0).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The settings that configure one endpoint, named in errors so the user knows what to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointSettings {
    /// What the endpoint is for, e.g. `"embeddings"`.
    pub purpose: &'static str,
    /// Variable (or flag) holding the base URL, e.g. `RAGTRAIL_EMBED_BASE_URL`.
    pub base_url: &'static str,
    /// Variable holding the API key.
    pub api_key: &'static str,
    /// Variable holding the model name.
    pub model: &'static str,
}

/// Why a request failed, after the retries the policy allows.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot set up the HTTP client: {message}")]
    Client { message: String },
    #[error("{url:?} is not a usable URL ({message}); check {setting}")]
    InvalidUrl {
        url: String,
        message: String,
        setting: &'static str,
    },
    #[error(
        "cannot reach the {purpose} endpoint {url} ({attempts} attempts): {message}; check {setting} and that the server is running"
    )]
    Connect {
        purpose: &'static str,
        url: String,
        attempts: u32,
        message: String,
        setting: &'static str,
    },
    #[error(
        "the {purpose} endpoint {url} did not answer in time ({attempts} attempts, {timeout_secs} s each)"
    )]
    Timeout {
        purpose: &'static str,
        url: String,
        attempts: u32,
        timeout_secs: u64,
    },
    #[error(
        "the {purpose} endpoint {url} rejected the API key (HTTP 401{detail}); check {setting}"
    )]
    Unauthorized {
        purpose: &'static str,
        url: String,
        detail: String,
        setting: &'static str,
    },
    #[error(
        "the {purpose} endpoint {url} refused access (HTTP 403{detail}): the API key may not use this model or endpoint; check {key_setting} and {model_setting}"
    )]
    Forbidden {
        purpose: &'static str,
        url: String,
        detail: String,
        key_setting: &'static str,
        model_setting: &'static str,
    },
    #[error(
        "the {purpose} endpoint {url} was not found (HTTP 404{detail}); check {url_setting} (OpenAI-compatible servers usually expect it to end in /v1) and {model_setting}"
    )]
    NotFound {
        purpose: &'static str,
        url: String,
        detail: String,
        url_setting: &'static str,
        model_setting: &'static str,
    },
    #[error("the {purpose} endpoint {url} answered HTTP {status} ({attempts} attempts){detail}")]
    Status {
        purpose: &'static str,
        url: String,
        status: u16,
        attempts: u32,
        detail: String,
    },
    #[error(
        "the {purpose} endpoint {url} answered HTTP {status} and asked to wait {wait_secs} s before retrying, longer than {limit}; not retried{detail}"
    )]
    RetryAfterTooLong {
        purpose: &'static str,
        url: String,
        status: u16,
        /// The server's `Retry-After`, in whole seconds (rounded up).
        wait_secs: u64,
        /// Which bound it exceeds, e.g. `the 60 s this client waits for a server`.
        limit: String,
        detail: String,
    },
    #[error("the time budget for the {purpose} endpoint {url} ran out ({attempts} attempts){last}")]
    Budget {
        purpose: &'static str,
        url: String,
        attempts: u32,
        /// `; last error: …` when an attempt failed before the budget ran out, else empty.
        last: String,
    },
    #[error(
        "the {purpose} endpoint {url} sent more than {limit} bytes, {what}; reading stopped there (raise {setting} if replies this large are expected)"
    )]
    TooLarge {
        purpose: &'static str,
        url: String,
        limit: u64,
        /// Which bound it was, e.g. `the most one reply may have`.
        what: &'static str,
        setting: &'static str,
    },
    #[error("the {purpose} endpoint {url} sent an answer that cannot be read: {message}")]
    Body {
        purpose: &'static str,
        url: String,
        message: String,
    },
}

impl HttpError {
    /// The HTTP status, for errors that carry one.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Unauthorized { .. } => Some(401),
            HttpError::Forbidden { .. } => Some(403),
            HttpError::NotFound { .. } => Some(404),
            HttpError::Status { status, .. } | HttpError::RetryAfterTooLong { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub body: Vec<u8>,
    /// Attempts it took (1 when the first one succeeded).
    pub attempts: u32,
}

/// The most bytes a reply body may have, and which bound and setting that is (for the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit {
    pub bytes: u64,
    pub what: &'static str,
    pub setting: &'static str,
}

/// Why a body could not be read whole.
enum BodyRead {
    Transport(reqwest::Error),
    Io(std::io::Error),
    /// More than the limit arrived (or was announced by `Content-Length`).
    TooLarge(BodyLimit),
}

/// Reads a body, stopping as soon as it passes `limit`: a runaway reply costs at most the limit
/// in memory, never its whole size.
fn read_body(
    resp: reqwest::blocking::Response,
    limit: Option<BodyLimit>,
) -> Result<(StatusCode, HeaderMap, Vec<u8>), BodyRead> {
    use std::io::Read;
    let status = resp.status();
    let headers = resp.headers().clone();
    let Some(limit) = limit else {
        return resp
            .bytes()
            .map(|b| (status, headers, b.to_vec()))
            .map_err(BodyRead::Transport);
    };
    if resp.content_length().is_some_and(|n| n > limit.bytes) {
        return Err(BodyRead::TooLarge(limit));
    }
    let mut body = Vec::new();
    resp.take(limit.bytes.saturating_add(1))
        .read_to_end(&mut body)
        .map_err(|e| {
            match e
                .into_inner()
                .map(|inner| inner.downcast::<reqwest::Error>())
            {
                Some(Ok(e)) => BodyRead::Transport(*e),
                Some(Err(other)) => BodyRead::Io(std::io::Error::other(other)),
                None => BodyRead::Io(std::io::Error::other("the connection failed mid-body")),
            }
        })?;
    if body.len() as u64 > limit.bytes {
        return Err(BodyRead::TooLarge(limit));
    }
    Ok((status, headers, body))
}

/// A blocking JSON client for one OpenAI-compatible endpoint, applying a [`RetryPolicy`].
#[derive(Clone)]
pub struct JsonClient {
    client: Client,
    policy: RetryPolicy,
    settings: EndpointSettings,
    api_key: Option<String>,
}

impl std::fmt::Debug for JsonClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonClient")
            .field("policy", &self.policy)
            .field("settings", &self.settings)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl JsonClient {
    /// `api_key` is sent as a bearer token when set (blank counts as unset).
    pub fn new(
        policy: RetryPolicy,
        settings: EndpointSettings,
        api_key: Option<String>,
    ) -> Result<Self, HttpError> {
        Ok(Self {
            client: policy.client()?,
            policy,
            settings,
            api_key: api_key.filter(|k| !k.trim().is_empty()),
        })
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// `{base}/{path}` with exactly one slash between them; checks that the result is an
    /// http(s) URL.
    pub fn endpoint_url(&self, base: &str, path: &str) -> Result<String, HttpError> {
        let url = format!(
            "{}/{}",
            base.trim().trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(url),
            Ok(u) => Err(HttpError::InvalidUrl {
                url: display_url(&url),
                message: format!("scheme {:?}, expected http or https", u.scheme()),
                setting: self.settings.base_url,
            }),
            Err(e) => Err(HttpError::InvalidUrl {
                url: display_url(&url),
                message: e.to_string(),
                setting: self.settings.base_url,
            }),
        }
    }

    /// POSTs `body` as JSON to `url`, retrying as the policy allows.
    pub fn post_json<T: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        body: &T,
    ) -> Result<HttpReply, HttpError> {
        self.post_json_before(url, body, None)
    }

    /// Like [`post_json`](Self::post_json), inside a time budget that several calls may share
    /// (e.g. every chat request of one agent run): no attempt runs past `deadline` (its timeout
    /// is cut to the time left), and no retry is waited for that would start after it. Running
    /// out gives [`HttpError::Budget`].
    pub fn post_json_before<T: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        body: &T,
        deadline: Option<Instant>,
    ) -> Result<HttpReply, HttpError> {
        self.post_json_bounded(url, body, deadline, None)
    }

    /// Like [`post_json_before`](Self::post_json_before), reading at most `limit` bytes of any
    /// answer: a larger one is [`HttpError::TooLarge`], found while reading, and not retried
    /// (a model that wrote that much once will likely do it again, and each try costs the limit).
    pub fn post_json_bounded<T: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        body: &T,
        deadline: Option<Instant>,
        limit: Option<BodyLimit>,
    ) -> Result<HttpReply, HttpError> {
        let shown = display_url(url);
        let bytes = serde_json::to_vec(body).map_err(|e| HttpError::Body {
            purpose: self.settings.purpose,
            url: shown.clone(),
            message: format!("cannot encode the request: {e}"),
        })?;
        let auth = match &self.api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    HttpError::Client {
                        message: format!(
                            "the API key in {} contains characters not allowed in an HTTP header",
                            self.settings.api_key
                        ),
                    }
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut retry = 0u32;
        loop {
            let attempts = retry + 1;
            let mut request = self
                .client
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .body(bytes.clone());
            if let Some(auth) = &auth {
                request = request.header(AUTHORIZATION, auth.clone());
            }
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(self.budget_error(url, retry, None));
                }
                if left < self.policy.request_timeout {
                    request = request.timeout(left);
                }
            }
            let outcome = request
                .send()
                .map_err(BodyRead::Transport)
                .and_then(|resp| read_body(resp, limit));
            let (wait, failure) = match outcome {
                Err(BodyRead::TooLarge(limit)) => {
                    return Err(HttpError::TooLarge {
                        purpose: self.settings.purpose,
                        url: shown,
                        limit: limit.bytes,
                        what: limit.what,
                        setting: limit.setting,
                    });
                }
                Err(BodyRead::Io(e)) => (
                    self.policy.backoff(retry),
                    HttpError::Connect {
                        purpose: self.settings.purpose,
                        url: shown.clone(),
                        attempts,
                        message: self.redact(&e.to_string()),
                        setting: self.settings.base_url,
                    },
                ),
                Ok((status, _, body)) if status.is_success() => {
                    return Ok(HttpReply { body, attempts });
                }
                Ok((status, headers, body)) => {
                    let failure = self.status_error(url, status, &body, attempts);
                    if !RetryPolicy::is_retryable_status(status) {
                        return Err(failure);
                    }
                    let hint = retry_after(&headers, SystemTime::now());
                    if retry < self.policy.max_retries
                        && let Some(wait) = hint
                        && let Some(limit) = self.wait_refused(wait, deadline)
                    {
                        return Err(HttpError::RetryAfterTooLong {
                            purpose: self.settings.purpose,
                            url: shown,
                            status: status.as_u16(),
                            wait_secs: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
                            limit,
                            detail: match failure {
                                HttpError::Status { detail, .. } => detail,
                                _ => String::new(),
                            },
                        });
                    }
                    (self.policy.delay(retry, hint), failure)
                }
                Err(BodyRead::Transport(e)) => {
                    let failure = self.transport_error(url, &e, attempts);
                    if e.is_timeout() && deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(self.budget_error(url, attempts, Some(&failure)));
                    }
                    let transient =
                        e.is_connect() || e.is_timeout() || e.is_body() || e.is_request();
                    if !transient {
                        return Err(failure);
                    }
                    (self.policy.backoff(retry), failure)
                }
            };
            if retry >= self.policy.max_retries {
                return Err(failure);
            }
            if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                return Err(self.budget_error(url, attempts, Some(&failure)));
            }
            tracing::warn!(
                endpoint = self.settings.purpose,
                url = %shown,
                attempt = attempts,
                wait_ms = wait.as_millis() as u64,
                "{failure}; retrying"
            );
            std::thread::sleep(wait);
            retry += 1;
        }
    }

    /// Why a server's requested wait is not honoured, if it is not: longer than the policy
    /// waits for, or than the call's time budget leaves.
    fn wait_refused(&self, wait: Duration, deadline: Option<Instant>) -> Option<String> {
        if wait > self.policy.max_retry_after {
            return Some(format!(
                "the {} s this client waits for a server",
                self.policy.max_retry_after.as_secs_f64()
            ));
        }
        let left = deadline?.saturating_duration_since(Instant::now());
        (wait >= left).then(|| {
            format!(
                "the {:.1} s left of this call's time budget",
                left.as_secs_f64()
            )
        })
    }

    fn budget_error(&self, url: &str, attempts: u32, last: Option<&HttpError>) -> HttpError {
        HttpError::Budget {
            purpose: self.settings.purpose,
            url: display_url(url),
            attempts,
            last: last
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default(),
        }
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error, attempts: u32) -> HttpError {
        let s = &self.settings;
        if e.is_timeout() {
            HttpError::Timeout {
                purpose: s.purpose,
                url: display_url(url),
                attempts,
                timeout_secs: self.policy.request_timeout.as_secs(),
            }
        } else {
            HttpError::Connect {
                purpose: s.purpose,
                url: display_url(url),
                attempts,
                message: self.redact(&error_chain(e)),
                setting: s.base_url,
            }
        }
    }

    fn status_error(&self, url: &str, status: StatusCode, body: &[u8], attempts: u32) -> HttpError {
        let s = &self.settings;
        let url = display_url(url);
        let message = self.redact(&error_message(body));
        let detail = if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        };
        match status.as_u16() {
            401 => HttpError::Unauthorized {
                purpose: s.purpose,
                url,
                detail,
                setting: s.api_key,
            },
            403 => HttpError::Forbidden {
                purpose: s.purpose,
                url,
                detail,
                key_setting: s.api_key,
                model_setting: s.model,
            },
            404 => HttpError::NotFound {
                purpose: s.purpose,
                url,
                detail,
                url_setting: s.base_url,
                model_setting: s.model,
            },
            code => HttpError::Status {
                purpose: s.purpose,
                url,
                status: code,
                attempts,
                detail,
            },
        }
    }

    /// Removes the API key from text a server or library produced.
    fn redact(&self, text: &str) -> String {
        match &self.api_key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_string(),
        }
    }
}

/// The server's explanation: `error.message` (OpenAI style), `error` or `message` as a string,
/// else the start of the body as text.
fn error_message(body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"))
            .and_then(|m| m.as_str().map(String::from))
    });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).to_string());
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.trim();
    if text.chars().count() > ERROR_BODY_CHARS {
        let cut: String = text.chars().take(ERROR_BODY_CHARS).collect();
        format!("{cut}…")
    } else {
        text.to_string()
    }
}

/// The error and its causes, `: `-joined (reqwest's top-level message alone is vague).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// A URL fit for messages: without user name, password, query or fragment.
pub fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => url.chars().take(200).collect(),
    }
}

/// A number in `[0, 1)` that differs between calls (for jitter; not cryptographic).
fn random_unit() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(d) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(d.as_nanos());
    }
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("header value"));
        }
        h
    }

    #[test]
    fn default_policy_matches_the_documented_numbers() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_retries, 2);
        assert_eq!(p.initial_backoff, Duration::from_millis(500));
        assert_eq!(p.max_backoff, Duration::from_secs(8));
    }

    #[test]
    fn backoff_doubles_from_half_a_second_and_is_capped_at_eight() {
        let p = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        let secs: Vec<f64> = (0..7).map(|n| p.backoff(n).as_secs_f64()).collect();
        assert_eq!(secs, vec![0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]);
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(8));
    }

    #[test]
    fn jitter_shortens_by_at_most_a_quarter_and_varies() {
        let p = RetryPolicy::default();
        let samples: Vec<Duration> = (0..200).map(|_| p.backoff(2)).collect();
        for d in &samples {
            assert!(
                *d <= Duration::from_secs(2) && *d >= Duration::from_millis(1500),
                "{d:?}"
            );
        }
        let distinct: std::collections::HashSet<_> = samples.iter().collect();
        assert!(distinct.len() > 50, "jitter barely varies: {distinct:?}");
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")]), now),
            Some(Duration::from_millis(250))
        );
        // retry-after-ms wins over Retry-After.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1500"), ("retry-after", "30")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3")]), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", " 1.5 ")]), now),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &later)]), now),
            Some(Duration::from_secs(7))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &earlier)]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn delay_honours_retry_after_up_to_the_cap() {
        let p = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(1)
        );
        assert_eq!(p.delay(2, None), Duration::from_secs(2));
    }

    #[test]
    fn retryable_statuses() {
        for code in [408, 409, 429, 500, 502, 503, 504] {
            assert!(
                RetryPolicy::is_retryable_status(StatusCode::from_u16(code).expect("code")),
                "{code}"
            );
        }
        for code in [400, 401, 403, 404, 413, 422] {
            assert!(
                !RetryPolicy::is_retryable_status(StatusCode::from_u16(code).expect("code")),
                "{code}"
            );
        }
    }

    #[test]
    fn error_messages_come_from_openai_style_bodies() {
        assert_eq!(
            error_message(br#"{"error":{"message":"model not found","type":"x"}}"#),
            "model not found"
        );
        assert_eq!(error_message(br#"{"error":"busy"}"#), "busy");
        assert_eq!(error_message(b"plain\ntext"), "plain text");
        assert_eq!(error_message(&[b'a'; 1000]).chars().count(), 301);
    }

    fn settings() -> EndpointSettings {
        EndpointSettings {
            purpose: "embeddings",
            base_url: "RAGTRAIL_EMBED_BASE_URL",
            api_key: "RAGTRAIL_EMBED_API_KEY",
            model: "RAGTRAIL_EMBED_MODEL",
        }
    }

    #[test]
    fn status_errors_name_the_setting_to_fix_and_never_the_key() {
        let client = JsonClient::new(
            RetryPolicy::default(),
            settings(),
            Some("sk-secret-123".into()),
        )
        .expect("client");
        let url = "http://127.0.0.1:1/v1/embeddings";
        let e = client.status_error(
            url,
            StatusCode::UNAUTHORIZED,
            br#"{"error":{"message":"bad key sk-secret-123"}}"#,
            1,
        );
        let text = e.to_string();
        assert!(text.contains("RAGTRAIL_EMBED_API_KEY"), "{text}");
        assert!(
            text.contains("[redacted]") && !text.contains("sk-secret"),
            "{text}"
        );
        let e = client.status_error(url, StatusCode::NOT_FOUND, b"", 1);
        assert!(e.to_string().contains("RAGTRAIL_EMBED_BASE_URL"), "{e}");
        assert!(e.to_string().contains("RAGTRAIL_EMBED_MODEL"), "{e}");
        let e = client.status_error(url, StatusCode::FORBIDDEN, b"", 1);
        assert!(e.to_string().contains("RAGTRAIL_EMBED_API_KEY"), "{e}");
        assert_eq!(e.status(), Some(403));
        assert!(!format!("{client:?}").contains("sk-secret"));
    }

    #[test]
    fn a_deadline_cuts_a_hung_request_short_and_a_passed_one_sends_nothing() {
        // A server that accepts connections and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = accepted.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().take(8) {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(stream);
            }
        });
        let client = JsonClient::new(RetryPolicy::default(), settings(), None).expect("client");
        let url = format!("http://{addr}/v1/embeddings");
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let e = client
            .post_json_before(&url, &serde_json::json!({}), Some(deadline))
            .expect_err("hung");
        let took = started.elapsed();
        assert!(matches!(e, HttpError::Budget { attempts: 1, .. }), "{e}");
        assert!(e.to_string().contains("time budget"), "{e}");
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(5),
            "{took:?}"
        );
        let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
        let e = client
            .post_json_before(&url, &serde_json::json!({}), Some(Instant::now()))
            .expect_err("passed");
        assert!(matches!(e, HttpError::Budget { attempts: 0, .. }), "{e}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), before);
    }

    #[test]
    fn urls_are_joined_checked_and_shown_without_credentials() {
        let client = JsonClient::new(RetryPolicy::default(), settings(), None).expect("client");
        assert_eq!(
            client
                .endpoint_url("http://h:8080/v1/", "/embeddings")
                .expect("url"),
            "http://h:8080/v1/embeddings"
        );
        let e = client
            .endpoint_url("ftp://h/v1", "embeddings")
            .expect_err("ftp");
        assert!(e.to_string().contains("RAGTRAIL_EMBED_BASE_URL"), "{e}");
        assert!(client.endpoint_url("not a url", "embeddings").is_err());
        assert_eq!(
            display_url("https://user:pw@h/v1/embeddings?key=1"),
            "https://h/v1/embeddings"
        );
    }
}
