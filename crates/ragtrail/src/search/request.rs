//! The request stage: a `searchDocs` call (or a ranking for evaluations) checked against the
//! library's bounds and resolved against the engine's settings, before any leg runs.

use crate::access::AccessContext;

use super::fusion::Fusion;
use super::{SearchError, SearchSettings};

/// Keywords one `searchDocs` call accepts at most (the agent allows fewer).
pub const MAX_KEYWORDS_PER_SEARCH: usize = 32;
/// Characters one keyword may have at most (the agent allows fewer).
pub const MAX_KEYWORD_CHARS_PER_SEARCH: usize = 200;
/// Longest [`SearchRequest::query`], in characters (a question, not a document).
pub const MAX_QUERY_CHARS: usize = 2_000;

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

/// A ranking request ([`crate::search::Searcher::ranked`]).
#[derive(Debug, Clone, Copy)]
pub struct RankedRequest<'a> {
    pub keywords: &'a [String],
    pub access: &'a AccessContext,
    pub fusion: Fusion,
    /// Length of the ranking wanted (not capped by [`super::MAX_TOP_K`]).
    pub depth: usize,
}

/// A request every stage after this one may trust: keywords trimmed and within bounds, the
/// fusion and the cut resolved.
pub(crate) struct ValidRequest<'r> {
    pub keywords: Vec<String>,
    /// See [`SearchRequest::query`].
    pub query: Option<&'r str>,
    pub access: &'r AccessContext,
    pub include_superseded: bool,
    pub fusion: Fusion,
    /// Hits wanted (a `searchDocs` call's top k, or a ranking's depth).
    pub top_k: usize,
    /// Candidates each leg contributes before fusion.
    pub candidates: usize,
}

impl<'r> ValidRequest<'r> {
    /// A `searchDocs` call, checked. Bounded cost whoever calls: the agent's limits are
    /// tighter, these protect the library.
    pub fn search(req: &'r SearchRequest, settings: &SearchSettings) -> Result<Self, SearchError> {
        let keywords = trimmed_keywords(&req.keywords)?;
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
        let top_k = req.top_k.clamp(1, settings.max_top_k.max(1));
        Ok(Self {
            keywords,
            query: req.query.as_deref(),
            access: &req.access,
            include_superseded: req.include_superseded,
            fusion: req.fusion.unwrap_or(settings.fusion),
            top_k,
            candidates: settings.candidates.max(top_k),
        })
    }

    /// A ranking request: keywords trimmed; the depth is not capped.
    pub fn ranked(req: &RankedRequest<'r>, settings: &SearchSettings) -> Result<Self, SearchError> {
        Ok(Self {
            keywords: trimmed_keywords(req.keywords)?,
            query: None,
            access: req.access,
            include_superseded: false,
            fusion: req.fusion,
            top_k: req.depth,
            candidates: settings.candidates.max(req.depth),
        })
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
