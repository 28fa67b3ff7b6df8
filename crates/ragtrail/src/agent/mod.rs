//! The agent loop: a [`Planner`] proposes keywords or an answer, the engine runs `searchDocs`
//! and hands the hits back, until the planner answers with grounded citations or the round
//! limit is reached. Every step goes to the trace.

mod citations;
pub mod conversation;
mod keywords;
pub mod llm;
pub mod offline;
mod options;
mod planner;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use citations::MAX_QUOTE_CHARS;
pub use keywords::{
    KeywordError, MAX_KEYWORD_CHARS, MAX_KEYWORDS, normalized_set, validate as validate_keywords,
};
pub use options::{AgentRagOptions, MAX_TOP_K_PER_ROUND};
pub use planner::{
    EvidenceLookup, Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
    ProposedCitation, RefusalReason, Usage,
};

use crate::access::AccessContext;
use crate::engine::Engine;
use crate::search::sufficiency::Sufficiency;
use crate::search::{SearchHit, SearchRequest, SearchResponse};
use crate::trace::{
    AnswerEvent, Citation, EventBody, FinishedTrace, LlmTurn, RefusedCitation, RunStarted,
    RunStatus, SearchFilters, SearchRound, TokenUsage, TraceError, TraceWriter, TracedHit,
};
use conversation::{CachedSearch, Conversation, PriorTurn};

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 2000;

/// Where and how the run's trace is written.
#[derive(Clone)]
pub struct TraceSettings {
    pub dir: PathBuf,
    /// Operator's secret: hashes become HMAC-SHA-256. Never written anywhere.
    pub key: Option<Vec<u8>>,
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
        }
    }
}

/// One search round as it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub round: u32,
    pub keywords: Vec<String>,
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

/// The result of a run, whatever its status.
#[derive(Debug, Clone)]
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
    pub trace: Option<FinishedTrace>,
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

struct Lookup<'a> {
    engine: &'a Engine,
    access: &'a AccessContext,
    n: u64,
    returned: HashMap<String, String>,
}

impl EvidenceLookup for Lookup<'_> {
    fn doc_freq(&self, term: &str) -> u64 {
        self.engine.index().doc_freq(term)
    }

    fn num_chunks(&self) -> u64 {
        self.n
    }

    fn returned_chunk_text(&self, chunk_id: &str) -> Option<&str> {
        self.returned.get(chunk_id).map(String::as_str)
    }

    fn mentions(&self, word: &str) -> bool {
        let keywords = [word.to_string()];
        let query = crate::index::Bm25Query {
            keywords: &keywords,
            access: self.access,
            include_superseded: false,
            limit: 1,
            title_boost: 1.0,
        };
        // A failed lookup counts as a mention: it must never be the reason an answer is refused.
        self.engine
            .index()
            .search(&query)
            .map_or(true, |matches| !matches.is_empty())
    }
}

/// Writes trace events when a trace is configured.
struct Recorder {
    writer: Option<TraceWriter>,
}

impl Recorder {
    fn event(&mut self, body: EventBody) -> Result<(), TraceError> {
        if let Some(w) = &mut self.writer {
            w.append(body)?;
        }
        Ok(())
    }
}

/// Runs the agent loop for one question.
pub fn run(
    engine: &Engine,
    planner: &mut dyn Planner,
    question: &str,
    settings: &RunSettings,
    on_event: &mut dyn FnMut(AgentEvent<'_>),
) -> Result<AgentOutcome, AgentError> {
    let question = question.trim();
    if question.is_empty() {
        return Err(AgentError::EmptyQuestion);
    }
    let len = crate::text::char_len(question);
    if len > MAX_QUESTION_CHARS {
        return Err(AgentError::QuestionTooLong(len));
    }
    let options = settings.options.clamped();
    let run_id = uuid::Uuid::now_v7();
    let mut rec = Recorder {
        writer: match &settings.trace {
            Some(t) => Some(TraceWriter::create(&t.dir, run_id, t.key.clone())?),
            None => None,
        },
    };
    let store = engine.store();
    let index_fingerprint = format!("gen-{}:{}", store.generation(), store.chunks().len());
    rec.event(EventBody::RunStarted(RunStarted {
        question: question.to_string(),
        options: serde_json::to_value(options).unwrap_or_default(),
        access: settings.access.clone(),
        planner: planner.kind().to_string(),
        model: planner.model(),
        embedder: engine.embedder().info(),
        index_fingerprint: index_fingerprint.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        today: settings.today.clone(),
        session_id: settings.session.as_ref().map(|s| s.0.clone()),
        turn: settings.session.as_ref().map(|s| s.1),
    }))?;

    let history: Vec<PriorTurn> = settings
        .conversation
        .as_ref()
        .and_then(|c| c.lock().ok().map(|s| s.turns.clone()))
        .unwrap_or_default();
    let turn_no = settings.session.as_ref().map(|s| s.1).unwrap_or(0);
    let mut lookup = Lookup {
        engine,
        access: &settings.access,
        n: engine.index().num_chunks(),
        returned: HashMap::new(),
    };
    let mut observations: Vec<Observation> = Vec::new();
    let mut search_observations: Vec<Observation> = Vec::new();
    let mut rounds: Vec<RoundRecord> = Vec::new();
    let mut searched: HashMap<Vec<String>, u32> = HashMap::new();
    let mut keyword_sets_tried: Vec<Vec<String>> = Vec::new();
    let mut refused_any = false;
    let mut finish: Option<(RunStatus, String, Option<FinalAnswer>)> = None;

    for turn in 0..options.max_planner_turns() {
        let searches_done = rounds.len() as u32;
        let answer_only = searches_done >= options.max_search_rounds;
        let ctx = PlannerContext {
            question,
            history: &history,
            today: &settings.today,
            searches_done,
            max_searches: options.max_search_rounds,
            answer_only,
            rounds: &search_observations,
            lookup: &lookup,
        };
        let started = Instant::now();
        let step = match planner.next(&ctx, &observations) {
            Ok(step) => step,
            Err(e) => {
                finish = Some((RunStatus::Error, format!("planner_error: {e}"), None));
                break;
            }
        };
        rec.event(EventBody::LlmTurn(LlmTurn {
            turn,
            output: serde_json::to_value(&step.actions).unwrap_or_default(),
            message_count: step.message_count,
            usage: step.usage.map(|u| TokenUsage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            }),
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
            retries: step.retries,
        }))?;
        observations = Vec::new();
        if step.actions.is_empty() {
            let message = "the turn produced neither a search nor an answer".to_string();
            on_event(AgentEvent::Rejected { message: &message });
            observations.push(Observation::Rejected { message });
        }
        for action in step.actions {
            match action {
                PlannerAction::Search {
                    keywords,
                    reason,
                    top_k,
                } => {
                    if rounds.len() as u32 >= options.max_search_rounds {
                        let message = format!(
                            "no searches left ({} of {} used): answer from the hits you have, or give up",
                            rounds.len(),
                            options.max_search_rounds
                        );
                        on_event(AgentEvent::Rejected { message: &message });
                        observations.push(Observation::Rejected { message });
                        continue;
                    }
                    let keywords = match validate_keywords(&keywords) {
                        Ok(k) => k,
                        Err(e) => {
                            let message = e.to_string();
                            on_event(AgentEvent::Rejected { message: &message });
                            observations.push(Observation::Rejected { message });
                            continue;
                        }
                    };
                    let key = normalized_set(&keywords);
                    if let Some(&first_round) = searched.get(&key) {
                        on_event(AgentEvent::Repeated {
                            keywords: &keywords,
                        });
                        rec.event(EventBody::Search(SearchRound {
                            round: first_round,
                            keywords: keywords.clone(),
                            reason,
                            top_k: 0,
                            fusion: String::new(),
                            filters: filters(settings),
                            legs: Default::default(),
                            hits: Vec::new(),
                            sufficiency: Sufficiency::default(),
                            repeated: true,
                            cached: None,
                        }))?;
                        observations.push(Observation::Repeated {
                            keywords,
                            first_round,
                        });
                        continue;
                    }
                    let round = rounds.len() as u32 + 1;
                    let top_k = top_k
                        .unwrap_or(options.top_k_per_round)
                        .clamp(1, options.top_k_per_round.max(1));
                    let req = SearchRequest::new(
                        keywords.clone(),
                        top_k as usize,
                        settings.access.clone(),
                    );
                    let cache_key = format!(
                        "{}|{}|{}|{}|{}",
                        key.join("\u{1f}"),
                        settings.access.tenant,
                        settings.access.roles.join(","),
                        top_k,
                        index_fingerprint
                    );
                    let cached = settings
                        .conversation
                        .as_ref()
                        .and_then(|c| c.lock().ok().and_then(|s| s.cached(&cache_key).cloned()));
                    let (resp, cached_from) = match cached {
                        Some(c) => (
                            SearchResponse {
                                hits: c.hits,
                                content_hashes: c.content_hashes,
                                legs: c.legs,
                                fusion: c.fusion.parse().unwrap_or(engine.settings.fusion),
                                sufficiency: c.sufficiency,
                            },
                            Some((c.turn, c.round)),
                        ),
                        None => match engine.search_docs(&req) {
                            Ok(r) => {
                                if let Some(conv) = &settings.conversation
                                    && let Ok(mut s) = conv.lock()
                                {
                                    s.remember(CachedSearch::new(cache_key, turn_no, round, &r));
                                }
                                (r, None)
                            }
                            Err(e) => {
                                let message = format!("search failed: {e}");
                                on_event(AgentEvent::Rejected { message: &message });
                                observations.push(Observation::Rejected { message });
                                continue;
                            }
                        },
                    };
                    let reason = match cached_from {
                        Some((t, r)) => {
                            format!("{reason} (served from the session cache: turn {t}, round {r})")
                        }
                        None => reason,
                    };
                    searched.insert(key, round);
                    keyword_sets_tried.push(keywords.clone());
                    for hit in &resp.hits {
                        if let Some(chunk) = store.get(&hit.chunk_id) {
                            lookup
                                .returned
                                .insert(hit.chunk_id.clone(), chunk.text.clone());
                        }
                    }
                    rec.event(EventBody::Search(SearchRound {
                        round,
                        keywords: keywords.clone(),
                        reason: reason.clone(),
                        top_k,
                        fusion: resp.fusion.to_string(),
                        filters: filters(settings),
                        legs: resp.legs.clone(),
                        hits: resp
                            .hits
                            .iter()
                            .zip(&resp.content_hashes)
                            .map(|(h, c)| TracedHit {
                                hit: h.clone(),
                                content_hash: c.clone(),
                            })
                            .collect(),
                        sufficiency: resp.sufficiency.clone(),
                        repeated: false,
                        cached: cached_from.map(|(_, r)| r),
                    }))?;
                    let record = RoundRecord {
                        round,
                        keywords: keywords.clone(),
                        reason,
                        hits: resp.hits.clone(),
                        sufficiency: resp.sufficiency.clone(),
                    };
                    on_event(AgentEvent::Round(&record));
                    rounds.push(record);
                    let obs = Observation::Hits {
                        round,
                        keywords,
                        hits: resp.hits,
                        sufficiency: resp.sufficiency,
                    };
                    search_observations.push(obs.clone());
                    observations.push(obs);
                }
                PlannerAction::Answer {
                    text,
                    citations: proposed,
                } => {
                    let mut refused = if options.require_source {
                        citations::check(&proposed, &lookup.returned)
                    } else {
                        Vec::new()
                    };
                    if options.require_source && proposed.is_empty() {
                        refused.push(RefusalReason {
                            chunk_id: String::new(),
                            quote: String::new(),
                            reason: "an answer must cite at least one chunk returned in this run"
                                .to_string(),
                        });
                    }
                    let cited = cite(&proposed, &rounds);
                    if !refused.is_empty() {
                        refused_any = true;
                        rec.event(EventBody::Answer(AnswerEvent {
                            text: text.clone(),
                            citations: cited,
                            grounded: false,
                            refused: refused
                                .iter()
                                .map(|r| RefusedCitation {
                                    chunk_id: r.chunk_id.clone(),
                                    quote: r.quote.clone(),
                                    reason: r.reason.clone(),
                                })
                                .collect(),
                            unsourced: false,
                        }))?;
                        on_event(AgentEvent::Refused(&refused));
                        observations.push(Observation::CitationsRefused { refused });
                        continue;
                    }
                    rec.event(EventBody::Answer(AnswerEvent {
                        text: text.clone(),
                        citations: cited.clone(),
                        grounded: true,
                        refused: Vec::new(),
                        unsourced: false,
                    }))?;
                    finish = Some((
                        RunStatus::Answered,
                        "answered".to_string(),
                        Some(FinalAnswer {
                            text,
                            citations: cited,
                            unsourced: false,
                        }),
                    ));
                    break;
                }
                PlannerAction::GiveUp { reason } => {
                    finish = Some((RunStatus::InsufficientEvidence, reason, None));
                    break;
                }
                PlannerAction::Reply { text } => {
                    rec.event(EventBody::Answer(AnswerEvent {
                        text: text.clone(),
                        citations: Vec::new(),
                        grounded: false,
                        refused: Vec::new(),
                        unsourced: true,
                    }))?;
                    finish = Some((
                        RunStatus::Answered,
                        "conversational".to_string(),
                        Some(FinalAnswer {
                            text,
                            citations: Vec::new(),
                            unsourced: true,
                        }),
                    ));
                    break;
                }
            }
        }
        if finish.is_some() {
            break;
        }
    }
    let (status, reason, answer) = finish.unwrap_or_else(|| {
        let reason = if refused_any {
            "refused_citations"
        } else if rounds.len() as u32 >= options.max_search_rounds {
            "round_limit"
        } else {
            "turn_limit"
        };
        (RunStatus::InsufficientEvidence, reason.to_string(), None)
    });
    let message = (status != RunStatus::Answered)
        .then(|| insufficient_message(&status, &reason, &rounds, &keyword_sets_tried));
    if let Some(message) = &message
        && status == RunStatus::InsufficientEvidence
    {
        rec.event(EventBody::Answer(AnswerEvent {
            text: message.clone(),
            citations: Vec::new(),
            grounded: false,
            refused: Vec::new(),
            unsourced: false,
        }))?;
    }
    let searches = rounds.len() as u32;
    let trace = match rec.writer {
        Some(w) => Some(w.finish(status, reason.clone(), searches, searches)?),
        None => None,
    };
    Ok(AgentOutcome {
        run_id,
        status,
        reason,
        answer,
        message,
        rounds,
        keyword_sets_tried,
        trace,
    })
}

fn filters(settings: &RunSettings) -> SearchFilters {
    SearchFilters {
        tenant: settings.access.tenant.clone(),
        roles: settings.access.roles.clone(),
        include_superseded: false,
    }
}

/// Citations with the titlePath and sourceUri of the hit they cite.
fn cite(proposed: &[ProposedCitation], rounds: &[RoundRecord]) -> Vec<Citation> {
    proposed
        .iter()
        .map(|c| {
            let hit = rounds
                .iter()
                .flat_map(|r| &r.hits)
                .find(|h| h.chunk_id == c.chunk_id);
            Citation {
                chunk_id: c.chunk_id.clone(),
                quote: c.quote.clone(),
                title_path: hit.map(|h| h.title_path.clone()).unwrap_or_default(),
                source_uri: hit.map(|h| h.source_uri.clone()).unwrap_or_default(),
            }
        })
        .collect()
}

/// The user-facing explanation when there is no grounded answer.
fn insufficient_message(
    status: &RunStatus,
    reason: &str,
    rounds: &[RoundRecord],
    tried: &[Vec<String>],
) -> String {
    let mut out = match status {
        RunStatus::Error => format!("The run stopped with an error: {reason}."),
        _ => {
            "The knowledge base does not hold enough evidence to answer this question.".to_string()
        }
    };
    if tried.is_empty() {
        out.push_str(" No search was run.");
    } else {
        let sets: Vec<String> = tried
            .iter()
            .map(|k| format!("[{}]", k.join(", ")))
            .collect();
        out.push_str(&format!(" Keywords tried: {}.", sets.join("; ")));
    }
    // A planner's own account ("no_relevant_hits: …") is about the whole run; the last
    // search's decision only about its keywords, and may even have been sufficient.
    match reason.split_once(": ") {
        Some((_, why)) if *status != RunStatus::Error => {
            out.push_str(&format!(" Why: {why}."));
        }
        _ => {
            if let Some(last) = rounds.last() {
                out.push_str(&format!(" Last search: {}.", last.sufficiency.reason));
            }
        }
    }
    out
}
