//! How far a returned chunk's similarity to the question stands out from the knowledge base's:
//! the question's cosine with the chunk, in standard deviations above the mean cosine of the
//! chunks the run may see (a z-score).
//!
//! An absolute similarity says little: a multilingual model scores unrelated passages 0.80–0.86
//! and the right one 0.85–0.94 (BENCHMARKS.md). Measured against the question's own spread over
//! the knowledge base, a passage about what was asked stands apart from the rest whatever the
//! model's scale and whatever words the question uses, in any language the model reads.

use crate::access::AccessContext;
use crate::engine::Engine;

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
    /// `None` for the hashing embedder, when the store keeps no vectors in memory
    /// (PostgreSQL), when the question cannot be embedded, or when the run may see too few chunks.
    pub(super) fn of(engine: &Engine, access: &AccessContext, question: &str) -> Option<Self> {
        // The hashing embedder's vectors are character n-grams, a second view of the words the
        // verdict's key-term coverage already weighs, not of meaning: with it, three of the
        // golden set's nine unanswerable questions were given evidence (BENCHMARKS.md).
        if engine.embedder().info().kind == crate::embed::hashing::KIND {
            return None;
        }
        let store = engine.store();
        let vectors = store.vectors();
        if vectors.len() != store.chunks().len() {
            return None;
        }
        let query = engine
            .embedder()
            .embed_query(&[question])
            .ok()?
            .into_iter()
            .next()?;
        if query.len() != vectors.dims() {
            return None;
        }
        let visibility = store.visibility(access, false);
        let visible: Vec<usize> = (0..vectors.len())
            .filter(|&i| visibility.allows(i))
            .collect();
        if visible.len() < MIN_SAMPLE {
            return None;
        }
        let step = visible.len().div_ceil(SAMPLE);
        let sims: Vec<f64> = visible
            .iter()
            .step_by(step)
            .map(|&i| cosine(&query, vectors.row(i)))
            .collect();
        let n = sims.len() as f64;
        let mean = sims.iter().sum::<f64>() / n;
        let spread = (sims.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n).sqrt();
        (spread > 1e-9).then_some(Self {
            query,
            mean,
            spread,
        })
    }

    /// The z-score of the chunk at `position` in the store.
    pub(super) fn standout(&self, engine: &Engine, position: usize) -> f64 {
        let row = engine.store().vectors().row(position);
        (cosine(&self.query, row) - self.mean) / self.spread
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
