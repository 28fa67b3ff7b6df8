//! The vector leg of `searchDocs`, one trait for both stores: the embedded store scans its own
//! vectors in memory ([`EmbeddedVectorLeg`]), PostgreSQL asks pgvector
//! (`postgres::PgVectorLeg`). `searchDocs` runs whichever the engine hands it, the same way.

use crate::access::AccessContext;

use super::ChunkStore;

/// Why a vector leg found nothing.
#[derive(Debug, thiserror::Error)]
pub enum VectorLegError {
    /// The in-memory scan refused the query (e.g. a vector of the wrong dimension).
    #[error("{0}")]
    Scan(String),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] super::postgres::PgError),
    /// The database moved on since the chunks in memory (and the BM25 index) were read.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    #[error("the index reflects data version {index}, the database is at {database}")]
    Stale { index: u64, database: u64 },
}

/// The `k` chunks nearest to a query vector that an access context may see, as (chunk id,
/// cosine similarity), best first.
pub trait VectorLeg: Sync {
    /// Whether there are any vectors to search (an empty leg is skipped, not run).
    fn has_vectors(&self) -> bool;

    /// How many rows the leg scans in this process, or `None` when it runs elsewhere (a
    /// database): a small in-memory scan is cheaper than handing it to another thread.
    fn in_memory_rows(&self) -> Option<usize>;

    fn search(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError>;

    /// Fails when the leg's vectors are no longer those of the chunks in memory (and the BM25
    /// index). A search that runs [`VectorLeg::search`] is checked by it; one that does not
    /// (BM25 alone, no vectors yet) asks here. Nothing to check for the embedded store.
    fn check_current(&self) -> Result<(), VectorLegError> {
        Ok(())
    }

    /// The mean and spread (population standard deviation) of `query`'s cosine similarity over
    /// the current chunks `access` may see: every one of them, or an even sample of at most
    /// `sample` (every `ceil(visible / sample)`-th in store order). A chunk whose vector is zero
    /// counts as similarity 0. `None` when fewer than `min_visible` are visible, when not every
    /// chunk has a vector, or when `query` has another dimension than the vectors.
    fn similarity_spread(
        &self,
        query: &[f32],
        access: &AccessContext,
        sample: usize,
        min_visible: usize,
    ) -> Result<Option<SimilaritySpread>, VectorLegError>;

    /// `query`'s cosine similarity with the vector of the chunk `chunk_id` (0 for a zero
    /// vector), or `None` when the leg holds no vector for it.
    fn similarity(&self, query: &[f32], chunk_id: &str) -> Result<Option<f64>, VectorLegError>;

    /// The `k` nearest chunks written in the other script (CJK or not) than those `query` is
    /// nearest to on the whole, with their cosine put on the nearer script's scale (`scripts`):
    /// a multilingual model's way to a passage in another language. Empty when the visible
    /// chunks are in one script; PostgreSQL does not group its rows by script and gives none.
    fn search_other_script(
        &self,
        _query: &[f32],
        _k: usize,
        _access: &AccessContext,
        _include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        Ok(Vec::new())
    }
}

/// How similar a query is to the chunks a reader may see, on the whole
/// ([`VectorLeg::similarity_spread`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilaritySpread {
    /// Mean cosine similarity over the chunks taken.
    pub mean: f64,
    /// Their population standard deviation.
    pub spread: f64,
    /// How many chunks were taken.
    pub sampled: usize,
}

impl SimilaritySpread {
    /// The mean and spread of `sims` (`None` for none).
    pub fn of(sims: &[f64]) -> Option<Self> {
        if sims.is_empty() {
            return None;
        }
        let n = sims.len() as f64;
        let mean = sims.iter().sum::<f64>() / n;
        let spread = (sims.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n).sqrt();
        Some(Self {
            mean,
            spread,
            sampled: sims.len(),
        })
    }
}

/// Cosine similarity in f64 (0 when either vector is zero).
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

/// The embedded store's vectors, scanned exactly in memory.
pub struct EmbeddedVectorLeg<'a> {
    store: &'a ChunkStore,
}

impl<'a> EmbeddedVectorLeg<'a> {
    pub fn new(store: &'a ChunkStore) -> Self {
        Self { store }
    }
}

impl EmbeddedVectorLeg<'_> {
    /// A scan's rows as (chunk id, score).
    fn named(
        &self,
        rows: Result<Vec<(usize, f32)>, super::vectors::VectorError>,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        let rows = rows.map_err(|e| VectorLegError::Scan(e.to_string()))?;
        let mut named = Vec::with_capacity(rows.len());
        for (row, score) in rows {
            let chunk = self
                .store
                .record(row)
                .map_err(|e| VectorLegError::Scan(e.to_string()))?;
            if let Some(chunk) = chunk {
                named.push((chunk.id.clone(), score));
            }
        }
        Ok(named)
    }
}

/// The mean and spread of `query`'s cosine over `rows`, every one of them or an even sample of
/// at most `sample` (every `ceil(len / sample)`-th); `None` for no rows.
pub(super) fn sampled_spread(
    vectors: &super::vectors::VectorIndex,
    query: &[f32],
    rows: &[usize],
    sample: usize,
) -> Option<SimilaritySpread> {
    let step = rows.len().div_ceil(sample.max(1)).max(1);
    let sims: Vec<f64> = rows
        .iter()
        .step_by(step)
        .map(|&i| cosine(query, vectors.row(i)))
        .collect();
    SimilaritySpread::of(&sims)
}

impl VectorLeg for EmbeddedVectorLeg<'_> {
    fn has_vectors(&self) -> bool {
        !self.store.vectors().is_empty()
    }

    fn in_memory_rows(&self) -> Option<usize> {
        Some(self.store.len())
    }

    fn search(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        let visible = self.store.visibility(access, include_superseded);
        let rows = self.store.vectors().search(query, k, |i| visible.allows(i));
        self.named(rows)
    }

    fn similarity_spread(
        &self,
        query: &[f32],
        access: &AccessContext,
        sample: usize,
        min_visible: usize,
    ) -> Result<Option<SimilaritySpread>, VectorLegError> {
        let vectors = self.store.vectors();
        if vectors.len() != self.store.len() || query.len() != vectors.dims() {
            return Ok(None);
        }
        let visibility = self.store.visibility(access, false);
        let visible: Vec<usize> = (0..vectors.len())
            .filter(|&i| visibility.allows(i))
            .collect();
        if visible.len() < min_visible || visible.is_empty() {
            return Ok(None);
        }
        Ok(sampled_spread(vectors, query, &visible, sample))
    }

    fn search_other_script(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        let visible = self.store.visibility(access, include_superseded);
        let written = (self.store.written()).map_err(|e| VectorLegError::Scan(e.to_string()))?;
        let rows =
            super::scripts::other_script_rows(self.store.vectors(), written, query, k, |i| {
                visible.allows(i)
            });
        self.named(rows)
    }

    fn similarity(&self, query: &[f32], chunk_id: &str) -> Result<Option<f64>, VectorLegError> {
        let vectors = self.store.vectors();
        Ok(self
            .store
            .position(chunk_id)
            .filter(|&i| i < vectors.len() && query.len() == vectors.dims())
            .map(|i| cosine(query, vectors.row(i))))
    }
}
