//! Stages that run on the hydrated hits, after fusion and before the judgement: the place a
//! further step (a reranker, a memory-aware filter) joins the pipeline. Adding one is a new
//! file `search/stages/<stage>.rs` with a type implementing [`HitStage`], and here its `mod`
//! line and its entry in [`AFTER_HYDRATION`].

use super::FoundHit;
use super::sufficiency::KeyTerm;

/// What a stage may read besides the hits. No shipped stage reads it yet (the list below is
/// empty; `stages_tests` runs one that does), hence the allowance.
#[allow(dead_code)]
pub struct StageInput<'a> {
    /// The request's keywords (trimmed).
    pub keywords: &'a [String],
    /// The question in words, when the caller gave one.
    pub query: Option<&'a str>,
    /// The key terms the judgement weighs.
    pub key_terms: &'a [KeyTerm],
    /// Hits the caller asked for at most.
    pub top_k: usize,
}

/// A step over a search's hits: it may reorder, rescore or drop them (never add chunks the
/// legs did not find: access was checked on those). The judgement then weighs what is left.
pub trait HitStage: Sync {
    /// The stage's name (for logs and docs).
    #[allow(dead_code)]
    fn name(&self) -> &'static str;

    fn apply(&self, input: &StageInput<'_>, hits: &mut Vec<FoundHit<'_>>);
}

/// The stages every search runs after hydration, in order. None yet: `searchDocs` returns the
/// hydrated hits as fused.
pub const AFTER_HYDRATION: &[&dyn HitStage] = &[];
