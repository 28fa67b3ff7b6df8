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
    /// `sample` in store order ([`SampleRuns`]). A chunk whose vector is zero
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

/// Consecutive rows a sample of a large store takes together ([`SampleRuns`]).
const SAMPLE_RUN: usize = 32;

/// Which of `n` rows an even sample of at most `sample` takes: every row when there are no more
/// than `sample`, otherwise runs of consecutive rows spread evenly over them.
///
/// Runs, not every k-th row: the f32 rows are read from a mapped file, and the kernel maps the
/// neighbours of every page a read touches (fault-around), so single rows taken every 25th
/// mapped nearly all 154 MB of a 100k-chunk store for one question; runs of 32 read 125
/// places instead of 4,000 (BENCHMARKS.md). PostgreSQL samples its rows by the same rule, so
/// both stores measure a spread over the same chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleRuns {
    /// Rows taken at most.
    pub sample: usize,
    /// Rows per run.
    pub run: usize,
    /// Runs taken at most.
    pub runs: usize,
}

impl SampleRuns {
    pub fn of(sample: usize) -> Self {
        let sample = sample.max(1);
        let run = SAMPLE_RUN.min(sample);
        Self {
            sample,
            run,
            runs: sample / run,
        }
    }

    /// Every how many runs of `n` rows one is taken: 1 when all `n` fit in the sample, else
    /// `ceil(ceil(n / run) / runs)`.
    pub fn run_step(&self, n: usize) -> usize {
        if n <= self.sample {
            return 1;
        }
        n.div_ceil(self.run).div_ceil(self.runs)
    }

    /// The indices of `n` rows the sample takes, in order: the rows of every `run_step`-th run,
    /// the others never visited.
    pub fn indices(&self, n: usize) -> impl Iterator<Item = usize> + use<> {
        let run = self.run;
        (0..n)
            .step_by(run * self.run_step(n))
            .flat_map(move |start| start..(start + run).min(n))
    }
}

/// The mean and spread of `query`'s cosine over `rows` (ascending), every one of them or an
/// even sample of at most `sample` ([`SampleRuns`]); `None` for no rows.
pub(super) fn sampled_spread(
    vectors: &super::vectors::VectorIndex,
    query: &[f32],
    rows: &[usize],
    sample: usize,
) -> Result<Option<SimilaritySpread>, super::vectors::VectorError> {
    let taken: Vec<usize> = SampleRuns::of(sample)
        .indices(rows.len())
        .map(|i| rows[i])
        .collect();
    let mut sims = Vec::with_capacity(taken.len());
    vectors.visit_rows(&taken, |_, vector| sims.push(cosine(query, vector)))?;
    Ok(SimilaritySpread::of(&sims))
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
        sampled_spread(vectors, query, &visible, sample)
            .map_err(|e| VectorLegError::Scan(e.to_string()))
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
        let Some(row) = (self.store.position(chunk_id))
            .filter(|&i| i < vectors.len() && query.len() == vectors.dims())
        else {
            return Ok(None);
        };
        let mut similarity = None;
        vectors
            .visit_rows(&[row], |_, vector| similarity = Some(cosine(query, vector)))
            .map_err(|e| VectorLegError::Scan(e.to_string()))?;
        Ok(similarity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn taken(n: usize, sample: usize) -> Vec<usize> {
        SampleRuns::of(sample).indices(n).collect()
    }

    #[test]
    fn a_store_no_larger_than_the_sample_is_taken_whole() {
        assert_eq!(taken(4096, 4096), (0..4096).collect::<Vec<_>>());
        assert_eq!(taken(245, 4096).len(), 245);
        assert_eq!(taken(7, 10), (0..7).collect::<Vec<_>>());
    }

    /// 100k rows: runs of 32, every 25th (as every 25th row was taken before), from the first
    /// row to near the last.
    #[test]
    fn a_large_store_is_sampled_in_runs_spread_over_it() {
        let rows = taken(100_000, 4096);
        assert_eq!(rows.len(), 4000);
        let starts: Vec<usize> = rows.iter().copied().step_by(32).collect();
        assert_eq!(starts.len(), 125);
        for (run, &start) in starts.iter().enumerate() {
            assert_eq!(
                rows[run * 32..run * 32 + 32],
                (start..start + 32).collect::<Vec<_>>()[..]
            );
        }
        let gaps: Vec<usize> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g == 25 * 32), "{gaps:?}");
        assert!(*starts.last().expect("runs") > 95_000, "{starts:?}");
    }

    proptest! {
        /// Never more than the sample, never nothing, and every row when they all fit.
        #[test]
        fn a_sample_takes_at_most_its_size(n in 1usize..20_000, sample in 1usize..5_000) {
            let rows = taken(n, sample);
            prop_assert!(!rows.is_empty());
            prop_assert!(rows.len() <= sample.max(1), "{} rows of {n} for {sample}", rows.len());
            if n <= sample {
                prop_assert_eq!(rows.len(), n);
            } else {
                // Not much less: the runs' step is rounded up (as every k-th row's was), which
                // about halves a sample just over the store's size, never more than that.
                prop_assert!(rows.len() * 3 >= sample, "{} rows of {n} for {sample}", rows.len());
            }
        }
    }
}
