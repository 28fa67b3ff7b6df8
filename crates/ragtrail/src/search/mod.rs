//! `searchDocs`: the one retrieval tool the agent calls. A [`Searcher`] (made by
//! `Engine::searcher` for one caller's access context) runs it as named stages, one file each:
//! `request` (the checked request), `legs` (BM25 and vector legs), `fusion`, `hydrate` (hits
//! with their chunk, read once), `stages` (further steps over the hits) and `sufficiency` (the
//! judgement). It returns [`SearchHit`]s with snippets and per-leg ranks in their metadata.

pub mod fusion;
mod hydrate;
mod legs;
mod request;
mod searcher;
pub mod snippet;
pub mod stages;
pub mod sufficiency;

#[cfg(test)]
mod cached_terms_tests;
#[cfg(test)]
mod stages_tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::embed::{EmbedError, Embedder, EmbedderInfo};
use crate::index::IndexError;
use crate::store::{ChunkStore, VectorLegError};
use fusion::Fusion;
use snippet::DEFAULT_SNIPPET_CHARS;
use sufficiency::{Sufficiency, SufficiencyThresholds};

pub use hydrate::FoundHit;
pub use request::{
    MAX_KEYWORD_CHARS_PER_SEARCH, MAX_KEYWORDS_PER_SEARCH, MAX_QUERY_CHARS, RankedRequest,
    SearchRequest,
};
pub use searcher::{Found, Searcher};

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

/// Upper bound on `topK` whatever the caller asks (the default of [`SearchSettings::max_top_k`]).
pub const MAX_TOP_K: usize = 50;
/// How many candidates each leg contributes before fusion.
pub const DEFAULT_CANDIDATES: usize = 100;

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
    /// The defaults, with the fusion chosen for the configured embedder
    /// (`default_fusion_for`).
    pub fn for_embedder(embedder: &EmbedderInfo) -> Self {
        Self {
            fusion: default_fusion_for(embedder),
            agent_fusion: default_fusion_for(embedder),
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
/// stands out"). A model known to read the askers' languages gets
/// [`MULTILINGUAL_FUSION`] instead.
pub const DEFAULT_SEMANTIC_FUSION: Fusion = Fusion::Standout;

/// The default fusion with multilingual-e5-small (in-process or behind an endpoint): BM25's
/// part of [`Fusion::Standout`] discounted by its best hit's coverage of the question
/// ([`Fusion::StandoutCoverage`]). Where BM25's best hit holds little of the question, the
/// model's meaning leads: golden retrieval MRR 0.750 → 0.820, the held-out sets level or
/// better, SciFact −0.017 (BENCHMARKS.md, "Standout discounted by coverage"). Not for any
/// model: with English-only all-MiniLM-L6-v2 it loses on every set, handing the lead to a
/// model that does not read the question's language.
pub const MULTILINGUAL_FUSION: Fusion = Fusion::StandoutCoverage;

/// Model names (the start of [`EmbedderInfo::model`]) of the models [`MULTILINGUAL_FUSION`]
/// was measured with: the in-process 4-bit file and the endpoint's name for it.
const MULTILINGUAL_MODELS: &[&str] = &["multilingual-e5-small"];

/// The default fusion for an embedder, the one place it is chosen: [`DEFAULT_FUSION`] for the
/// lexical hashing embedder, [`MULTILINGUAL_FUSION`] for multilingual-e5-small,
/// [`DEFAULT_SEMANTIC_FUSION`] for any other model. A request's or the command line's
/// `--fusion` still overrides it.
pub fn default_fusion_for(embedder: &EmbedderInfo) -> Fusion {
    if embedder.kind == crate::embed::hashing::KIND {
        DEFAULT_FUSION
    } else if MULTILINGUAL_MODELS
        .iter()
        .any(|m| embedder.model.starts_with(m))
    {
        MULTILINGUAL_FUSION
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
    /// A failure of the setup (the embedder or its server, a model, the index, the database)
    /// rather than of the request: searching again with other keywords fails the same way.
    pub fn is_setup(&self) -> bool {
        !matches!(
            self,
            SearchError::NoKeywords
                | SearchError::TooManyKeywords { .. }
                | SearchError::KeywordTooLong { .. }
                | SearchError::QueryTooLong { .. }
        )
    }

    /// A vector leg's failure, as `searchDocs` reports it (`model`: the embedder's).
    pub(crate) fn from_leg(e: VectorLegError, model: String) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: &str, model: &str) -> EmbedderInfo {
        EmbedderInfo {
            kind: kind.into(),
            model: model.into(),
            dims: 384,
            ..EmbedderInfo::default()
        }
    }

    #[test]
    fn default_fusion_is_chosen_by_embedder() {
        let hashing = info(crate::embed::hashing::KIND, "char-ngram-fnv1a-v1");
        assert_eq!(default_fusion_for(&hashing), DEFAULT_FUSION);
        assert_eq!(
            DEFAULT_FUSION,
            Fusion::Agreement {
                max_vector_weight: 0.5
            }
        );
        // The trace records the weight with the name, so a replay fuses the same way.
        assert_eq!(DEFAULT_FUSION.to_string(), "agree:0.5");
        for semantic in [
            info(crate::embed::LOCAL_KIND, "all-MiniLM-L6-v2@0123456789ab"),
            info(crate::embed::http::KIND, "text-embedding-3-small"),
            info("other", "x"),
        ] {
            assert_eq!(
                default_fusion_for(&semantic),
                Fusion::Standout,
                "{semantic:?}"
            );
        }
        assert_eq!(DEFAULT_SEMANTIC_FUSION.to_string(), "standout");
        // multilingual-e5-small, in-process (its file's fingerprint after the name) or served.
        for e5 in [
            info(
                crate::embed::LOCAL_KIND,
                "multilingual-e5-small-q4@1a2b3c4d5e6f",
            ),
            info(crate::embed::http::KIND, "multilingual-e5-small"),
        ] {
            assert_eq!(default_fusion_for(&e5), MULTILINGUAL_FUSION, "{e5:?}");
        }
        assert_eq!(MULTILINGUAL_FUSION.to_string(), "standout-coverage");
        assert_eq!(
            SearchSettings::for_embedder(&hashing).fusion,
            DEFAULT_FUSION
        );
        let semantic = SearchSettings::for_embedder(&info(crate::embed::LOCAL_KIND, "minilm"));
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
            let settings = SearchSettings::for_embedder(&info(kind, "multilingual-e5-small"));
            assert_eq!(settings.agent_fusion, settings.fusion, "{kind}");
        }
        assert_eq!(SearchSettings::default().agent_fusion, DEFAULT_FUSION);
    }
}
