//! The agent loop: a [`Planner`] proposes keywords or an answer, the engine runs `searchDocs`
//! and hands the hits back, until the planner answers with grounded citations or the round
//! limit is reached. Every step goes to the trace.

mod citations;
pub mod conversation;
mod keywords;
pub mod llm;
mod numerals;
pub mod observe;
pub mod offline;
mod options;
mod outcome;
mod passages;
mod planner;
pub mod question_search;
pub mod reader;
mod run;
mod standout;

pub use run::{GAVE_UP_BEFORE_SEARCHING, error_cause};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use keywords::{
    MAX_KEYWORD_CHARS, MAX_KEYWORDS, normalized_set, validate as validate_keywords,
};
pub use options::{AgentRagOptions, MAX_SEARCH_ROUNDS, MAX_TOP_K_PER_ROUND};
pub use outcome::{AskOutcome, SaidFact};
pub use planner::{
    ChunkTermSet, EvidenceLookup, MemoryUse, Observation, Planner, PlannerAction, PlannerContext,
    PlannerError, PlannerStep, ProposedCitation, RefusalReason,
};

use crate::access::AccessContext;
use crate::engine::Engine;
use crate::knowledge::Chunk;
use crate::memory::Fact;
use crate::search::sufficiency::Sufficiency;
use crate::search::{FoundHit, SearchHit, Searcher};
use crate::store::ChunkTerms;
use crate::trace::{Citation, FinishedTrace, RunStatus, TraceError};
use conversation::Conversation;

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 2000;

/// Where and how the run's trace is written.
#[derive(Clone)]
pub struct TraceSettings {
    pub dir: PathBuf,
    /// Operator's secret: hashes become HMAC-SHA-256. Never written anywhere.
    pub key: Option<Vec<u8>>,
    /// Operator's signing key: each finished run's ledger entry is signed with it.
    pub signer: Option<std::sync::Arc<crate::trace::SigningKey>>,
    /// Name of whoever the server granted this run's access to (a token's name), recorded in
    /// `run_started`; `None` from the command line.
    pub caller: Option<String>,
}

/// Everything about a run that is not the question.
#[derive(Clone)]
pub struct RunSettings {
    pub options: AgentRagOptions,
    pub access: AccessContext,
    /// Today's date, YYYY-MM-DD (recorded; replay reuses it).
    pub today: String,
    pub trace: Option<TraceSettings>,
    /// Conversation this run belongs to, and its turn number.
    pub session: Option<(String, u32)>,
    /// The conversation's earlier turns and search cache (read, and the cache extended).
    pub conversation: Option<Arc<Mutex<Conversation>>>,
    /// The asker's remembered facts (read by the front end from their memory, or from a
    /// trace when a run is planned again): the planner uses those that bear on the question,
    /// and the trace records which.
    pub memory: Vec<Fact>,
    /// Told about the run when it ends, with the events its trace holds (OpenTelemetry
    /// export, `telemetry`); `None`: nothing is kept for it.
    pub observer: Option<Arc<dyn observe::RunObserver>>,
}

impl RunSettings {
    /// Settings for a run outside any conversation, without a trace.
    pub fn new(options: AgentRagOptions, access: AccessContext, today: impl Into<String>) -> Self {
        Self {
            options,
            access,
            today: today.into(),
            trace: None,
            session: None,
            conversation: None,
            memory: Vec::new(),
            observer: None,
        }
    }
}

/// One search round of a run (an entry of the outcome's `rounds`, and the data of the event
/// stream's `round` events).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Round))]
pub struct RoundRecord {
    pub round: u32,
    pub keywords: Vec<String>,
    /// Why the planner searched these keywords.
    pub reason: String,
    pub hits: Vec<SearchHit>,
    pub sufficiency: Sufficiency,
}

/// A grounded answer.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalAnswer {
    pub text: String,
    pub citations: Vec<Citation>,
    /// A conversational reply (greeting, thanks) with no evidence behind it.
    pub unsourced: bool,
}

/// One planner turn that called a model, and what it cost (the same figures as its
/// `llm_turn` trace event).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelCall {
    pub turn: u32,
    /// Wall time of the turn: the request, its retries and reading the reply.
    pub latency_ms: f64,
    /// Tokens as the server reported them (`None`: it sent no `usage`).
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub retries: u32,
}

/// The model calls of a run added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    pub calls: u32,
    /// Sums over the calls that reported usage (`None`: none did).
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Calls whose server reported no usage (their tokens are missing from the sums).
    pub calls_without_usage: u32,
    pub latency_ms: f64,
}

impl ModelUsage {
    pub fn of(calls: &[ModelCall]) -> Self {
        let sum = |pick: fn(&ModelCall) -> Option<u32>| {
            calls
                .iter()
                .filter_map(pick)
                .map(u64::from)
                .reduce(|a, b| a + b)
        };
        Self {
            calls: calls.len() as u32,
            prompt_tokens: sum(|c| c.prompt_tokens),
            completion_tokens: sum(|c| c.completion_tokens),
            calls_without_usage: calls.iter().filter(|c| c.prompt_tokens.is_none()).count() as u32,
            latency_ms: calls.iter().map(|c| c.latency_ms).sum(),
        }
    }
}

/// The result of a run, whatever its status. Serialised as its [`AskOutcome`]: what `ask
/// --json` prints and the server's `/v1/ask` returns.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(into = "AskOutcome")]
pub struct AgentOutcome {
    pub run_id: uuid::Uuid,
    pub status: RunStatus,
    /// `answered`, `round_limit`, `no_relevant_hits`, `refused_citations`, `turn_limit`, … (a
    /// planner giving up may add its account after a colon: `no_relevant_hits: …`)
    pub reason: String,
    pub answer: Option<FinalAnswer>,
    /// What the user is told when there is no grounded answer.
    pub message: Option<String>,
    pub rounds: Vec<RoundRecord>,
    pub keyword_sets_tried: Vec<Vec<String>>,
    /// Facts about the asker the planner read in the question and the run kept (key, value):
    /// the model's `proposeFact` calls whose value the question states.
    pub proposed_facts: Vec<(String, String)>,
    /// Each planner turn that called a model (empty for the offline planner).
    pub model_calls: Vec<ModelCall>,
    /// The planner that ran (`offline`, `llm`, `reader`) and its model, as the trace records them.
    pub planner: String,
    pub model: Option<String>,
    pub trace: Option<FinishedTrace>,
}

impl AgentOutcome {
    /// The facts about the asker that this run's question states, to remember when the
    /// operator asks: the fixed patterns' first (`facts_stated_in`), then the planner's kept
    /// proposals for other keys.
    pub fn facts_said(&self, question: &str, today: &str) -> Vec<(String, String)> {
        let mut facts = crate::memory::learn::facts_stated(question, today);
        for (key, value) in &self.proposed_facts {
            if !facts.iter().any(|(k, _)| crate::memory::same_key(k, key)) {
                facts.push((key.clone(), value.clone()));
            }
        }
        facts
    }
}

/// What happens during a run, for live display.
pub enum AgentEvent<'a> {
    Round(&'a RoundRecord),
    Repeated { keywords: &'a [String] },
    Rejected { message: &'a str },
    Refused(&'a [RefusalReason]),
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the question is {0} characters long; the limit is {MAX_QUESTION_CHARS}")]
    QuestionTooLong(usize),
    #[error("writing the trace: {0}")]
    Trace(#[from] TraceError),
}

/// What the planner may look up during a run, all through the run's [`Searcher`]: term
/// counts over what the run may see, the chunks its searches returned, how far a chunk's
/// similarity to the question stands out, whether a word occurs at all.
struct Lookup<'a> {
    searcher: Searcher<'a>,
    question: &'a str,
    /// The question's similarity over the visible chunks, computed when first asked for.
    profile: std::cell::OnceCell<Option<standout::SimilarityProfile>>,
    returned: HashMap<String, Returned<'a>>,
    glossary: Option<&'a crate::text::Glossary>,
}

/// A chunk a search of this run returned, as read when its hit was found.
struct Returned<'a> {
    chunk: &'a Chunk,
    terms: &'a ChunkTerms,
}

impl citations::ReturnedTexts for HashMap<String, Returned<'_>> {
    fn text_of(&self, chunk_id: &str) -> Option<&str> {
        self.get(chunk_id).map(|r| r.chunk.text.as_str())
    }
}

impl<'a> Lookup<'a> {
    fn new(engine: &'a Engine, access: &AccessContext, question: &'a str) -> Self {
        Self {
            searcher: engine.searcher(access),
            question,
            profile: std::cell::OnceCell::new(),
            returned: HashMap::new(),
            glossary: engine.glossary(),
        }
    }

    /// Keeps the chunks of a search's hits, as the search read them: the planner may read
    /// them, and citations are checked against them.
    fn remember(&mut self, hits: &[FoundHit<'a>]) {
        for hit in hits {
            self.returned.insert(
                hit.hit.chunk_id.clone(),
                Returned {
                    chunk: hit.chunk,
                    terms: hit.terms,
                },
            );
        }
    }

    /// [`Lookup::remember`] for hits served from the conversation's cache (read once here).
    fn remember_cached(&mut self, hits: &[conversation::HashedHit]) {
        for traced in hits {
            if let Some((chunk, terms)) = self.searcher.chunk(&traced.hit.chunk_id) {
                self.returned
                    .insert(traced.hit.chunk_id.clone(), Returned { chunk, terms });
            }
        }
    }
}

impl EvidenceLookup for Lookup<'_> {
    fn doc_freq(&self, term: &str) -> u64 {
        self.searcher.doc_freq(term)
    }

    fn num_chunks(&self) -> u64 {
        self.searcher.num_chunks()
    }

    fn returned_chunk_text(&self, chunk_id: &str) -> Option<&str> {
        self.returned.get(chunk_id).map(|r| r.chunk.text.as_str())
    }

    fn returned_chunk_terms(&self, chunk_id: &str, title_path: &str) -> Option<ChunkTermSet<'_>> {
        let returned = self.returned.get(chunk_id)?;
        // The store's analysis of the record is the same analysis whenever the hit's titlePath
        // is the record's too (checked: a hit served from a conversation's cache was recorded
        // in an earlier turn).
        Some(if returned.chunk.title_path == title_path {
            ChunkTermSet::cached(returned.terms)
        } else {
            ChunkTermSet::analyse(title_path, &returned.chunk.text)
        })
    }

    fn question_standout(&self, chunk_id: &str) -> Option<f64> {
        if !self.returned.contains_key(chunk_id) {
            return None;
        }
        let profile = self
            .profile
            .get_or_init(|| standout::SimilarityProfile::of(&self.searcher, self.question))
            .as_ref()?;
        profile.standout(&self.searcher, chunk_id)
    }

    fn mentions(&self, word: &str) -> bool {
        // A failed lookup counts as a mention: it must never be the reason an answer is refused.
        self.searcher.mentions(word).unwrap_or(true)
    }

    fn writes(&self, phrase: &str) -> bool {
        // Unlike a mention, a failed lookup writes nothing: it only ever adds words to search.
        self.searcher.writes_as_a_word(phrase).unwrap_or(false)
    }

    fn glossary(&self) -> Option<&crate::text::Glossary> {
        self.glossary
    }
}

/// Runs the agent loop for one question: planner turns (step by step in `run.rs`) until an answer
/// with grounded citations, a reply, giving up, or the limits.
pub fn run(
    engine: &Engine,
    planner: &mut dyn Planner,
    question: &str,
    settings: &RunSettings,
    on_event: &mut dyn FnMut(AgentEvent<'_>),
) -> Result<AgentOutcome, AgentError> {
    let mut run = run::Run::start(engine, &*planner, question, settings)?;
    let finish = run.turns(planner, on_event)?;
    run.finish(finish)
}
