//! Text embedders for the vector leg of hybrid search.
//!
//! The offline default is [`hashing::HashingEmbedder`]: it needs no model files or network, and
//! its vectors are identical on every run and platform. It is *lexical*, not semantic: two texts
//! are close when they share character n-grams (e.g. "报销凭证" in both), not when they mean the
//! same thing with different words ("年假" vs "带薪休假" share little). Treat it as a fuzzy,
//! tokenizer-free complement to BM25, and swap in a semantic model when one is available.
//!
//! Semantic embedders: `local::LocalEmbedder` runs a sentence-transformers folder in-process
//! (CPU; the `local-embed` feature), `e5::E5Embedder` the packed 4-bit
//! multilingual-e5-small file (likewise); [`http::HttpEmbedder`] calls an OpenAI-compatible `/embeddings` endpoint.
//! [`from_config`] picks one from the configuration (see `docs/embeddings.md`).

#[cfg(feature = "local-embed")]
pub mod bert;
mod config;
#[cfg(feature = "local-embed")]
pub mod e5;
#[cfg(feature = "local-embed")]
pub mod e5_file;
#[cfg(feature = "local-embed")]
pub mod e5_folder;
pub mod hashing;
pub mod http;
#[cfg(feature = "local-embed")]
pub mod local;
pub mod marking;
pub mod models;
#[cfg(feature = "local-embed")]
mod q4;
#[cfg(feature = "local-embed")]
mod safetensors;
#[cfg(feature = "local-embed")]
pub mod xlmr_tokenizer;

pub use config::{EmbedConfig, EmbedderChoice, from_config};
#[cfg(feature = "local-embed")]
pub use e5::E5Embedder;
pub use hashing::HashingEmbedder;
pub use http::{HttpEmbedder, HttpEmbedderConfig};
#[cfg(feature = "local-embed")]
pub use local::{LocalEmbedder, LocalOptions};
pub use marking::Marking;

/// The kind recorded by the in-process model embedder (`local::LocalEmbedder`), known even to
/// a build without it, so an index it built is recognised as semantic.
pub const LOCAL_KIND: &str = "local";

use serde::{Deserialize, Serialize};

/// What produced a set of vectors, stored next to them so an index built by one embedder is
/// never queried with vectors from another (different kind, model or dims ⇒ re-embed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EmbedderInfo {
    /// Embedder family, e.g. `"hashing"`.
    pub kind: String,
    /// Model or algorithm version within the family, e.g. `"char-ngram-fnv1a-v1"`.
    pub model: String,
    /// Length of every vector it produces.
    pub dims: u32,
    /// How queries and passages were told apart. Left out of the JSON when there is none, so
    /// stores and traces written before it existed read back (and hash) unchanged.
    #[serde(skip_serializing_if = "Marking::is_none")]
    pub marking: Marking,
}

impl EmbedderInfo {
    /// `kind:model (N dims)`, plus the marking when there is one: what messages name.
    pub fn describe(&self) -> String {
        let base = format!("{}:{} ({} dims)", self.kind, self.model, self.dims);
        if self.marking.is_none() {
            base
        } else {
            format!("{base}, marking {}", self.marking)
        }
    }
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedder {model}: {message}")]
    Failed { model: String, message: String },
    #[error("embedder {model} returned {found}-dimensional vectors, expected {expected}: {hint}")]
    Dimensions {
        model: String,
        expected: usize,
        found: usize,
        hint: String,
    },
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    #[error("local embedding model {path}: {message}")]
    Model { path: String, message: String },
    #[error("embedder configuration: {0}")]
    Config(String),
}

/// Turns texts into vectors of a fixed dimension. Implementations decide nothing about *what*
/// is embedded: the store embeds chunk texts ([`Embedder::embed`], the passage side), the
/// search embeds the query ([`Embedder::embed_query`]).
pub trait Embedder: Send + Sync {
    /// Kind, model, dimension and marking, recorded beside every vector this embedder produced.
    fn info(&self) -> EmbedderInfo;
    /// One vector per document text (passage side), in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// One vector per query text, in order. The same as [`Embedder::embed`] for an embedder
    /// without a query/passage marking.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts)
    }
    /// Inputs cut short so far because they exceeded the model's or the provider's limit.
    fn truncated_inputs(&self) -> u64 {
        0
    }
    /// How many texts a caller with many should pass per [`Embedder::embed`] call (the
    /// embedder batches within a call: by length, or as concurrent requests).
    fn preferred_batch(&self) -> usize {
        64
    }
    /// Whether a vector costs enough (a model, a server) that an ingest keeps each batch on
    /// disk as it goes, so a stopped ingest resumes (`store::embed_journal`). Not for the
    /// hashing embedder, which recomputes faster than it could read its vectors back.
    fn is_costly(&self) -> bool {
        true
    }
}

impl Embedder for HashingEmbedder {
    fn info(&self) -> EmbedderInfo {
        HashingEmbedder::info(self)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self.embed_batch(texts))
    }

    fn is_costly(&self) -> bool {
        false
    }
}
