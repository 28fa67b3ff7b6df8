//! The legs stage: the BM25 leg (one visit of the index per call) and the vector leg (the
//! embedded store's vectors, or pgvector), each filtered by access before ranking, side by
//! side when a large store needs both; and the signals a fusion reads from them.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::embed::Embedder;
use crate::embed::hashing::KIND as HASHING_KIND;
use crate::index::{Bm25Index, Bm25Query};
use crate::store::{ChunkStore, VectorLeg};

use super::fusion::{self, Fusion, LegHit, LegRank, QuerySignals};
use super::hydrate::{Candidate, ChunkAt};
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

/// One BM25 hit the store holds, by its numeric id and its place in the store: a search on the
/// BM25 leg alone names only the hits it shows (formatting every candidate's id, to drop most
/// of them, was a visible share of a call).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bm25Found {
    pub id64: u64,
    pub position: usize,
    pub score: f32,
}

/// The hits and stats of each leg the fusion needs (an unused leg is empty).
pub(crate) struct Legs {
    pub use_bm25: bool,
    pub use_vector: bool,
    /// The BM25 hits by id, for fusion: empty when the caller asked for them unnamed.
    pub bm25: Vec<LegHit>,
    /// The same hits, unnamed (always there when the leg ran).
    pub bm25_found: Vec<Bm25Found>,
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

/// Chunks of the other script (`VectorLeg::search_other_script`) that join the vector leg's
/// candidates: one. Every query has a best passage in each script, relevant or not, and each
/// one let in pushes out a passage in the question's own language. Evidence recall of the
/// cross-lingual questions, second set / fresh-knowledge: 0 / 0 without, 0.50 / 1.00 with one;
/// letting all in cost the golden set 0.02 of its overall recall, one costs nothing
/// (BENCHMARKS.md, "Passages in the other script").
const OTHER_SCRIPT_CANDIDATES: usize = 1;

/// The `limit` best of two lists of (chunk id, score), best first, each chunk once with its
/// higher score (ties keep the first list's order).
fn merge_best(
    first: Vec<(String, f32)>,
    second: Vec<(String, f32)>,
    limit: usize,
) -> Vec<(String, f32)> {
    let mut best: Vec<(String, f32)> = Vec::with_capacity(first.len() + second.len());
    for (id, score) in first.into_iter().chain(second) {
        match best.iter_mut().find(|(seen, _)| *seen == id) {
            Some(entry) => entry.1 = entry.1.max(score),
            None => best.push((id, score)),
        }
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    best.truncate(limit);
    best
}

/// Whether a search fused with `fusion` runs the vector leg over `leg`.
pub(crate) fn uses_vector(fusion: Fusion, leg: &dyn VectorLeg) -> bool {
    !matches!(fusion, Fusion::Bm25Only) && leg.has_vectors()
}

/// Embedded stores with fewer chunks than this run the two legs one after the other on the
/// calling thread; measured faster at 236, 278 and 3,000 chunks, slower at 100,000.
const SEQUENTIAL_LEGS_BELOW: usize = 5_000;

/// Runs the legs `req.fusion` needs, side by side when both are needed; the BM25 hits are
/// named ([`Legs::bm25`]) when `name_bm25` says so.
pub(crate) fn run(
    src: Sources<'_>,
    req: &ValidRequest<'_>,
    name_bm25: bool,
) -> Result<Legs, SearchError> {
    let keywords = req.keywords.as_slice();
    let candidates = req.candidates;
    let use_bm25 = !matches!(req.fusion, Fusion::VectorOnly);
    let use_vector = uses_vector(req.fusion, src.vector_leg);
    if use_vector {
        check_embedder(src.store, src.embedder)?;
    }
    type Bm25Leg = (Vec<Bm25Found>, LegStats);
    let bm25_leg = || -> Result<Bm25Leg, SearchError> {
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
        // Only chunks the store holds, found without reading the chunk.
        let hits: Vec<Bm25Found> = matches
            .iter()
            .filter_map(|m| {
                src.store
                    .position_of_id64(m.id64)
                    .map(|position| Bm25Found {
                        id64: m.id64,
                        position,
                        score: m.score,
                    })
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
        let leg_error = |e| SearchError::from_leg(e, src.embedder.info().model);
        let mut found = src
            .vector_leg
            .search(&query, candidates, access, include_superseded)
            .map_err(leg_error)?;
        // A model reads every language it was trained on, but ranks passages in the question's
        // own above most in another: the other script's best competes on the question's scale.
        // Hashing vectors are character n-grams, with nothing to share across scripts.
        if src.embedder.info().kind != HASHING_KIND {
            let other = src
                .vector_leg
                .search_other_script(&query, OTHER_SCRIPT_CANDIDATES, access, include_superseded)
                .map_err(leg_error)?;
            if !other.is_empty() {
                found = merge_best(found, other, candidates);
            }
        }
        let hits: Vec<LegHit> = found
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
    let (bm25_found, bm25_stats) = bm25?;
    let (vector, vector_stats) = vector?;
    // Named from the id64, without reading the chunk.
    let bm25 = if name_bm25 {
        bm25_found
            .iter()
            .map(|h| LegHit::new(crate::index::u64_to_chunk_id(h.id64), h.score))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Legs {
        use_bm25,
        use_vector,
        bm25,
        bm25_found,
        bm25_stats,
        vector,
        vector_stats,
    })
}

/// The BM25 leg's hits as the BM25-only fusion ranks them, at most `limit`: each chunk's first
/// occurrence, scored by its raw BM25 score, ranked by its place in the leg's list
/// (duplicates counted), as [`fusion::fuse_with`] gives them, left unnamed.
pub(crate) fn bm25_candidates(found: &[Bm25Found], limit: usize) -> Vec<Candidate> {
    let mut seen = rustc_hash::FxHashSet::default();
    found
        .iter()
        .enumerate()
        .filter(|(_, h)| seen.insert(h.id64))
        .take(limit)
        .map(|(pos, h)| Candidate {
            chunk: ChunkAt::Position(h.position),
            score: f64::from(h.score),
            bm25: Some(LegRank {
                rank: u32::try_from(pos + 1).unwrap_or(u32::MAX),
                score: h.score,
            }),
            vector: None,
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The BM25 leg's unnamed candidates are the BM25-only fusion of the same hits named:
        /// the same chunks in the same order, with the same scores and ranks, at any cut
        /// (duplicates in the leg included).
        #[test]
        fn unnamed_candidates_rank_as_the_bm25_only_fusion(
            hits in prop::collection::vec((0u64..12, 0.0f32..20.0), 0..40),
            limit in 0usize..50,
        ) {
            let found: Vec<Bm25Found> = hits
                .iter()
                .map(|&(id64, score)| Bm25Found { id64, position: id64 as usize * 3, score })
                .collect();
            let named: Vec<LegHit> = hits
                .iter()
                .map(|&(id64, score)| LegHit::new(crate::index::u64_to_chunk_id(id64), score))
                .collect();
            let fused = fusion::fuse_with(
                Fusion::Bm25Only,
                &named,
                &[],
                limit,
                QuerySignals::default(),
            );
            let unnamed = bm25_candidates(&found, limit);
            prop_assert_eq!(fused.len(), unnamed.len());
            for (f, c) in fused.iter().zip(&unnamed) {
                let ChunkAt::Position(at) = c.chunk else {
                    return Err(TestCaseError::fail("a BM25 candidate named by id"));
                };
                let id64 = crate::index::chunk_id_to_u64(&f.id).expect("canonical id");
                prop_assert_eq!(at, id64 as usize * 3);
                prop_assert_eq!(f.score, c.score);
                prop_assert_eq!(f.bm25, c.bm25);
                prop_assert_eq!(f.vector, c.vector);
            }
        }
    }
}
