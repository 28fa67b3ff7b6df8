//! The [`Searcher`]: one caller's view of a knowledge base (store, BM25 index, vector leg,
//! embedder, settings, and term statistics scoped to the caller's access), running
//! `searchDocs` as named stages, each in its own file: [`request`](super::request) (checked
//! request), [`legs`](super::legs) (BM25 and vector legs), [`fusion`](super::fusion),
//! [`hydrate`](super::hydrate) (hits with their chunk, read once),
//! [`stages`](super::stages) (further steps over the hits), and
//! [`sufficiency`](super::sufficiency) (the judgement). The agent's evidence lookups go through
//! it too, so they see what its searches see, on either store.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashSet};

use crate::access::AccessContext;
use crate::embed::Embedder;
use crate::index::{Bm25Index, Bm25Query, ScopedCounts};
use crate::knowledge::Chunk;
use crate::store::{ChunkStore, ChunkTerms, SimilaritySpread, VectorLeg};

use super::fusion::{self, FusedHit, Fusion, FusionWeights, LegRank, QuerySignals, fuse_with};
use super::hydrate::{Candidate, FoundHit, Hydration, hydrate};
use super::legs::{self, Legs, Sources};
use super::request::{RankedRequest, SearchRequest, ValidRequest};
use super::stages::{AFTER_HYDRATION, HitStage, StageInput};
use super::sufficiency::{ContentWord, KeyTerm, Sufficiency, content_words, judge, key_terms_of};
use super::{LegStats, SearchError, SearchResponse, SearchSettings};

/// Best BM25 matches of a CJK word read for it as written (`Searcher::mentions`): a chunk that
/// holds the word holds all its bigrams and ranks near the top.
const MENTION_CANDIDATES: usize = 20;

/// Runs searches for one caller (see the module's documentation); made by
/// [`crate::Engine::searcher`]. Cheap to make; keep one for a run of searches under the same
/// access to count the caller's term statistics once.
pub struct Searcher<'e> {
    store: &'e ChunkStore,
    index: &'e Bm25Index,
    embedder: &'e dyn Embedder,
    vector_leg: Box<dyn VectorLeg + 'e>,
    settings: &'e SearchSettings,
    access: AccessContext,
    /// Term counts over what `access` may see (superseded chunks left out), counted when first
    /// needed; `None` when the index could not count them.
    counts: OnceCell<Option<ScopedCounts>>,
    stages: &'static [&'static dyn HitStage],
}

/// The hits of a [`Searcher::search`] and how they were found: [`SearchResponse`] with each
/// hit's chunk beside it.
#[derive(Debug, Clone)]
pub struct Found<'e> {
    pub hits: Vec<FoundHit<'e>>,
    pub legs: BTreeMap<String, LegStats>,
    pub fusion: Fusion,
    /// See [`SearchResponse::weights`].
    pub weights: Option<FusionWeights>,
    pub sufficiency: Sufficiency,
}

impl Found<'_> {
    /// The response as `searchDocs` returns it (the hits without their chunks).
    pub fn into_response(self) -> SearchResponse {
        SearchResponse {
            hits: self.hits.into_iter().map(|h| h.hit).collect(),
            legs: self.legs,
            fusion: self.fusion,
            weights: self.weights,
            sufficiency: self.sufficiency,
        }
    }
}

impl<'e> Searcher<'e> {
    pub(crate) fn new(
        store: &'e ChunkStore,
        index: &'e Bm25Index,
        embedder: &'e dyn Embedder,
        vector_leg: Box<dyn VectorLeg + 'e>,
        settings: &'e SearchSettings,
        access: &AccessContext,
    ) -> Self {
        Self {
            store,
            index,
            embedder,
            vector_leg,
            settings,
            access: access.clone(),
            counts: OnceCell::new(),
            stages: AFTER_HYDRATION,
        }
    }

    /// This searcher with other stages after hydration (tests of the stage list).
    #[cfg(test)]
    pub(crate) fn with_stages(mut self, stages: &'static [&'static dyn HitStage]) -> Self {
        self.stages = stages;
        self
    }

    /// Whose view this is.
    pub fn access(&self) -> &AccessContext {
        &self.access
    }

    /// The embedder of the vector leg's query.
    pub fn embedder(&self) -> &'e dyn Embedder {
        self.embedder
    }

    fn sources(&self) -> Sources<'_> {
        Sources {
            store: self.store,
            index: self.index,
            embedder: self.embedder,
            vector_leg: self.vector_leg.as_ref(),
            settings: self.settings,
        }
    }

    /// The caller's term counts, when the index could count them.
    pub fn counts(&self) -> Option<&ScopedCounts> {
        self.counts
            .get_or_init(|| self.index.scoped_counts(&self.access, false).ok())
            .as_ref()
    }

    /// In how many chunks the caller may see `term` (an analysed term) occurs; 0 when the
    /// index could not count (which only makes a term look rarer).
    pub fn doc_freq(&self, term: &str) -> u64 {
        self.counts().map_or(0, |c| c.doc_freq(term))
    }

    /// How many chunks the caller may see (0 when the index could not count them).
    pub fn num_chunks(&self) -> u64 {
        self.counts().map_or(0, ScopedCounts::num_chunks)
    }

    /// The key terms of `words` (each keyword's content words), weighted by their rarity in
    /// what `access` may see (the held counts when they are the caller's).
    fn key_terms(
        &self,
        words: &[Vec<ContentWord>],
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<KeyTerm>, SearchError> {
        let held = (!include_superseded && *access == self.access)
            .then(|| self.counts())
            .flatten();
        let fresh;
        let counts = match held {
            Some(c) => c,
            None => {
                fresh = self.index.scoped_counts(access, include_superseded)?;
                &fresh
            }
        };
        Ok(key_terms_of(
            words,
            &|t: &str| counts.doc_freq(t),
            counts.num_chunks(),
        ))
    }

    /// Fails when the vector leg's store moved on and no vector query will say so.
    fn check_current(&self, fusion: Fusion) -> Result<(), SearchError> {
        if legs::uses_vector(fusion, self.vector_leg.as_ref()) {
            return Ok(());
        }
        self.vector_leg
            .check_current()
            .map_err(|e| SearchError::from_leg(e, self.embedder.info().model))
    }

    /// `searchDocs`: the legs, fused, hydrated into at most `topK` hits the caller may see,
    /// the stages after hydration, then the judgement of whether the hits are evidence enough.
    /// The request's own access context decides what is searched.
    pub fn search(&self, req: &SearchRequest) -> Result<Found<'e>, SearchError> {
        self.check_current(req.fusion.unwrap_or(self.settings.fusion))?;
        let req = ValidRequest::search(req, self.settings)?;
        // The BM25 leg alone needs no fusion: its hits stay unnamed until hydration shows them.
        let bm25_alone = matches!(req.fusion, Fusion::Bm25Only);
        let legs = legs::run(self.sources(), &req, !bm25_alone)?;
        // Weak hits are dropped in hydration, so more than top-k fused hits may be needed:
        // twice top-k first (sorting only those is the cheap part of fusion), the whole
        // candidate set if the first cut runs out.
        let first_cut = req.top_k.saturating_mul(2).min(req.candidates);
        // Each keyword analysed once: for the key terms and for which keywords a hit matched.
        let words: Vec<Vec<ContentWord>> = req.keywords.iter().map(|k| content_words(k)).collect();
        let keys = self.key_terms(&words, req.access, req.include_superseded)?;
        let signals = legs::query_signals(self.store, req.fusion, &keys, &legs.bm25);
        // A per-query weight (agreement, confidence, standout) worked out once, for both cuts
        // and the record.
        let resolved = req.fusion.for_query(&legs.bm25, &legs.vector, signals);
        // Fused (or, for the BM25 leg alone, taken in its order) at most `limit` long.
        let ranked = |limit: usize| -> Vec<Candidate> {
            if bm25_alone {
                legs::bm25_candidates(&legs.bm25_found, limit)
            } else {
                fuse_with(resolved, &legs.bm25, &legs.vector, limit, signals)
                    .into_iter()
                    .map(Candidate::from)
                    .collect()
            }
        };
        let mut hits = hydrate(
            Hydration {
                store: self.store,
                settings: self.settings,
                req: &req,
                keys: &keys,
                words: &words,
                fused: ranked(first_cut),
                first_cut,
            },
            || ranked(req.candidates),
        );
        let input = StageInput {
            keywords: &req.keywords,
            query: req.query,
            key_terms: &keys,
            top_k: req.top_k,
        };
        for stage in self.stages {
            stage.apply(&input, &mut hits);
        }
        let sufficiency = judge(&keys, &hits, self.settings.sufficiency);
        Ok(Found {
            hits,
            legs: legs.stats(),
            fusion: req.fusion,
            weights: weights(req.fusion, resolved, &legs, signals),
            sufficiency,
        })
    }

    /// The fused ranking alone, `depth` long, for evaluation and benchmarks: the same legs and
    /// fusion as [`Searcher::search`] (each leg contributes `max(candidates, depth)`
    /// candidates), without its top-k cap, hydration, stages or judgement. Each leg filters by
    /// the request's access before ranking, as in `searchDocs`.
    pub fn ranked(&self, req: &RankedRequest<'_>) -> Result<Vec<FusedHit>, SearchError> {
        self.check_current(req.fusion)?;
        let req = ValidRequest::ranked(req, self.settings)?;
        // One leg alone needs no fusion: its hits in its order, as `fuse` would give them
        // (first occurrence of an id only), without re-hashing and copying every id. The BM25
        // leg alone (it runs no vector leg) names only the hits it returns, not every candidate.
        let bm25_alone = matches!(req.fusion, Fusion::Bm25Only);
        let legs = legs::run(self.sources(), &req, !bm25_alone)?;
        if bm25_alone {
            return Ok(bm25_ranking(&legs.bm25_found, req.top_k));
        }
        let hits = match req.fusion {
            Fusion::VectorOnly if legs.bm25.is_empty() => legs.vector,
            _ => {
                let signals = if req.fusion.lexical_signal().is_some() {
                    let words: Vec<Vec<ContentWord>> =
                        req.keywords.iter().map(|k| content_words(k)).collect();
                    let keys = self.key_terms(&words, req.access, false)?;
                    legs::query_signals(self.store, req.fusion, &keys, &legs.bm25)
                } else {
                    QuerySignals::default()
                };
                return Ok(fuse_with(
                    req.fusion,
                    &legs.bm25,
                    &legs.vector,
                    req.top_k,
                    signals,
                ));
            }
        };
        let first: Vec<bool> = {
            let mut seen = HashSet::with_capacity(hits.len());
            hits.iter().map(|h| seen.insert(h.id.as_str())).collect()
        };
        Ok(hits
            .into_iter()
            .zip(first)
            .filter_map(|(h, first)| first.then_some(h))
            .take(req.top_k)
            .enumerate()
            .map(|(i, h)| FusedHit {
                score: f64::from(h.score),
                bm25: None,
                vector: Some(LegRank {
                    rank: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    score: h.score,
                }),
                id: h.id,
            })
            .collect())
    }

    /// Whether any chunk the caller may see holds `word`. A Latin word: one BM25 match of its
    /// analysed terms is enough (the analyser's stem stands for the word's forms). A CJK word:
    /// written as it is in a best-matching chunk's text or titlePath. Its BM25 query matches any
    /// of its characters' bigrams, so a match alone would find "假来" (jieba's cut of 年假来抵)
    /// in any chunk that says 假 or 来 nearby, and the verdict, which looks for the word as
    /// written, would then count a word no passage can ever hold against every passage.
    pub fn mentions(&self, word: &str) -> Result<bool, SearchError> {
        if word.chars().any(crate::text::is_cjk) {
            return self.writes(word);
        }
        let keywords = [word.to_string()];
        let matches = self.index.search(&Bm25Query {
            keywords: &keywords,
            access: &self.access,
            include_superseded: false,
            limit: 1,
            title_boost: 1.0,
        })?;
        Ok(!matches.is_empty())
    }

    /// Whether a chunk the caller may see writes `text` as it is (case aside) in its text or
    /// titlePath: one of `text`'s best BM25 matches does. For a CJK word (see
    /// [`Searcher::mentions`]) and for a phrase ("marriage leave" is not written where
    /// "marriage" and "leave" are, apart).
    pub fn writes(&self, text: &str) -> Result<bool, SearchError> {
        let written = text.to_lowercase();
        self.written_where(text, &|t| t.to_lowercase().contains(&written))
    }

    /// Like [`Searcher::writes`], but a CJK word must stand as a word of its own, not inside a
    /// longer one (see [`crate::text::written_as_a_word`]): 笔记 ("note") is not written by a
    /// passage about 笔记本电脑 (laptops). For words carried over from the other language,
    /// where a piece of an unrelated word would bring unrelated passages.
    pub fn writes_as_a_word(&self, text: &str) -> Result<bool, SearchError> {
        self.written_where(text, &|t| crate::text::written_as_a_word(t, text))
    }

    /// Whether one of `text`'s best BM25 matches that the caller may see has a titlePath or
    /// text for which `written` holds.
    fn written_where(
        &self,
        text: &str,
        written: &dyn Fn(&str) -> bool,
    ) -> Result<bool, SearchError> {
        let keywords = [text.to_string()];
        let matches = self.index.search(&Bm25Query {
            keywords: &keywords,
            access: &self.access,
            include_superseded: false,
            limit: MENTION_CANDIDATES,
            title_boost: 1.0,
        })?;
        Ok(matches.iter().any(|m| {
            self.chunk(&crate::index::u64_to_chunk_id(m.id64))
                .is_some_and(|(c, _)| written(&c.text) || written(&c.title_path))
        }))
    }

    /// The chunk `id` and its analysed terms, if the caller may see it: for a hit served from
    /// a conversation's cache, which was read when it was first found.
    pub fn chunk(&self, id: &str) -> Option<(&'e Chunk, &'e ChunkTerms)> {
        self.store
            .get_analysed(id)
            .filter(|(c, _)| self.access.allows(&c.tenant, &c.roles))
    }

    /// Whether the vector leg has vectors to compare a query with.
    pub fn has_vectors(&self) -> bool {
        self.vector_leg.has_vectors()
    }

    /// `text` embedded as a query (`None` when the embedder fails).
    pub fn embed_query(&self, text: &str) -> Option<Vec<f32>> {
        self.embedder.embed_query(&[text]).ok()?.into_iter().next()
    }

    /// How `query` compares with the chunks the caller may see, on the whole (see
    /// `VectorLeg::similarity_spread`); `None` also when the leg fails.
    pub fn similarity_spread(
        &self,
        query: &[f32],
        sample: usize,
        min_visible: usize,
    ) -> Option<SimilaritySpread> {
        self.vector_leg
            .similarity_spread(query, &self.access, sample, min_visible)
            .ok()
            .flatten()
    }

    /// `query`'s cosine similarity with the chunk `chunk_id` (see `VectorLeg::similarity`);
    /// `None` also when the leg fails.
    pub fn similarity(&self, query: &[f32], chunk_id: &str) -> Option<f64> {
        self.vector_leg.similarity(query, chunk_id).ok().flatten()
    }
}

/// The BM25 leg's hits as the BM25-only fusion ranks them, at most `top_k`: each chunk's
/// first occurrence, in the leg's order, ranked by its place among those and scored by its raw
/// BM25 score; named only once kept.
fn bm25_ranking(found: &[legs::Bm25Found], top_k: usize) -> Vec<FusedHit> {
    let mut seen = rustc_hash::FxHashSet::default();
    found
        .iter()
        .filter(|h| seen.insert(h.id64))
        .take(top_k)
        .enumerate()
        .map(|(i, h)| FusedHit {
            score: f64::from(h.score),
            bm25: Some(LegRank {
                rank: u32::try_from(i + 1).unwrap_or(u32::MAX),
                score: h.score,
            }),
            vector: None,
            id: crate::index::u64_to_chunk_id(h.id64),
        })
        .collect()
}

/// The legs' weights in this query's min-max sum (`None` for RRF and one leg alone).
fn weights(
    fusion: Fusion,
    resolved: Fusion,
    legs: &Legs,
    signals: QuerySignals,
) -> Option<FusionWeights> {
    fusion::bm25_weight(resolved, &legs.bm25, &legs.vector, signals).map(|bm25| FusionWeights {
        bm25,
        lexical_confidence: fusion
            .lexical_signal()
            .map(|signal| fusion::lexical_confidence(signal, &legs.bm25, signals)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The BM25-only ranking named after the cut is the ranking named first: the first
        /// occurrence of each chunk id, in the leg's order, ranked among those, at any cut.
        #[test]
        fn bm25_ranking_names_the_same_hits_as_naming_every_candidate(
            hits in prop::collection::vec((0u64..12, 0.0f32..20.0), 0..40),
            top_k in 0usize..50,
        ) {
            let found: Vec<legs::Bm25Found> = hits
                .iter()
                .map(|&(id64, score)| legs::Bm25Found { id64, position: 0, score })
                .collect();
            let named: Vec<(String, f32)> = hits
                .iter()
                .map(|&(id64, score)| (crate::index::u64_to_chunk_id(id64), score))
                .collect();
            let mut seen = HashSet::new();
            let expected: Vec<(String, u32, f32)> = named
                .into_iter()
                .filter(|(id, _)| seen.insert(id.clone()))
                .take(top_k)
                .enumerate()
                .map(|(i, (id, score))| (id, i as u32 + 1, score))
                .collect();
            let got: Vec<(String, u32, f32)> = bm25_ranking(&found, top_k)
                .into_iter()
                .map(|h| {
                    let rank = h.bm25.expect("a BM25 rank");
                    assert!(h.vector.is_none());
                    assert_eq!(h.score, f64::from(rank.score));
                    (h.id, rank.rank, rank.score)
                })
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
