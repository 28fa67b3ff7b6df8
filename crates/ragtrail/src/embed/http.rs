//! Client of an OpenAI-compatible `POST {base}/embeddings` endpoint (hosted providers, vLLM,
//! Ollama, text-embeddings-inference, llama.cpp server…).
//!
//! * Inputs are sent in batches of [`HttpEmbedderConfig::batch_size`], up to
//!   [`HttpEmbedderConfig::concurrency`] requests at a time (scoped threads: the client is
//!   blocking), and the vectors come back in input order.
//! * Retries, timeouts and error explanations follow the shared [`crate::http::RetryPolicy`].
//! * The dimension is checked on every answer: it must equal the declared one
//!   ([`HttpEmbedderConfig::dims`]) or, when none was declared, the one the first answer
//!   established. A change is an error, never a silently mixed index.
//! * An input longer than [`HttpEmbedderConfig::max_input_chars`] is cut to that length before
//!   it is sent, deliberately, so a long chunk never makes the provider reject a batch in the
//!   middle of an ingest; [`HttpEmbedder::truncated_inputs`] counts them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::marking::{Marking, Side};
use super::{EmbedError, Embedder, EmbedderInfo};
use crate::http::{EndpointSettings, HttpError, JsonClient, RetryPolicy};

/// Embedder family reported in [`EmbedderInfo::kind`].
pub const KIND: &str = "http";

/// The settings that configure this endpoint, named in its errors.
pub const SETTINGS: EndpointSettings = EndpointSettings {
    purpose: "embeddings",
    base_url: "RAGTRAIL_EMBED_BASE_URL",
    api_key: "RAGTRAIL_EMBED_API_KEY",
    model: "RAGTRAIL_EMBED_MODEL",
};

/// Default inputs per request.
pub const DEFAULT_BATCH_SIZE: usize = 64;
/// Default requests in flight at once.
pub const DEFAULT_CONCURRENCY: usize = 2;
/// Default longest input, in characters. Chunks are far shorter (about 900 characters); this
/// stays under the 8k-token limit of common providers even for CJK text (about one token per
/// character).
pub const DEFAULT_MAX_INPUT_CHARS: usize = 6000;

/// How to reach an embeddings endpoint.
#[derive(Clone)]
pub struct HttpEmbedderConfig {
    /// Base URL, usually ending in `/v1`; `/embeddings` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Model name sent with every request and recorded beside the vectors.
    pub model: String,
    /// Expected dimension; `None`: whatever the first answer has.
    pub dims: Option<u32>,
    pub batch_size: usize,
    pub concurrency: usize,
    pub max_input_chars: usize,
    /// How queries and passages are marked (an `input_type` field or a text prefix).
    pub marking: Marking,
    pub policy: RetryPolicy,
}

impl HttpEmbedderConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dims: None,
            batch_size: DEFAULT_BATCH_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
            max_input_chars: DEFAULT_MAX_INPUT_CHARS,
            marking: Marking::None,
            policy: RetryPolicy::default(),
        }
    }
}

impl std::fmt::Debug for HttpEmbedderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpEmbedderConfig")
            .field("base_url", &crate::http::display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("dims", &self.dims)
            .field("batch_size", &self.batch_size)
            .field("concurrency", &self.concurrency)
            .field("max_input_chars", &self.max_input_chars)
            .field("marking", &self.marking)
            .field("policy", &self.policy)
            .finish()
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
    /// Sent only with an `input_type` marking: some servers reject fields they do not know.
    #[serde(skip_serializing_if = "Option::is_none")]
    input_type: Option<&'a str>,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// Embeddings from an OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct HttpEmbedder {
    config: HttpEmbedderConfig,
    client: JsonClient,
    url: String,
    /// Declared, or established by the first answer.
    dims: Mutex<Option<u32>>,
    /// Whether `dims` was declared (for the error message).
    declared: bool,
    truncated: AtomicU64,
}

impl HttpEmbedder {
    /// Checks the configuration; sends nothing. Without a declared dimension, [`Embedder::info`]
    /// reports 0 dimensions until the first answer: hand the engine an embedder from
    /// [`HttpEmbedder::connect`] (or [`super::from_config`]) instead.
    pub fn new(config: HttpEmbedderConfig) -> Result<Self, EmbedError> {
        if config.model.trim().is_empty() {
            return Err(EmbedError::Config(format!(
                "the embeddings endpoint needs a model name: set {} (or --embed-model)",
                SETTINGS.model
            )));
        }
        if config.batch_size == 0 || config.concurrency == 0 || config.max_input_chars == 0 {
            return Err(EmbedError::Config(
                "embedding batch size, concurrency and max input chars must be at least 1".into(),
            ));
        }
        let client = JsonClient::new(config.policy.clone(), SETTINGS, config.api_key.clone())?;
        let url = client.endpoint_url(&config.base_url, "embeddings")?;
        Ok(Self {
            dims: Mutex::new(config.dims),
            declared: config.dims.is_some(),
            config,
            client,
            url,
            truncated: AtomicU64::new(0),
        })
    }

    /// [`HttpEmbedder::new`], then, when no dimension was declared, one short request to learn
    /// it (so [`Embedder::info`] is complete before anything is stored).
    pub fn connect(config: HttpEmbedderConfig) -> Result<Self, EmbedError> {
        let embedder = Self::new(config)?;
        if embedder.dims().is_none() {
            embedder.embed(&["dimension probe"])?;
        }
        Ok(embedder)
    }

    /// The dimension, once declared or established.
    pub fn dims(&self) -> Option<u32> {
        *self.dims.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The endpoint URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Inputs cut to `max_input_chars` so far.
    pub fn truncated_inputs(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }

    /// The text sent for `text` on `side`: the marking's prefix, then the text cut to
    /// `max_input_chars` (the prefix counts towards it).
    fn prepare(&self, text: &str, side: Side) -> String {
        let prefix = self.config.marking.prefix(side);
        let max = self
            .config
            .max_input_chars
            .saturating_sub(prefix.chars().count())
            .max(1);
        let cut = match text.char_indices().nth(max) {
            Some((byte, _)) => {
                self.truncated.fetch_add(1, Ordering::Relaxed);
                &text[..byte]
            }
            None => text,
        };
        // Providers reject empty strings; a blank text gets a blank vector's worth of meaning.
        let cut = if cut.is_empty() && prefix.is_empty() {
            " "
        } else {
            cut
        };
        format!("{prefix}{cut}")
    }

    fn embed_batch(&self, inputs: &[&str], side: Side) -> Result<Vec<Vec<f32>>, EmbedError> {
        let reply = self.client.post_json(
            &self.url,
            &EmbeddingsRequest {
                model: &self.config.model,
                input: inputs,
                input_type: self.config.marking.input_type(side),
            },
        )?;
        let parsed: EmbeddingsResponse =
            serde_json::from_slice(&reply.body).map_err(|e| HttpError::Body {
                purpose: SETTINGS.purpose,
                url: crate::http::display_url(&self.url),
                message: format!("not an OpenAI-style embeddings answer ({e})"),
            })?;
        if parsed.data.len() != inputs.len() {
            return Err(self.failed(format!(
                "sent {} inputs, received {} embeddings",
                inputs.len(),
                parsed.data.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
        for (pos, item) in parsed.data.into_iter().enumerate() {
            let at = item.index.unwrap_or(pos);
            match out.get_mut(at) {
                Some(slot @ None) => *slot = Some(item.embedding),
                _ => {
                    return Err(
                        self.failed(format!("embedding index {at} is out of range or repeated"))
                    );
                }
            }
        }
        let vectors: Vec<Vec<f32>> = out.into_iter().flatten().collect();
        for v in &vectors {
            self.check_dims(v.len())?;
            if v.iter().any(|x| !x.is_finite()) {
                return Err(self.failed("an embedding holds NaN or infinity".into()));
            }
        }
        Ok(vectors)
    }

    fn check_dims(&self, found: usize) -> Result<(), EmbedError> {
        let mut dims = self.dims.lock().unwrap_or_else(|e| e.into_inner());
        match *dims {
            None => {
                if found == 0 {
                    return Err(self.failed("the endpoint returned empty embeddings".into()));
                }
                *dims = Some(found as u32);
                Ok(())
            }
            Some(expected) if expected as usize == found => Ok(()),
            Some(expected) => Err(EmbedError::Dimensions {
                model: self.config.model.clone(),
                expected: expected as usize,
                found,
                hint: if self.declared {
                    "the declared dimension (RAGTRAIL_EMBED_DIMS, or the index's) differs from what the endpoint returns: check RAGTRAIL_EMBED_MODEL, or run `ragtrail ingest --rebuild` to re-embed with the new model".into()
                } else {
                    "the endpoint changed dimension between requests: check that RAGTRAIL_EMBED_BASE_URL serves one model".into()
                },
            }),
        }
    }

    fn failed(&self, message: String) -> EmbedError {
        EmbedError::Failed {
            model: self.config.model.clone(),
            message,
        }
    }
}

impl Embedder for HttpEmbedder {
    fn info(&self) -> EmbedderInfo {
        EmbedderInfo {
            kind: KIND.to_string(),
            model: self.config.model.clone(),
            dims: self.dims().unwrap_or(0),
            marking: self.config.marking.clone(),
        }
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_side(texts, Side::Passage)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_side(texts, Side::Query)
    }

    fn truncated_inputs(&self) -> u64 {
        HttpEmbedder::truncated_inputs(self)
    }

    fn preferred_batch(&self) -> usize {
        self.config.batch_size * self.config.concurrency
    }
}

impl HttpEmbedder {
    /// Texts of one side in batches, up to `concurrency` requests in flight, vectors in order.
    fn embed_side(&self, texts: &[&str], side: Side) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let owned: Vec<String> = texts.iter().map(|t| self.prepare(t, side)).collect();
        let inputs: Vec<&str> = owned.iter().map(String::as_str).collect();
        let batches: Vec<&[&str]> = inputs.chunks(self.config.batch_size).collect();
        let workers = self.config.concurrency.min(batches.len());
        if workers <= 1 {
            let mut out = Vec::with_capacity(texts.len());
            for batch in batches {
                out.extend(self.embed_batch(batch, side)?);
            }
            return Ok(out);
        }
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        type Slot = Option<Result<Vec<Vec<f32>>, EmbedError>>;
        let results: Mutex<Vec<Slot>> = Mutex::new((0..batches.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(batch) = batches.get(i) else { break };
                        let result = self.embed_batch(batch, side);
                        if result.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
                    }
                });
            }
        });
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(texts.len());
        for result in results {
            match result {
                Some(r) => out.extend(r?),
                // Workers take batches in order, so a batch never sent comes after the one that
                // failed, whose error was returned above; this is only a safeguard.
                None => {
                    return Err(self.failed("a batch was not sent after another one failed".into()));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_checked_before_any_request() {
        let e = HttpEmbedder::new(HttpEmbedderConfig::new("http://127.0.0.1:9/v1", " "))
            .expect_err("no model");
        assert!(e.to_string().contains("RAGTRAIL_EMBED_MODEL"), "{e}");
        let e = HttpEmbedder::new(HttpEmbedderConfig::new("localhost:9", "m")).expect_err("url");
        assert!(e.to_string().contains("RAGTRAIL_EMBED_BASE_URL"), "{e}");
        let ok = HttpEmbedder::new(HttpEmbedderConfig::new("http://127.0.0.1:9/v1/", "m"))
            .expect("valid");
        assert_eq!(ok.url(), "http://127.0.0.1:9/v1/embeddings");
        assert_eq!(ok.info().dims, 0);
    }

    #[test]
    fn long_inputs_are_cut_at_a_character_boundary_and_counted() {
        let mut config = HttpEmbedderConfig::new("http://127.0.0.1:9/v1", "m");
        config.max_input_chars = 3;
        let e = HttpEmbedder::new(config).expect("valid");
        assert_eq!(e.prepare("报销凭证", Side::Passage), "报销凭");
        assert_eq!(e.prepare("abc", Side::Query), "abc");
        assert_eq!(e.prepare("", Side::Passage), " ");
        assert_eq!(e.truncated_inputs(), 1);
    }

    #[test]
    fn a_prefix_marking_is_written_before_the_text_and_counts_towards_the_limit() {
        let mut config = HttpEmbedderConfig::new("http://127.0.0.1:9/v1", "m");
        config.marking = "e5".parse().expect("preset");
        config.max_input_chars = 12;
        let e = HttpEmbedder::new(config).expect("valid");
        assert_eq!(e.prepare("年假", Side::Query), "query: 年假");
        assert_eq!(e.prepare("abcdefgh", Side::Passage), "passage: abc");
        assert_eq!(e.prepare("", Side::Passage), "passage: ");
        assert_eq!(e.info().marking.prefix(Side::Query), "query: ");
    }
}
