//! `searchDocs`: the one retrieval tool the agent calls. Runs the BM25 leg (and the vector leg,
//! when the store has vectors) under the operator's access context, fuses them, and returns
//! [`SearchHit`]s with snippets and per-leg ranks in their metadata.

pub mod fusion;
pub mod snippet;
pub mod sufficiency;

#[cfg(test)]
mod cached_terms_tests;

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::access::AccessContext;
use crate::embed::hashing::KIND as HASHING_KIND;
use crate::embed::{EmbedError, Embedder};
use crate::index::{Bm25Index, Bm25Query, IndexError};
use crate::store::{ChunkStore, VectorLeg, VectorLegError};
use fusion::{FusedHit, Fusion, LegHit, QuerySignals, fuse_with};
use snippet::{DEFAULT_SNIPPET_CHARS, snippet_by};
use sufficiency::{KeyTerm, Sufficiency, SufficiencyThresholds, covered_by, decide, key_terms};

/// One result of `searchDocs`, as the planner sees it and `ragtrail search --json` prints it
/// (a trace records it as its own `trace::HitRecord`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub chunk_id: String,
    /// The headings from the document title down to the chunk, joined by ` / `.
    pub title_path: String,
    pub snippet: String,
    /// The document's path and anchor (`leave.md#annual-leave`, `rooms.pdf#page=2`).
    pub source_uri: String,
    /// The fused score, 1.0 for the best hit.
    pub score: f64,
    /// Which leg found it and how (bm25Rank, bm25Score, vectorRank, vectorScore,
    /// matchedKeywords), and the document's front matter (tenant, status, version, updated…).
    pub metadata: BTreeMap<String, String>,
}

/// Keywords one `searchDocs` call accepts at most (the agent allows fewer).
pub const MAX_KEYWORDS_PER_SEARCH: usize = 32;
/// Characters one keyword may have at most (the agent allows fewer).
pub const MAX_KEYWORD_CHARS_PER_SEARCH: usize = 200;
/// Longest [`SearchRequest::query`], in characters (a question, not a document).
pub const MAX_QUERY_CHARS: usize = 2_000;

/// Upper bound on `topK` whatever the caller asks (the default of [`SearchSettings::max_top_k`]).
pub const MAX_TOP_K: usize = 50;
/// How many candidates each leg contributes before fusion.
pub const DEFAULT_CANDIDATES: usize = 100;

/// A `searchDocs` call.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub keywords: Vec<String>,
    pub top_k: usize,
    pub access: AccessContext,
    pub include_superseded: bool,
    /// How the legs are combined (`None`: the engine's default).
    pub fusion: Option<Fusion>,
    /// The question in words, if the caller has one. A semantic vector leg embeds it instead
    /// of the keyword list (an embedding model reads meaning from a sentence, not from a list);
    /// the hashing embedder, which matches character n-grams, keeps the keywords (golden set
    /// evidence recall 0.868 with them, 0.843 with the question; BENCHMARKS.md). BM25 and the
    /// sufficiency decision always use the keywords.
    pub query: Option<String>,
}

impl SearchRequest {
    pub fn new(keywords: Vec<String>, top_k: usize, access: AccessContext) -> Self {
        Self {
            keywords,
            top_k,
            access,
            include_superseded: false,
            fusion: None,
            query: None,
        }
    }
}

/// Tuning of `searchDocs` that belongs to the engine, not to one call.
#[derive(Debug, Clone, Copy)]
pub struct SearchSettings {
    /// The fusion of a `searchDocs` call that names none.
    pub fusion: Fusion,
    /// The fusion of the agent's own searches: by default the same as [`Self::fusion`], which
    /// an operator whose model knows the askers' languages may set to
    /// [`Fusion::StandoutCoverage`] for both (BENCHMARKS.md, "Standout discounted by
    /// coverage"); with an English-only model that loses Chinese questions, so it is not a
    /// default. Set apart to try a fusion on the agent alone.
    pub agent_fusion: Fusion,
    /// Candidates each leg contributes before fusion.
    pub candidates: usize,
    pub title_boost: f32,
    pub snippet_chars: usize,
    pub sufficiency: SufficiencyThresholds,
    /// A hit that contains none of the key terms is kept only if its vector similarity reaches
    /// this floor: the list is not padded with weak hits.
    pub vector_only_floor: f32,
    /// Upper bound on a request's `topK`: an engine setting, so a planner cannot raise it
    /// (retrieval evaluations raise it to measure recall@100).
    pub max_top_k: usize,
}

impl SearchSettings {
    /// The defaults, with the fusion chosen for the configured embedder's kind
    /// (`default_fusion_for`).
    pub fn for_embedder(embedder_kind: &str) -> Self {
        Self {
            fusion: default_fusion_for(embedder_kind),
            agent_fusion: default_fusion_for(embedder_kind),
            ..Self::default()
        }
    }
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            fusion: DEFAULT_FUSION,
            agent_fusion: DEFAULT_FUSION,
            candidates: DEFAULT_CANDIDATES,
            title_boost: crate::index::DEFAULT_TITLE_BOOST,
            snippet_chars: DEFAULT_SNIPPET_CHARS,
            sufficiency: SufficiencyThresholds::default(),
            vector_only_floor: DEFAULT_VECTOR_ONLY_FLOOR,
            max_top_k: MAX_TOP_K,
        }
    }
}

/// Vector hits at or below this cosine similarity are dropped: unrelated texts score 0, and
/// float rounding (which differs between the embedded store and pgvector) must not decide
/// whether such a hit joins the candidate list.
pub const MIN_VECTOR_SCORE: f32 = 1e-5;

/// See [`SearchSettings::vector_only_floor`].
pub const DEFAULT_VECTOR_ONLY_FLOOR: f32 = 0.5;

/// The default fusion with the hashing embedder (the offline default): agreement-weighted
/// min-max ([`Fusion::Agreement`]), vector weight up to 0.5. The hashing leg is a second
/// lexical view: where it agrees with BM25 it reranks, where it does not it only breaks ties,
/// so it never costs much against BM25 alone (BENCHMARKS.md, "Default fusion by agreement":
/// fixed min-max 0.3 lost 0.14 nDCG@10 on SciFact train and 0.12 on cmrc2018).
pub const DEFAULT_FUSION: Fusion = Fusion::Agreement {
    max_vector_weight: fusion::DEFAULT_AGREEMENT_WEIGHT,
};

/// The default fusion with a semantic embedder (a local model or an embeddings endpoint):
/// min-max weighing each leg per query by how far its best hit stands out among its own hits
/// ([`Fusion::Standout`]). A semantic leg deserves a say of its own, but which leg knows best
/// changes with the question: BM25 where the question copies a passage's words, the model
/// where the words are shared by many passages or are not the passage's. Measured with
/// multilingual-e5-small and all-MiniLM-L6-v2 on SciFact, cmrc2018 and HotpotQA against
/// the equal weights it replaces (BENCHMARKS.md, "Each leg weighed by how far its best hit
/// stands out"). A model that knows the askers' languages does better still with BM25's part
/// discounted by its coverage of the question ([`Fusion::StandoutCoverage`], the operator's
/// choice): whether a model reads the questions' language is not something its kind says.
pub const DEFAULT_SEMANTIC_FUSION: Fusion = Fusion::Standout;

/// The default fusion for an embedder kind (`EmbedderInfo::kind`): [`DEFAULT_FUSION`] for the
/// lexical hashing embedder, [`DEFAULT_SEMANTIC_FUSION`] for any other (model) embedder.
/// A request's or the command line's `--fusion` still overrides it.
pub fn default_fusion_for(embedder_kind: &str) -> Fusion {
    if embedder_kind == crate::embed::hashing::KIND {
        DEFAULT_FUSION
    } else {
        DEFAULT_SEMANTIC_FUSION
    }
}

/// Counts and latency of one leg.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LegStats {
    pub count: u32,
    pub latency_ms: f64,
}

/// The hits of a `searchDocs` call and how they were found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResponse {
    pub hits: Vec<SearchHit>,
    /// Content hash of each hit's chunk, in hit order (the trace records them).
    pub content_hashes: Vec<String>,
    pub legs: BTreeMap<String, LegStats>,
    pub fusion: Fusion,
    /// The legs' weights in this query's min-max sum (`None` for RRF and one leg alone):
    /// fixed for `minmax`, earned per query for `agree` and `confidence`.
    pub weights: Option<fusion::FusionWeights>,
    /// Whether the hits are evidence enough, and why.
    pub sufficiency: Sufficiency,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("no keywords to search: give one or more words")]
    NoKeywords,
    #[error("{given} keywords in one search; the limit is {max}")]
    TooManyKeywords { given: usize, max: usize },
    #[error("a keyword of {chars} characters; the limit is {max}: search with short terms")]
    KeywordTooLong { chars: usize, max: usize },
    #[error("a query of {chars} characters; the limit is {max}")]
    QueryTooLong { chars: usize, max: usize },
    #[error(
        "the index was embedded with {stored} but the configured embedder is {configured}; run `ragtrail ingest --rebuild` to re-embed, or configure the original embedder"
    )]
    EmbedderMismatch { stored: String, configured: String },
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] crate::store::postgres::PgError),
    #[error(
        "the local BM25 index reflects database version {index} but the database is at {database} (another process ingested); reopen, or run `ragtrail reindex`, so that search sees the same chunks in both legs"
    )]
    StaleIndex { index: u64, database: u64 },
}

impl SearchError {
    /// A vector leg's failure, as `searchDocs` reports it (`model`: the embedder's).
    fn from_leg(e: VectorLegError, model: String) -> Self {
        match e {
            VectorLegError::Scan(message) => EmbedError::Failed { model, message }.into(),
            #[cfg(feature = "postgres")]
            VectorLegError::Postgres(e) => SearchError::Postgres(e),
            VectorLegError::Stale { index, database } => {
                SearchError::StaleIndex { index, database }
            }
        }
    }
}

/// The keywords trimmed, blank ones dropped; none left is an error.
fn trimmed_keywords(keywords: &[String]) -> Result<Vec<String>, SearchError> {
    let kept: Vec<String> = keywords
        .iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    if kept.is_empty() {
        return Err(SearchError::NoKeywords);
    }
    Ok(kept)
}

/// [`search_docs`] with the vector leg answered by `vector_leg` (the embedded store's own
/// vectors, or pgvector); the chunk records come from `store`.
pub fn search_docs_with(
    store: &ChunkStore,
    vector_leg: &dyn VectorLeg,
    index: &Bm25Index,
    embedder: &dyn Embedder,
    settings: &SearchSettings,
    req: &SearchRequest,
) -> Result<SearchResponse, SearchError> {
    let keywords = trimmed_keywords(&req.keywords)?;
    // Bounded cost whoever calls: the agent's limits are tighter, these protect the library.
    if keywords.len() > MAX_KEYWORDS_PER_SEARCH {
        return Err(SearchError::TooManyKeywords {
            given: keywords.len(),
            max: MAX_KEYWORDS_PER_SEARCH,
        });
    }
    if let Some(long) = keywords
        .iter()
        .find(|k| crate::text::char_len(k) > MAX_KEYWORD_CHARS_PER_SEARCH)
    {
        return Err(SearchError::KeywordTooLong {
            chars: crate::text::char_len(long),
            max: MAX_KEYWORD_CHARS_PER_SEARCH,
        });
    }
    if let Some(query) = &req.query
        && crate::text::char_len(query) > MAX_QUERY_CHARS
    {
        return Err(SearchError::QueryTooLong {
            chars: crate::text::char_len(query),
            max: MAX_QUERY_CHARS,
        });
    }
    let fusion = req.fusion.unwrap_or(settings.fusion);
    let top_k = req.top_k.clamp(1, settings.max_top_k.max(1));
    let candidates = settings.candidates.max(top_k);
    let legs = run_legs(
        store,
        index,
        embedder,
        settings,
        &LegsQuery {
            keywords: &keywords,
            query: req.query.as_deref(),
            access: &req.access,
            include_superseded: req.include_superseded,
            fusion,
            candidates,
            vector_leg,
        },
    )?;
    let (use_bm25, use_vector) = (legs.use_bm25, legs.use_vector);
    let (bm25_hits, bm25_stats) = legs.bm25;
    let (vector_hits, vector_stats) = legs.vector;
    // Weak hits are dropped below, so more than top-k fused hits may be needed: twice top-k
    // first (sorting only those is the cheap part of fusion), the whole candidate set if the
    // first cut runs out.
    let first_cut = top_k.saturating_mul(2).min(candidates);
    let counts = index.scoped_counts(&req.access, req.include_superseded)?;
    let keys = key_terms(
        &keywords,
        &|t: &str| counts.doc_freq(t),
        counts.num_chunks(),
    );
    let signals = query_signals(store, fusion, &keys, &bm25_hits);
    // A per-query weight (agreement, confidence, standout) worked out once, for both cuts and
    // the record.
    let resolved = fusion.for_query(&bm25_hits, &vector_hits, signals);
    let mut fused = fuse_with(resolved, &bm25_hits, &vector_hits, first_cut, signals);
    let wanted: HashSet<String> = keys.iter().flat_map(|k| k.parts.iter().cloned()).collect();
    // Each keyword's own key terms, to record which keywords a hit matched (each keyword is
    // analysed once, not once per key term).
    let per_keyword: Vec<(&String, Vec<sufficiency::KeyTerm>)> = keywords
        .iter()
        .map(|k| {
            let own = key_terms(std::slice::from_ref(k), &|_| 1, 1);
            (
                k,
                keys.iter()
                    .filter(|t| own.iter().any(|kt| kt.term == t.term))
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    let mut hits = Vec::with_capacity(top_k);
    let mut content_hashes = Vec::with_capacity(top_k);
    let mut hit_terms = Vec::with_capacity(top_k);
    let mut next = 0;
    while hits.len() < top_k {
        if next == fused.len() {
            // Fewer than asked for means the legs have no more; the whole set was already fused.
            if fused.len() < first_cut || first_cut == candidates {
                break;
            }
            fused = fuse_with(resolved, &bm25_hits, &vector_hits, candidates, signals);
            if next == fused.len() {
                break;
            }
        }
        let f = &fused[next];
        next += 1;
        let Some(chunk) = store.get(&f.id) else {
            continue;
        };
        // Defence in depth: both legs filter by access; the store record is the authority.
        if !req.access.allows(&chunk.tenant, &chunk.roles) {
            continue;
        }
        // The chunk's terms are analysed once per store generation, not once per call.
        let Some((_, analysed)) = store.get_analysed(&f.id) else {
            continue;
        };
        let present = covered_by(&keys, |t| analysed.contains(t), analysed.lowercase());
        if present.is_empty()
            && f.vector
                .is_none_or(|v| v.score < settings.vector_only_floor)
        {
            continue;
        }
        let matched: Vec<&String> = per_keyword
            .iter()
            .filter(|(_, kts)| kts.iter().any(|kt| present.contains(&kt.term)))
            .map(|(k, _)| *k)
            .collect();
        hits.push(SearchHit {
            chunk_id: chunk.id.clone(),
            title_path: chunk.title_path.clone(),
            snippet: snippet_by(&chunk.text, settings.snippet_chars, |i, _| {
                analysed.sentence_matches(&chunk.text, i, &wanted)
            }),
            source_uri: chunk.source_uri.clone(),
            score: f.score,
            metadata: metadata(chunk, f, &matched),
        });
        content_hashes.push(chunk.content_hash.clone());
        hit_terms.push(present);
    }
    let sufficiency = decide(&keys, &hit_terms, settings.sufficiency);
    let mut legs = BTreeMap::new();
    if use_bm25 {
        legs.insert("bm25".to_string(), bm25_stats);
    }
    if use_vector {
        legs.insert("vector".to_string(), vector_stats);
    }
    Ok(SearchResponse {
        hits,
        content_hashes,
        legs,
        fusion,
        weights: fusion::bm25_weight(resolved, &bm25_hits, &vector_hits, signals).map(|bm25| {
            fusion::FusionWeights {
                bm25,
                lexical_confidence: fusion
                    .lexical_signal()
                    .map(|signal| fusion::lexical_confidence(signal, &bm25_hits, signals)),
            }
        }),
        sufficiency,
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
fn query_signals(
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

/// What both legs are asked.
struct LegsQuery<'a> {
    keywords: &'a [String],
    /// See [`SearchRequest::query`].
    query: Option<&'a str>,
    access: &'a AccessContext,
    include_superseded: bool,
    fusion: Fusion,
    candidates: usize,
    /// The store's own vectors, or pgvector.
    vector_leg: &'a dyn VectorLeg,
}

/// The hits and stats of each leg the fusion needs (an unused leg is empty).
struct Legs {
    use_bm25: bool,
    use_vector: bool,
    bm25: (Vec<LegHit>, LegStats),
    vector: (Vec<LegHit>, LegStats),
}

/// Embedded stores with fewer chunks than this run the two legs one after the other on the
/// calling thread; measured faster at 236, 278 and 3,000 chunks, slower at 100,000.
const SEQUENTIAL_LEGS_BELOW: usize = 5_000;

/// Runs the legs `q.fusion` needs, side by side when both are needed.
fn run_legs(
    store: &ChunkStore,
    index: &Bm25Index,
    embedder: &dyn Embedder,
    settings: &SearchSettings,
    q: &LegsQuery<'_>,
) -> Result<Legs, SearchError> {
    let keywords = q.keywords;
    let candidates = q.candidates;
    let use_bm25 = !matches!(q.fusion, Fusion::VectorOnly);
    let use_vector = !matches!(q.fusion, Fusion::Bm25Only) && q.vector_leg.has_vectors();
    if use_vector {
        check_embedder(store, embedder)?;
    }
    let bm25_leg = || -> Result<(Vec<LegHit>, LegStats), SearchError> {
        if !use_bm25 {
            return Ok((Vec::new(), LegStats::default()));
        }
        let started = Instant::now();
        let matches = index.search(&Bm25Query {
            keywords,
            access: q.access,
            include_superseded: q.include_superseded,
            limit: candidates,
            title_boost: settings.title_boost,
        })?;
        let hits: Vec<LegHit> = matches
            .iter()
            .filter_map(|m| {
                // Only chunks the store holds; named from the id64, without reading the chunk.
                store
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
    let vector_leg = || -> Result<(Vec<LegHit>, LegStats), SearchError> {
        if !use_vector {
            return Ok((Vec::new(), LegStats::default()));
        }
        let started = Instant::now();
        let joined = keywords.join(" ");
        let query_text = match q.query.map(str::trim) {
            Some(query) if !query.is_empty() && embedder.info().kind != HASHING_KIND => query,
            _ => joined.as_str(),
        };
        let query = embedder
            .embed_query(&[query_text])?
            .pop()
            .unwrap_or_default();
        let hits: Vec<LegHit> = q
            .vector_leg
            .search(&query, candidates, q.access, q.include_superseded)
            .map_err(|e| SearchError::from_leg(e, embedder.info().model))?
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
    let small_store = q
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
    Ok(Legs {
        use_bm25,
        use_vector,
        bm25: bm25?,
        vector: vector?,
    })
}

/// A `search_ranked` call.
#[derive(Debug, Clone, Copy)]
pub struct RankedRequest<'a> {
    pub keywords: &'a [String],
    pub access: &'a AccessContext,
    pub fusion: Fusion,
    /// Length of the ranking wanted (not capped by [`MAX_TOP_K`]).
    pub depth: usize,
}

/// The fused ranking alone, `depth` long, for evaluation and benchmarks: the same legs and
/// fusion as [`search_docs`] (each leg contributes `max(settings.candidates, depth)`
/// candidates), without `searchDocs`' top-k cap, snippets, weak-hit filter or sufficiency
/// decision. Each leg filters by `access` before ranking, as in `searchDocs`.
pub fn search_ranked(
    store: &ChunkStore,
    vector_leg: &dyn VectorLeg,
    index: &Bm25Index,
    embedder: &dyn Embedder,
    settings: &SearchSettings,
    req: &RankedRequest<'_>,
) -> Result<Vec<FusedHit>, SearchError> {
    let keywords = trimmed_keywords(req.keywords)?;
    let legs = run_legs(
        store,
        index,
        embedder,
        settings,
        &LegsQuery {
            keywords: &keywords,
            query: None,
            access: req.access,
            include_superseded: false,
            fusion: req.fusion,
            candidates: settings.candidates.max(req.depth),
            vector_leg,
        },
    )?;
    // One leg alone needs no fusion: its hits in its order, as `fuse` would give them (first
    // occurrence of an id only), without re-hashing and copying every id.
    let (hits, is_bm25) = match req.fusion {
        Fusion::Bm25Only if legs.vector.0.is_empty() => (legs.bm25.0, true),
        Fusion::VectorOnly if legs.bm25.0.is_empty() => (legs.vector.0, false),
        _ => {
            let signals = if req.fusion.lexical_signal().is_some() {
                let counts = index.scoped_counts(req.access, false)?;
                let keys = key_terms(
                    &keywords,
                    &|t: &str| counts.doc_freq(t),
                    counts.num_chunks(),
                );
                query_signals(store, req.fusion, &keys, &legs.bm25.0)
            } else {
                QuerySignals::default()
            };
            return Ok(fuse_with(
                req.fusion,
                &legs.bm25.0,
                &legs.vector.0,
                req.depth,
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
        .take(req.depth)
        .enumerate()
        .map(|(i, h)| {
            let rank = Some(fusion::LegRank {
                rank: u32::try_from(i + 1).unwrap_or(u32::MAX),
                score: h.score,
            });
            FusedHit {
                score: f64::from(h.score),
                bm25: if is_bm25 { rank } else { None },
                vector: if is_bm25 { None } else { rank },
                id: h.id,
            }
        })
        .collect())
}

/// Fails when the store's vectors came from another embedder than the one configured.
pub fn check_embedder(store: &ChunkStore, embedder: &dyn Embedder) -> Result<(), SearchError> {
    let configured = embedder.info();
    match &store.manifest().embedder {
        Some(stored) if *stored != configured => Err(SearchError::EmbedderMismatch {
            stored: stored.describe(),
            configured: configured.describe(),
        }),
        _ => Ok(()),
    }
}

fn metadata(
    chunk: &crate::knowledge::Chunk,
    f: &FusedHit,
    matched: &[&String],
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("tenant".to_string(), chunk.tenant.clone());
    m.insert("status".to_string(), chunk.status.as_str().to_string());
    if let Some(v) = &chunk.version {
        m.insert("version".to_string(), v.clone());
    }
    if let Some(u) = &chunk.updated {
        m.insert("updated".to_string(), u.clone());
    }
    if let Some(page) = chunk.page() {
        m.insert("page".to_string(), page.to_string());
    }
    if let Some(r) = f.bm25 {
        m.insert("bm25Rank".to_string(), r.rank.to_string());
        m.insert("bm25Score".to_string(), format!("{:.4}", r.score));
    }
    if let Some(r) = f.vector {
        m.insert("vectorRank".to_string(), r.rank.to_string());
        m.insert("vectorScore".to_string(), format!("{:.4}", r.score));
    }
    if !matched.is_empty() {
        m.insert(
            "matchedKeywords".to_string(),
            matched
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_fusion_is_chosen_by_embedder_kind() {
        let hashing = crate::embed::hashing::KIND;
        assert_eq!(default_fusion_for(hashing), DEFAULT_FUSION);
        assert_eq!(
            DEFAULT_FUSION,
            Fusion::Agreement {
                max_vector_weight: 0.5
            }
        );
        // The trace records the weight with the name, so a replay fuses the same way.
        assert_eq!(DEFAULT_FUSION.to_string(), "agree:0.5");
        for semantic in [crate::embed::LOCAL_KIND, crate::embed::http::KIND, "other"] {
            assert_eq!(default_fusion_for(semantic), Fusion::Standout, "{semantic}");
        }
        assert_eq!(DEFAULT_SEMANTIC_FUSION.to_string(), "standout");
        assert_eq!(SearchSettings::for_embedder(hashing).fusion, DEFAULT_FUSION);
        let semantic = SearchSettings::for_embedder(crate::embed::LOCAL_KIND);
        assert_eq!(semantic.fusion, DEFAULT_SEMANTIC_FUSION);
        assert_eq!(semantic.candidates, DEFAULT_CANDIDATES);
    }

    #[test]
    fn the_agent_fuses_as_searchdocs_does_unless_told_otherwise() {
        for kind in [
            crate::embed::hashing::KIND,
            crate::embed::LOCAL_KIND,
            crate::embed::http::KIND,
        ] {
            let settings = SearchSettings::for_embedder(kind);
            assert_eq!(settings.agent_fusion, settings.fusion, "{kind}");
        }
        assert_eq!(SearchSettings::default().agent_fusion, DEFAULT_FUSION);
    }
}
