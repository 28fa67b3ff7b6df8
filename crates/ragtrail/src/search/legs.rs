//! The legs stage: the BM25 leg (one visit of the index per call) and the vector leg (the
//! embedded store's vectors, or pgvector), each filtered by access before ranking, side by
//! side when a large store needs both; and the signals a fusion reads from them.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::embed::Embedder;
use crate::embed::hashing::KIND as HASHING_KIND;
use crate::index::{Bm25Index, Bm25Query};
use crate::store::{ChunkStore, VectorLeg};

use super::fusion::{self, Fusion, LegHit, QuerySignals};
use super::request::ValidRequest;
use super::sufficiency::{KeyTerm, covered_by};
use super::{LegStats, MIN_VECTOR_SCORE, SearchError, SearchSettings, check_embedder};

/// What the legs read: the parts of a [`super::Searcher`] they need, all shareable with the
/// thread that runs the vector leg.
#[derive(Clone, Copy)]
pub(crate) struct Sources<'e> {
    pub store: &'e ChunkStore,
    pub index: &'e Bm25Index,
    pub embedder: &'e dyn Embedder,
    /// The store's own vectors, or pgvector.
    pub vector_leg: &'e dyn VectorLeg,
    pub settings: &'e SearchSettings,
}

/// The hits and stats of each leg the fusion needs (an unused leg is empty).
pub(crate) struct Legs {
    pub use_bm25: bool,
    pub use_vector: bool,
    pub bm25: Vec<LegHit>,
    pub bm25_stats: LegStats,
    pub vector: Vec<LegHit>,
    pub vector_stats: LegStats,
}

impl Legs {
    /// Counts and latency of each leg that ran, by name (`bm25`, `vector`).
    pub fn stats(&self) -> BTreeMap<String, LegStats> {
        let mut legs = BTreeMap::new();
        if self.use_bm25 {
            legs.insert("bm25".to_string(), self.bm25_stats);
        }
        if self.use_vector {
            legs.insert("vector".to_string(), self.vector_stats);
        }
        legs
    }
}

/// Whether a search fused with `fusion` runs the vector leg over `leg`.
pub(crate) fn uses_vector(fusion: Fusion, leg: &dyn VectorLeg) -> bool {
    !matches!(fusion, Fusion::Bm25Only) && leg.has_vectors()
}

/// Embedded stores with fewer chunks than this run the two legs one after the other on the
/// calling thread; measured faster at 236, 278 and 3,000 chunks, slower at 100,000.
const SEQUENTIAL_LEGS_BELOW: usize = 5_000;

/// Runs the legs `req.fusion` needs, side by side when both are needed.
pub(crate) fn run(src: Sources<'_>, req: &ValidRequest<'_>) -> Result<Legs, SearchError> {
    let keywords = req.keywords.as_slice();
    let candidates = req.candidates;
    let use_bm25 = !matches!(req.fusion, Fusion::VectorOnly);
    let use_vector = uses_vector(req.fusion, src.vector_leg);
    if use_vector {
        check_embedder(src.store, src.embedder)?;
    }
    let bm25_leg = || -> Result<(Vec<LegHit>, LegStats), SearchError> {
        if !use_bm25 {
            return Ok((Vec::new(), LegStats::default()));
        }
        let started = Instant::now();
        let matches = src.index.search(&Bm25Query {
            keywords,
            access: req.access,
            include_superseded: req.include_superseded,
            limit: candidates,
            title_boost: src.settings.title_boost,
        })?;
        let hits: Vec<LegHit> = matches
            .iter()
            .filter_map(|m| {
                // Only chunks the store holds; named from the id64, without reading the chunk.
                src.store
                    .position_of_id64(m.id64)
                    .map(|_| LegHit::new(crate::index::u64_to_chunk_id(m.id64), m.score))
            })
            .collect();
        Ok((
            hits,
            LegStats {
                count: matches.len() as u32,
                latency_ms: started.elapsed().as_secs_f64() * 1e3,
            },
        ))
    };
    let query_text = req.query;
    let access = req.access;
    let include_superseded = req.include_superseded;
    let vector_leg = || -> Result<(Vec<LegHit>, LegStats), SearchError> {
        if !use_vector {
            return Ok((Vec::new(), LegStats::default()));
        }
        let started = Instant::now();
        let joined = keywords.join(" ");
        let query_text = match query_text.map(str::trim) {
            Some(query) if !query.is_empty() && src.embedder.info().kind != HASHING_KIND => query,
            _ => joined.as_str(),
        };
        let query = src
            .embedder
            .embed_query(&[query_text])?
            .pop()
            .unwrap_or_default();
        let hits: Vec<LegHit> = src
            .vector_leg
            .search(&query, candidates, access, include_superseded)
            .map_err(|e| SearchError::from_leg(e, src.embedder.info().model))?
            .into_iter()
            .filter(|(_, score)| *score > MIN_VECTOR_SCORE)
            .map(|(id, score)| LegHit::new(id, score))
            .collect();
        let stats = LegStats {
            count: hits.len() as u32,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        };
        Ok((hits, stats))
    };
    // On a small embedded store both legs take tens of microseconds, less than waking a pool
    // thread: one after the other is faster there (BENCHMARKS.md, "legs in sequence").
    let small_store = src
        .vector_leg
        .in_memory_rows()
        .is_some_and(|rows| rows < SEQUENTIAL_LEGS_BELOW);
    let (bm25, vector) = if use_bm25 && use_vector && !small_store {
        // The BM25 leg runs on the calling thread and only the vector leg goes to the pool:
        // `rayon::join` from outside the pool would hand both to pool threads and block the
        // caller, two thread hand-offs that cost more than a small index's legs themselves.
        let mut vector = None;
        let bm25 = rayon::in_place_scope(|s| {
            s.spawn(|_| vector = Some(vector_leg()));
            bm25_leg()
        });
        (bm25, vector.unwrap_or_else(|| Ok(Default::default())))
    } else {
        (bm25_leg(), vector_leg())
    };
    let (bm25, bm25_stats) = bm25?;
    let (vector, vector_stats) = vector?;
    Ok(Legs {
        use_bm25,
        use_vector,
        bm25,
        bm25_stats,
        vector,
        vector_stats,
    })
}

/// How much of the query BM25's best hit contains: the IDF-weighted share of the query's key
/// terms (as the sufficiency decision weighs them) found in it, in `[0, 1]`. 1 when the
/// question copies the passage's words; low for a question in another language, where BM25's
/// best hit merely shares a common word. `None` when it cannot be measured: the keywords have
/// no content words. No BM25 hit at all is 0.
pub fn lexical_coverage(store: &ChunkStore, keys: &[KeyTerm], bm25: &[LegHit]) -> Option<f64> {
    let total: f64 = keys.iter().map(|k| k.weight).sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let Some((_, analysed)) = bm25.first().and_then(|top| store.get_analysed(&top.id)) else {
        return Some(0.0);
    };
    let present = covered_by(keys, |t| analysed.contains(t), analysed.lowercase());
    let found: f64 = keys
        .iter()
        .filter(|k| present.contains(&k.term))
        .map(|k| k.weight)
        .sum();
    Some((found / total).clamp(0.0, 1.0))
}

/// The signals `fusion` reads (only a mode whose [`Fusion::lexical_signal`] reads the
/// coverage reads any: the others get none, at no cost).
pub(crate) fn query_signals(
    store: &ChunkStore,
    fusion: Fusion,
    keys: &[KeyTerm],
    bm25: &[LegHit],
) -> QuerySignals {
    QuerySignals {
        lexical_coverage: matches!(
            fusion.lexical_signal(),
            Some(fusion::LexicalSignal::Coverage | fusion::LexicalSignal::CoverageAndMargin)
        )
        .then(|| lexical_coverage(store, keys, bm25))
        .flatten(),
    }
}
