//! How far a returned chunk's similarity to the question stands out from the knowledge base's:
//! the question's cosine with the chunk, in standard deviations above the mean cosine of the
//! chunks the run may see (a z-score).
//!
//! An absolute similarity says little: a multilingual model scores unrelated passages 0.80–0.86
//! and the right one 0.85–0.94 (BENCHMARKS.md). Measured against the question's own spread over
//! the knowledge base, a passage about what was asked stands apart from the rest whatever the
//! model's scale and whatever words the question uses, in any language the model reads.

use crate::search::Searcher;

/// Chunks the mean and spread are taken over at most: every visible chunk of a small knowledge
/// base, an even sample of a large one.
const SAMPLE: usize = 4096;
/// Fewer visible chunks than this give no spread to speak of.
const MIN_SAMPLE: usize = 16;

/// The question's embedding and its similarity's mean and spread over the visible chunks.
pub(super) struct SimilarityProfile {
    query: Vec<f32>,
    mean: f64,
    spread: f64,
}

impl SimilarityProfile {
    /// `None` for the hashing embedder, when the store has no vectors, when the question cannot
    /// be embedded, or when the run may see too few chunks. The vector leg answers, in memory
    /// or in PostgreSQL.
    pub(super) fn of(searcher: &Searcher<'_>, question: &str) -> Option<Self> {
        // The hashing embedder's vectors are character n-grams, a second view of the words the
        // verdict's key-term coverage already weighs, not of meaning: with it, three of the
        // golden set's nine unanswerable questions were given evidence (BENCHMARKS.md).
        if searcher.embedder().info().kind == crate::embed::hashing::KIND || !searcher.has_vectors()
        {
            return None;
        }
        let query = searcher.embed_query(question)?;
        let spread = searcher.similarity_spread(&query, SAMPLE, MIN_SAMPLE)?;
        (spread.spread > 1e-9).then_some(Self {
            query,
            mean: spread.mean,
            spread: spread.spread,
        })
    }

    /// The z-score of the chunk `chunk_id`.
    pub(super) fn standout(&self, searcher: &Searcher<'_>, chunk_id: &str) -> Option<f64> {
        let similarity = searcher.similarity(&self.query, chunk_id)?;
        Some((similarity - self.mean) / self.spread)
    }
}
