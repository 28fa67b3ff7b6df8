//! The planner decides, turn by turn, whether to search (and with which keywords) or to answer.
//! The offline heuristic planner and the LLM planner implement the same trait.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::search::SearchHit;
use crate::search::sufficiency::Sufficiency;
use crate::store::ChunkTerms;
use crate::text;

/// A cited chunk and a short verbatim quote from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposedCitation {
    pub chunk_id: String,
    pub quote: String,
}

/// One thing the planner wants done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum PlannerAction {
    /// Run `searchDocs` with these keywords.
    Search {
        keywords: Vec<String>,
        /// Why this search (recorded in the trace).
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_k: Option<u32>,
        /// The question in words, for a semantic vector leg to embed instead of the keyword
        /// list (see [`crate::search::SearchRequest::query`]); BM25 always searches the keywords.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query: Option<String>,
        /// Search the keywords' words alone (BM25, no vector leg): for literal values that a
        /// passage names as written (a grade's code, a place name), which a model's leg,
        /// embedding a bare list of them, would crowd out.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lexical: bool,
    },
    /// Finish with an answer citing chunks returned in this run.
    Answer {
        text: String,
        citations: Vec<ProposedCitation>,
    },
    /// Finish with passages that bear on the question, quoted and cited like an answer's, when
    /// no answer can be composed from them: the reader is told this is evidence, not an answer.
    Evidence {
        reason: String,
        citations: Vec<ProposedCitation>,
    },
    /// Finish without an answer: the evidence is not there.
    GiveUp { reason: String },
    /// Note a fact the asker states about themselves in the question (their grade, base city,
    /// start date): kept for the run's outcome only when its value is in the question's own
    /// words, and remembered only when the operator asks (`ask --remember`, chat's yes). Does
    /// not finish the run.
    ProposeFact { key: String, value: String },
    /// Finish with a reply the planner declares conversational (a greeting, thanks, a question
    /// about the conversation itself): no citations, recorded and shown as unsourced. Policy
    /// statements never go here.
    Reply { text: String },
}

/// What the engine observed when it carried out an action; handed back on the next turn, one
/// per action, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "observation", rename_all = "camelCase")]
pub enum Observation {
    /// The hits of a search.
    Hits {
        round: u32,
        keywords: Vec<String>,
        hits: Vec<SearchHit>,
        sufficiency: Sufficiency,
    },
    /// This keyword set was already searched in this run: not searched again.
    Repeated {
        keywords: Vec<String>,
        first_round: u32,
    },
    /// The action could not be carried out (bad keywords, no searches left, …).
    Rejected { message: String },
    /// A proposed fact, and whether the run kept it (`message` says why not).
    FactProposed {
        key: String,
        value: String,
        kept: bool,
        message: String,
    },
    /// The answer was refused: its citations were not returned in this run or its quotes are
    /// not in the cited chunk.
    CitationsRefused { refused: Vec<RefusalReason> },
}

/// One refused citation and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusalReason {
    pub chunk_id: String,
    pub quote: String,
    pub reason: String,
}

/// Token counts reported by a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// One planner turn: its actions plus what the trace records about how they were produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlannerStep {
    pub actions: Vec<PlannerAction>,
    /// Messages sent to the model for this turn (LLM planners).
    pub message_count: Option<u32>,
    pub usage: Option<Usage>,
    pub retries: u32,
    /// How the request fitted the model's context, when a context budget is set.
    pub context: Option<crate::trace::ContextFit>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`…), as its server said.
    pub finish_reason: Option<String>,
    /// Which of the asker's remembered facts this turn's decision used, by key (set on the
    /// turn that finishes a run with remembered facts; the loop records it in the trace).
    pub memory: Option<MemoryUse>,
    /// The model's reply as written, when the actions are not simply read from it (the
    /// reader mode), and why it was not used when it was not: both go to the trace.
    pub model_reply: Option<String>,
    pub model_note: Option<String>,
}

/// What a planner did with the asker's remembered facts, each named by its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Facts whose values were added to a search's keywords.
    pub searched: Vec<String>,
    /// Facts that decided the answer (the row, the column, the sentence it quotes).
    pub used: Vec<String>,
    /// Facts the question itself states (the same value or another one): the question wins.
    pub stated: Vec<String>,
}

/// What the planner may read about the run so far.
pub struct PlannerContext<'a> {
    pub question: &'a str,
    /// Earlier turns of the conversation, oldest first (empty outside a conversation).
    pub history: &'a [super::conversation::PriorTurn],
    /// Today's date (YYYY-MM-DD): policies with deadlines need it.
    pub today: &'a str,
    pub searches_done: u32,
    pub max_searches: u32,
    /// No searches are left: the planner may only answer or give up.
    pub answer_only: bool,
    /// Every search observation of this run, in order.
    pub rounds: &'a [Observation],
    /// Index statistics and the text of chunks returned in this run.
    pub lookup: &'a dyn EvidenceLookup,
    /// The asker's remembered facts (empty when none, or no asker is known).
    pub memory: &'a [crate::memory::Fact],
}

/// Read access the engine grants a planner: term rarity, and the full text of chunks that were
/// returned to it in this run (never of other chunks).
pub trait EvidenceLookup {
    /// In how many chunks an analysed term occurs.
    fn doc_freq(&self, term: &str) -> u64;
    /// Chunks in the index.
    fn num_chunks(&self) -> u64;
    /// Full text of a chunk returned in this run.
    fn returned_chunk_text(&self, chunk_id: &str) -> Option<&str>;
    /// Whether any chunk this run may see (its access context; superseded documents hidden, as
    /// in its searches) contains one of `word`'s analysed terms. Unlike [`Self::doc_freq`],
    /// which counts the whole index, the answer says nothing about other tenants' documents.
    fn mentions(&self, word: &str) -> bool;
    /// Whether a chunk this run may see writes `phrase` as it is (case aside), a CJK word as a
    /// word of its own rather than inside a longer one: for a phrase whose words
    /// [`Self::mentions`] would find apart, or part of another word.
    fn writes(&self, phrase: &str) -> bool {
        self.mentions(phrase)
    }
    /// The Chinese–English glossary, when one is installed: a question's words no passage
    /// uses, looked up in the other language.
    fn glossary(&self) -> Option<&crate::text::Glossary> {
        None
    }
    /// How far a returned chunk's similarity to the question (the configured embedder's)
    /// stands above that of the chunks this run may see, in their standard deviations; `None`
    /// when it cannot be told (no stored vectors in memory, a chunk not returned).
    fn question_standout(&self, _chunk_id: &str) -> Option<f64> {
        None
    }
    /// The analysed terms of a chunk returned in this run, whose hit gave `title_path` as its
    /// titlePath. This default analyses [`Self::returned_chunk_text`]; the engine's lookup
    /// reads the store's cache instead, which holds the same analysis.
    fn returned_chunk_terms(&self, chunk_id: &str, title_path: &str) -> Option<ChunkTermSet<'_>> {
        let text = self.returned_chunk_text(chunk_id)?;
        Some(ChunkTermSet::analyse(title_path, text))
    }
}

/// A returned chunk's analysed terms as `searchDocs` sees a hit: its titlePath and its text,
/// each analysed on its own, then merged; and the lowercased `titlePath\ntext` (CJK key terms
/// are matched in it as written).
pub struct ChunkTermSet<'a>(TermSource<'a>);

enum TermSource<'a> {
    /// The store's cached analysis.
    Cached(&'a ChunkTerms),
    Analysed {
        terms: HashSet<String>,
        lowercase: String,
    },
}

impl<'a> ChunkTermSet<'a> {
    /// Analyses a chunk's titlePath and text.
    pub fn analyse(title_path: &str, text: &str) -> Self {
        let terms = text::terms(title_path)
            .into_iter()
            .chain(text::terms(text))
            .map(|t| t.text)
            .collect();
        let lowercase = format!("{title_path}\n{text}").to_lowercase();
        Self(TermSource::Analysed { terms, lowercase })
    }

    /// The store's analysis of a chunk ([`ChunkTerms::new`] analyses the titlePath and the text
    /// apart too).
    pub fn cached(terms: &'a ChunkTerms) -> Self {
        Self(TermSource::Cached(terms))
    }

    /// Whether the titlePath or the text has the analysed term `term`.
    pub fn contains(&self, term: &str) -> bool {
        match &self.0 {
            TermSource::Cached(terms) => terms.contains(term),
            TermSource::Analysed { terms, .. } => terms.contains(term),
        }
    }

    /// The lowercased `titlePath\ntext`.
    pub fn lowercase(&self) -> &str {
        match &self.0 {
            TermSource::Cached(terms) => terms.lowercase(),
            TermSource::Analysed { lowercase, .. } => lowercase,
        }
    }
}

/// Why a planner could not produce a turn (network, model, protocol).
#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    #[error("{0}")]
    Failed(String),
}

/// Proposes keywords or an answer, one turn at a time.
pub trait Planner {
    /// `offline` or `llm`, as recorded in the trace.
    fn kind(&self) -> &'static str;
    /// The model behind the planner, if any.
    fn model(&self) -> Option<String> {
        None
    }
    /// The next turn, given the observations of the previous turn's actions (in order).
    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError>;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::knowledge::{ScanOptions, scan};

    /// A planner reads the same terms from the store's cache as from the default's analysis,
    /// on every chunk of the bundled knowledge.
    #[test]
    fn cached_and_analysed_chunk_terms_agree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge");
        let report = scan(&root, &ScanOptions::default()).expect("bundled knowledge");
        assert!(report.chunks.len() > 100);
        for chunk in &report.chunks {
            let store_terms = ChunkTerms::new(chunk);
            let cached = ChunkTermSet::cached(&store_terms);
            let analysed = ChunkTermSet::analyse(&chunk.title_path, &chunk.text);
            assert_eq!(cached.lowercase(), analysed.lowercase());
            let TermSource::Analysed { terms, .. } = &analysed.0 else {
                panic!("analyse gives analysed terms");
            };
            assert_eq!(store_terms.term_count(), terms.len(), "{}", chunk.id);
            assert!(terms.iter().all(|t| cached.contains(t)), "{}", chunk.id);
            assert!(!cached.contains("no-such-term") && !analysed.contains("no-such-term"));
        }
    }
}
