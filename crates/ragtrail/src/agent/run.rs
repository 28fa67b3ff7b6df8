//! One run of the agent loop, step by step: a planner turn, the actions it asks for (a search
//! round, an answer whose citations are checked, a reply, giving up), then the finish. The
//! state carried from turn to turn lives in [`Run`]; every step writes its trace event as it
//! happens, so the trace reads in the order the run went.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::citations;
use super::conversation::{CachedSearch, PriorTurn, RoundResult};
use super::observe::{ObservedEvent, ObservedRun};
use super::planner::{
    EvidenceLookup, MemoryUse, Observation, Planner, PlannerAction, PlannerContext, PlannerStep,
    ProposedCitation, RefusalReason,
};
use super::{
    AgentError, AgentEvent, AgentOutcome, AgentRagOptions, FinalAnswer, Lookup, MAX_QUESTION_CHARS,
    ModelCall, RoundRecord, RunSettings, normalized_set, validate_keywords,
};
use crate::engine::Engine;
use crate::memory::{Fact, same_key};
use crate::search::SearchError;
use crate::search::{MAX_QUERY_CHARS, SearchRequest};
use crate::text::Lang;
use crate::trace::{
    AnswerEvent, Citation, EarlierTurn, EventBody, FactProposed, FactRecord, LlmTurn, MemoryRead,
    RefusedCitation, RunStarted, RunStatus, SearchFilters, SearchRound, TokenUsage, TraceError,
    TraceWriter, TracedHit, WeightsRecord,
};

/// Repeated keyword sets (already searched in the run) after which the run ends.
const MAX_REPEATED_SEARCHES: u32 = 2;

/// Starts the reason of the search the loop ran instead of a give-up before any search.
pub const GAVE_UP_BEFORE_SEARCHING: &str = "the planner gave up before any search";

/// Starts the reason of a run a search ended for its setup's sake (`search_error: the index
/// was embedded with …`), as `planner_error` starts one a failing planner ended.
pub const SEARCH_ERROR: &str = "search_error";

/// Starts the reason of a run its planner's failure ended (a chat endpoint that does not
/// answer, a missing model).
pub const PLANNER_ERROR: &str = "planner_error";

/// Writes trace events when a trace is configured, and keeps them for the run's observer
/// when one is set.
struct Recorder {
    writer: Option<TraceWriter>,
    /// `Some` only with an observer: the events and when each was recorded.
    observed: Option<Vec<ObservedEvent>>,
}

impl Recorder {
    fn event(&mut self, body: EventBody) -> Result<(), TraceError> {
        if let Some(events) = &mut self.observed {
            events.push(ObservedEvent {
                at: SystemTime::now(),
                body: body.clone(),
            });
        }
        if let Some(w) = &mut self.writer {
            w.record(body)?;
        }
        Ok(())
    }
}

/// How a run ended, before its user-facing message and its last trace events are written.
/// A search the planner asked for, as it asked.
struct SearchAsked {
    keywords: Vec<String>,
    reason: String,
    top_k: Option<u32>,
    query: Option<String>,
    /// BM25 alone ([`PlannerAction::Search`]'s `lexical`).
    lexical: bool,
    /// Why the planner gave up before any search, when the loop ran this search instead.
    overrode_give_up: Option<String>,
}

pub(super) struct Finish {
    status: RunStatus,
    reason: String,
    answer: Option<FinalAnswer>,
}

/// What a search round was served from: `None` for a fresh search, else the conversation turn
/// and round that ran it first.
type CachedFrom = Option<(u32, u32)>;

/// The state of one run between planner turns.
pub(super) struct Run<'a> {
    engine: &'a Engine,
    settings: &'a RunSettings,
    question: &'a str,
    /// The run's options, every value inside its bounds.
    options: AgentRagOptions,
    run_id: uuid::Uuid,
    /// When [`Run::start`] was called (the observer's view of the run begins there).
    started: SystemTime,
    recorder: Recorder,
    /// Store generation and size: part of every session-cache key, so that a cached search is
    /// served only against the index it came from.
    index_fingerprint: String,
    /// The conversation's earlier turns, for the planner.
    history: Vec<PriorTurn>,
    /// This run's turn in its conversation (0 outside one).
    turn_no: u32,
    lookup: Lookup<'a>,
    /// What the previous turn's actions produced, one per action: the planner's next input.
    observations: Vec<Observation>,
    /// Every search observation of the run, in order.
    search_observations: Vec<Observation>,
    rounds: Vec<RoundRecord>,
    /// Each keyword set searched (normalised), with the round that searched it.
    searched: HashMap<Vec<String>, u32>,
    keyword_sets_tried: Vec<Vec<String>>,
    /// Some answer of this run was refused for its citations.
    refused_any: bool,
    /// The last refused answer (text and citations): the same one again ends the run.
    last_refused: Option<(String, Vec<ProposedCitation>)>,
    /// Searches asked for again with a keyword set this run already searched.
    repeats: u32,
    /// A give-up before any search was turned into a search (done at most once).
    overrode_give_up: bool,
    /// A search was asked for (carried out or rejected): a give-up after it is the planner's
    /// own verdict on keywords it chose, not a refusal to look.
    search_asked: bool,
    /// The turns that called a model.
    model_calls: Vec<ModelCall>,
    /// The `memory_read` event was written (once per run).
    memory_recorded: bool,
    /// Facts about the asker the planner read in the question and the run kept, by key.
    proposed_facts: Vec<(String, String)>,
    /// The planner's kind and model, as `run_started` recorded them.
    planner: String,
    model: Option<String>,
}

impl<'a> Run<'a> {
    /// Checks the question, opens the trace and records the run's start.
    pub(super) fn start(
        engine: &'a Engine,
        planner: &dyn Planner,
        question: &'a str,
        settings: &'a RunSettings,
    ) -> Result<Self, AgentError> {
        let started = SystemTime::now();
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
        let mut recorder = Recorder {
            writer: match &settings.trace {
                Some(t) => Some(
                    TraceWriter::create(&t.dir, run_id, t.key.clone())?
                        .with_signer(t.signer.clone()),
                ),
                None => None,
            },
            observed: settings.observer.as_ref().map(|_| Vec::new()),
        };
        let index_fingerprint = engine.knowledge_version(&settings.access);
        let history: Vec<PriorTurn> = settings
            .conversation
            .as_ref()
            .and_then(|c| c.lock().ok().map(|s| s.turns.clone()))
            .unwrap_or_default();
        recorder.event(EventBody::RunStarted(RunStarted {
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
            knowledge_base: engine.knowledge_base_id().to_string(),
            earlier_turns: history
                .iter()
                .map(|t| EarlierTurn {
                    turn: t.turn,
                    question: t.question.clone(),
                    answer: t.answer.clone(),
                    trace: t.trace.clone(),
                })
                .collect(),
            caller: settings.trace.as_ref().and_then(|t| t.caller.clone()),
        }))?;
        Ok(Self {
            engine,
            settings,
            question,
            options,
            run_id,
            started,
            recorder,
            index_fingerprint,
            history,
            turn_no: settings.session.as_ref().map(|s| s.1).unwrap_or(0),
            lookup: Lookup::new(engine, &settings.access, question),
            observations: Vec::new(),
            search_observations: Vec::new(),
            rounds: Vec::new(),
            searched: HashMap::new(),
            keyword_sets_tried: Vec::new(),
            refused_any: false,
            last_refused: None,
            repeats: 0,
            overrode_give_up: false,
            search_asked: false,
            model_calls: Vec::new(),
            memory_recorded: false,
            proposed_facts: Vec::new(),
            planner: planner.kind().to_string(),
            model: planner.model(),
        })
    }

    /// Planner turns until an action finishes the run, or `None` when the turns run out.
    pub(super) fn turns(
        &mut self,
        planner: &mut dyn Planner,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<Option<Finish>, AgentError> {
        for turn in 0..self.options.max_planner_turns() {
            let ctx = self.context();
            let started = Instant::now();
            let step = match planner.next(&ctx, &self.observations) {
                Ok(step) => step,
                Err(e) => {
                    return Ok(Some(Finish {
                        status: RunStatus::Error,
                        reason: format!("{PLANNER_ERROR}: {e}"),
                        answer: None,
                    }));
                }
            };
            self.record_turn(turn, &step, started.elapsed())?;
            if let Some(finish) = self.carry_out(step.actions, on_event)? {
                return Ok(Some(finish));
            }
        }
        Ok(None)
    }

    /// What the planner may read: the question, the conversation, the searches so far.
    fn context(&self) -> PlannerContext<'_> {
        let searches_done = self.rounds.len() as u32;
        PlannerContext {
            question: self.question,
            history: &self.history,
            today: &self.settings.today,
            searches_done,
            max_searches: self.options.max_search_rounds,
            answer_only: searches_done >= self.options.max_search_rounds,
            rounds: &self.search_observations,
            lookup: &self.lookup,
            memory: &self.settings.memory,
        }
    }

    fn record_turn(
        &mut self,
        turn: u32,
        step: &PlannerStep,
        latency: Duration,
    ) -> Result<(), AgentError> {
        self.recorder.event(EventBody::LlmTurn(LlmTurn {
            turn,
            output: serde_json::to_value(&step.actions).unwrap_or_default(),
            message_count: step.message_count,
            usage: step.usage.map(|u| TokenUsage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            }),
            latency_ms: latency.as_secs_f64() * 1e3,
            retries: step.retries,
            finish_reason: step.finish_reason.clone(),
            reply: step.model_reply.clone(),
            note: step.model_note.clone(),
            context_fit: step.context.clone(),
        }))?;
        if let Some(used) = &step.memory
            && !self.memory_recorded
            && !self.settings.memory.is_empty()
        {
            self.memory_recorded = true;
            let read = memory_read(&self.settings.memory, used);
            self.recorder.event(EventBody::MemoryRead(read))?;
        }
        // A planner that sends messages called a model this turn.
        if step.message_count.is_some() {
            self.model_calls.push(ModelCall {
                turn,
                latency_ms: latency.as_secs_f64() * 1e3,
                prompt_tokens: step.usage.map(|u| u.prompt_tokens),
                completion_tokens: step.usage.map(|u| u.completion_tokens),
                retries: step.retries,
            });
        }
        Ok(())
    }

    /// Carries out one turn's actions in order, each leaving its observation for the next turn;
    /// the first action that finishes the run ends the turn.
    fn carry_out(
        &mut self,
        actions: Vec<PlannerAction>,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<Option<Finish>, AgentError> {
        self.observations = Vec::new();
        if actions.is_empty() {
            let message = "the turn produced neither a search nor an answer".to_string();
            self.reject(message, on_event);
        }
        for action in actions {
            let finish = match action {
                PlannerAction::Search {
                    keywords,
                    reason,
                    top_k,
                    query,
                    lexical,
                } => {
                    let query = query.filter(|q| crate::text::char_len(q) <= MAX_QUERY_CHARS);
                    self.search_round(
                        SearchAsked {
                            keywords,
                            reason,
                            top_k,
                            query,
                            lexical,
                            overrode_give_up: None,
                        },
                        on_event,
                    )?
                }
                PlannerAction::Answer { text, citations } => {
                    self.answer(text, citations, on_event)?
                }
                PlannerAction::Evidence { reason, citations } => {
                    Some(self.evidence(reason, citations)?)
                }
                PlannerAction::GiveUp { reason } => match self.give_up_overridden(&reason) {
                    Some(keywords) => {
                        let why = format!(
                            "{GAVE_UP_BEFORE_SEARCHING} ({reason}); the loop searched the question's own words"
                        );
                        let asked = SearchAsked {
                            keywords,
                            reason: why,
                            top_k: None,
                            query: Some(self.question.to_string()),
                            lexical: false,
                            overrode_give_up: Some(reason),
                        };
                        self.search_round(asked, on_event)?
                    }
                    None => Some(Finish {
                        status: RunStatus::InsufficientEvidence,
                        reason,
                        answer: None,
                    }),
                },
                PlannerAction::Reply { text } => Some(self.reply(text)?),
                PlannerAction::ProposeFact { key, value } => {
                    self.propose_fact(key, value)?;
                    None
                }
            };
            if finish.is_some() {
                return Ok(finish);
            }
        }
        Ok(None)
    }

    /// The keywords to search instead of a give-up, when the give-up comes before any search
    /// (once per run; the question's own words are always worth one search, whatever the
    /// planner), or `None` to accept it.
    fn give_up_overridden(&mut self, reason: &str) -> Option<Vec<String>> {
        if !self.rounds.is_empty()
            || self.search_asked
            || self.overrode_give_up
            || self.options.max_search_rounds == 0
        {
            return None;
        }
        let keywords =
            super::question_search::question_keywords(self.question, &|t| self.lookup.doc_freq(t))?;
        tracing::debug!(reason, "a give-up before any search was overridden");
        self.overrode_give_up = true;
        Some(keywords)
    }

    /// A fact the planner read in the question: kept for the outcome when the question says it
    /// (a later proposal for the same key replaces it), recorded either way, and observed.
    fn propose_fact(&mut self, key: String, value: String) -> Result<(), AgentError> {
        let (key, value) = (key.trim().to_string(), value.trim().to_string());
        let refused = crate::memory::learn::proposal_refusal(self.question, &key, &value);
        if refused.is_none() {
            self.proposed_facts
                .retain(|(k, _)| !crate::memory::same_key(k, &key));
            self.proposed_facts.push((key.clone(), value.clone()));
        }
        self.recorder.event(EventBody::FactProposed(FactProposed {
            key: key.clone(),
            value: value.clone(),
            kept: refused.is_none(),
            refused: refused.map(str::to_string),
        }))?;
        let message = match refused {
            None => "noted: it is remembered only if the asker agrees; go on with the question"
                .to_string(),
            Some(why) => format!("not noted: {why}"),
        };
        self.observations.push(Observation::FactProposed {
            key,
            value,
            kept: refused.is_none(),
            message,
        });
        Ok(())
    }

    /// An action that could not be carried out: shown, and observed by the planner.
    fn reject(&mut self, message: String, on_event: &mut dyn FnMut(AgentEvent<'_>)) {
        on_event(AgentEvent::Rejected { message: &message });
        self.observations.push(Observation::Rejected { message });
    }

    /// One search round: refused when no searches are left or the keywords are invalid, not run
    /// again for a keyword set this run already searched, served from the session cache when
    /// the conversation ran the same search on the same index. A search that fails for the
    /// setup's sake (embedder, model server, index) ends the run as an error: other keywords
    /// would fail the same way, and a refusal would blame the knowledge base.
    fn search_round(
        &mut self,
        asked: SearchAsked,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<Option<Finish>, AgentError> {
        let SearchAsked {
            keywords,
            reason,
            top_k,
            query,
            lexical,
            overrode_give_up,
        } = asked;
        self.search_asked = true;
        if self.rounds.len() as u32 >= self.options.max_search_rounds {
            let message = format!(
                "no searches left ({} of {} used): answer from the hits you have, or give up",
                self.rounds.len(),
                self.options.max_search_rounds
            );
            self.reject(message, on_event);
            return Ok(None);
        }
        let keywords = match validate_keywords(&keywords) {
            Ok(k) => k,
            Err(e) => {
                self.reject(e.to_string(), on_event);
                return Ok(None);
            }
        };
        let key = normalized_set(&keywords);
        if let Some(&first_round) = self.searched.get(&key) {
            self.repeated(keywords, reason, first_round, on_event)?;
            // A second repeat: the planner was told the first time and did not change its
            // keywords (a small model sent the same set for every turn left, about half a
            // minute each); the run ends as it would when the turns run out.
            self.repeats += 1;
            if self.repeats >= MAX_REPEATED_SEARCHES {
                return Ok(Some(self.out_of_turns()));
            }
            return Ok(None);
        }
        let round = self.rounds.len() as u32 + 1;
        let top_k = top_k
            .unwrap_or(self.options.top_k_per_round)
            .clamp(1, self.options.top_k_per_round.max(1));
        let (resp, cached_from) =
            match self.cached_or_searched(&key, &keywords, query.as_deref(), lexical, top_k, round)
            {
                Ok(found) => found,
                Err(e) if e.is_setup() => {
                    return Ok(Some(Finish {
                        status: RunStatus::Error,
                        reason: format!("{SEARCH_ERROR}: {e}"),
                        answer: None,
                    }));
                }
                Err(e) => {
                    self.reject(format!("search failed: {e}"), on_event);
                    return Ok(None);
                }
            };
        let reason = match cached_from {
            Some((t, r)) => {
                format!("{reason} (served from the session cache: turn {t}, round {r})")
            }
            None => reason,
        };
        self.searched.insert(key, round);
        self.keyword_sets_tried.push(keywords.clone());
        self.recorder.event(EventBody::Search(SearchRound {
            round,
            keywords: keywords.clone(),
            reason: reason.clone(),
            top_k,
            fusion: resp.fusion.to_string(),
            weights: resp.weights.as_ref().map(WeightsRecord::from),
            filters: self.filters(),
            legs: (resp.legs.iter())
                .map(|(name, leg)| (name.clone(), leg.into()))
                .collect(),
            hits: (resp.hits.iter())
                .map(|h| TracedHit::of(&h.hit, &h.content_hash))
                .collect(),
            sufficiency: (&resp.sufficiency).into(),
            repeated: false,
            cached: cached_from.map(|(_, r)| r),
            query: query.clone(),
            overrode_give_up,
        }))?;
        let hits: Vec<_> = resp.hits.into_iter().map(|h| h.hit).collect();
        let record = RoundRecord {
            round,
            keywords: keywords.clone(),
            reason,
            hits: hits.clone(),
            sufficiency: resp.sufficiency.clone(),
        };
        on_event(AgentEvent::Round(&record));
        self.rounds.push(record);
        let obs = Observation::Hits {
            round,
            keywords,
            hits,
            sufficiency: resp.sufficiency,
        };
        self.search_observations.push(obs.clone());
        self.observations.push(obs);
        Ok(None)
    }

    /// A keyword set this run already searched: traced as repeated, not searched again.
    fn repeated(
        &mut self,
        keywords: Vec<String>,
        reason: String,
        first_round: u32,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<(), AgentError> {
        on_event(AgentEvent::Repeated {
            keywords: &keywords,
        });
        self.recorder.event(EventBody::Search(SearchRound {
            round: first_round,
            keywords: keywords.clone(),
            reason,
            top_k: 0,
            fusion: String::new(),
            weights: None,
            filters: self.filters(),
            legs: Default::default(),
            hits: Vec::new(),
            sufficiency: Default::default(),
            repeated: true,
            cached: None,
            query: None,
            overrode_give_up: None,
        }))?;
        self.observations.push(Observation::Repeated {
            keywords,
            first_round,
        });
        Ok(())
    }

    /// The result of a search: the conversation's cached one when it ran the same keyword set
    /// under the same access context, top k and index; else a fresh search through the run's
    /// searcher, cached for the conversation's later turns. Either way the hits' chunks are
    /// kept for the planner and the citation checks.
    fn cached_or_searched(
        &mut self,
        key: &[String],
        keywords: &[String],
        query: Option<&str>,
        lexical: bool,
        top_k: u32,
        round: u32,
    ) -> Result<(RoundResult, CachedFrom), SearchError> {
        let settings = self.settings;
        let fusion = if lexical {
            crate::search::fusion::Fusion::Bm25Only
        } else {
            self.engine.settings.agent_fusion
        };
        let cache_key = format!(
            "{}|{}|{}|{}|{}|{}|{}",
            key.join("\u{1f}"),
            query.unwrap_or_default(),
            fusion,
            settings.access.tenant,
            settings.access.roles.join(","),
            top_k,
            self.index_fingerprint
        );
        let cached = settings
            .conversation
            .as_ref()
            .and_then(|c| c.lock().ok().and_then(|s| s.cached(&cache_key).cloned()));
        if let Some(c) = cached {
            let from = (c.turn, c.round);
            let result = c.result(fusion);
            self.lookup.remember_cached(&result.hits);
            return Ok((result, Some(from)));
        }
        let mut req =
            SearchRequest::new(keywords.to_vec(), top_k as usize, settings.access.clone());
        req.query = query.map(str::to_string);
        req.fusion = Some(fusion);
        let found = self.lookup.searcher.search(&req)?;
        self.lookup.remember(&found.hits);
        let result = RoundResult::from(found);
        if let Some(conv) = &settings.conversation
            && let Ok(mut s) = conv.lock()
        {
            s.remember(CachedSearch::new(cache_key, self.turn_no, round, &result));
        }
        Ok((result, None))
    }

    fn filters(&self) -> SearchFilters {
        SearchFilters {
            tenant: self.settings.access.tenant.clone(),
            roles: self.settings.access.roles.clone(),
            include_superseded: false,
        }
    }

    /// An answer: it finishes the run when its citations hold; refused, it is traced and
    /// observed, and the planner may try again.
    fn answer(
        &mut self,
        text: String,
        proposed: Vec<ProposedCitation>,
        on_event: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Result<Option<Finish>, AgentError> {
        let refused = self.refusals(&proposed);
        let cited = cite(&proposed, &self.rounds);
        if !refused.is_empty() {
            self.refused_any = true;
            // The same refused answer a second time: the planner is not correcting it (a small
            // model at low temperature repeats itself word for word), and every further turn
            // would only repeat it again. The run ends as it would when the turns run out.
            let again =
                (self.last_refused.as_ref()).is_some_and(|(t, c)| *t == text && *c == proposed);
            self.last_refused = Some((text.clone(), proposed.clone()));
            self.recorder.event(EventBody::Answer(AnswerEvent {
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
            if again {
                return Ok(Some(self.out_of_turns()));
            }
            self.observations
                .push(Observation::CitationsRefused { refused });
            return Ok(None);
        }
        let finish = self.grounded(RunStatus::Answered, "answered".to_string(), text, cited)?;
        Ok(Some(finish))
    }

    /// Records an answer or evidence whose citations all passed the checks, and finishes the
    /// run with it: the two share the event shape, the status tells them apart.
    fn grounded(
        &mut self,
        status: RunStatus,
        reason: String,
        text: String,
        cited: Vec<Citation>,
    ) -> Result<Finish, AgentError> {
        self.recorder.event(EventBody::Answer(AnswerEvent {
            text: text.clone(),
            citations: cited.clone(),
            grounded: true,
            refused: Vec::new(),
            unsourced: false,
        }))?;
        Ok(Finish {
            status,
            reason,
            answer: Some(FinalAnswer {
                text,
                citations: cited,
                unsourced: false,
            }),
        })
    }

    /// Why an answer's citations are refused, when the options require sources: a chunk not
    /// returned in this run, a quote not in its chunk, or no citation at all.
    fn refusals(&self, proposed: &[ProposedCitation]) -> Vec<RefusalReason> {
        if !self.options.require_source {
            return Vec::new();
        }
        let mut refused = citations::check(proposed, &self.lookup.returned);
        if proposed.is_empty() {
            refused.push(RefusalReason {
                chunk_id: String::new(),
                quote: String::new(),
                reason: "an answer must cite at least one chunk returned in this run".to_string(),
            });
        }
        refused
    }

    /// Passages given as evidence: the citations that pass the same checks as an answer's are
    /// kept (a forged one is dropped, never shown); with none left the run gives up. Recorded
    /// as an answer event with those citations; the run's status tells evidence from an answer.
    fn evidence(
        &mut self,
        reason: String,
        proposed: Vec<ProposedCitation>,
    ) -> Result<Finish, AgentError> {
        let refused = citations::check(&proposed, &self.lookup.returned);
        let kept: Vec<ProposedCitation> = proposed
            .into_iter()
            .filter(|c| {
                !refused
                    .iter()
                    .any(|r| r.chunk_id == c.chunk_id && r.quote == c.quote)
            })
            .collect();
        if kept.is_empty() {
            return Ok(Finish {
                status: RunStatus::InsufficientEvidence,
                reason,
                answer: None,
            });
        }
        let cited = cite(&kept, &self.rounds);
        let text = evidence_text(self.question, &cited);
        self.grounded(RunStatus::Evidence, reason, text, cited)
    }

    /// A conversational reply: it finishes the run, recorded as unsourced.
    fn reply(&mut self, text: String) -> Result<Finish, AgentError> {
        self.recorder.event(EventBody::Answer(AnswerEvent {
            text: text.clone(),
            citations: Vec::new(),
            grounded: false,
            refused: Vec::new(),
            unsourced: true,
        }))?;
        Ok(Finish {
            status: RunStatus::Answered,
            reason: "conversational".to_string(),
            answer: Some(FinalAnswer {
                text,
                citations: Vec::new(),
                unsourced: true,
            }),
        })
    }

    /// Whether a later round took `word` from the results: an earlier round's hit has it in
    /// its headings or its text (a heading, a system's name in a passage). Such a word is the
    /// documents', not the asker's, and is not listed among the words tried: the related
    /// sections already say where it came from.
    fn taken_from_results(&self, word: &str) -> bool {
        let Some(at) = (self.rounds.iter()).position(|r| r.keywords.iter().any(|k| k == word))
        else {
            return false;
        };
        // Punctuation aside: a name is searched without the brackets the passage writes
        // ("Return Authorisation RMA" from "Return Authorisation (RMA)").
        let word = words_only(word);
        let word = word.trim();
        self.rounds[..at].iter().flat_map(|r| &r.hits).any(|h| {
            let text = self
                .lookup
                .searcher
                .chunk(&h.chunk_id)
                .map(|(c, _)| c.text.as_str());
            [h.title_path.as_str(), text.unwrap_or(&h.snippet)]
                .iter()
                .any(|t| words_only(t).contains(word))
        })
    }

    /// Ends the run: its status and reason (`finish`, or why the turns ran out), the message
    /// the user is told when there is no grounded answer, and the trace's last events.
    pub(super) fn finish(mut self, finish: Option<Finish>) -> Result<AgentOutcome, AgentError> {
        let Finish {
            status,
            reason,
            answer,
        } = finish.unwrap_or_else(|| self.out_of_turns());
        let message = match status {
            RunStatus::Error => Some(error_message(self.question, &reason)),
            RunStatus::InsufficientEvidence => Some(insufficient_message(
                self.question,
                &reason,
                &self.rounds,
                &self.keyword_sets_tried,
                &|w| self.taken_from_results(w),
            )),
            _ => None,
        };
        if let Some(message) = &message
            && status == RunStatus::InsufficientEvidence
        {
            self.recorder.event(EventBody::Answer(AnswerEvent {
                text: message.clone(),
                citations: Vec::new(),
                grounded: false,
                refused: Vec::new(),
                unsourced: false,
            }))?;
        }
        let searches = self.rounds.len() as u32;
        let trace = match self.recorder.writer {
            Some(w) => Some(w.finish(status, reason.clone(), searches, searches)?),
            None => None,
        };
        if let (Some(observer), Some(events)) = (&self.settings.observer, &self.recorder.observed) {
            observer.run_finished(&ObservedRun {
                run_id: self.run_id,
                trace_file: (trace.as_ref())
                    .and_then(|t| t.path.file_name())
                    .map(|n| n.to_string_lossy().into_owned()),
                started: self.started,
                finished: SystemTime::now(),
                status,
                reason: &reason,
                events,
            });
        }
        Ok(AgentOutcome {
            run_id: self.run_id,
            status,
            reason,
            answer,
            message,
            rounds: self.rounds,
            keyword_sets_tried: self.keyword_sets_tried,
            proposed_facts: self.proposed_facts,
            model_calls: self.model_calls,
            planner: self.planner,
            model: self.model,
            trace,
        })
    }

    /// Why the run ended when no action finished it.
    fn out_of_turns(&self) -> Finish {
        let reason = if self.refused_any {
            "refused_citations"
        } else if self.rounds.len() as u32 >= self.options.max_search_rounds {
            "round_limit"
        } else {
            "turn_limit"
        };
        Finish {
            status: RunStatus::InsufficientEvidence,
            reason: reason.to_string(),
            answer: None,
        }
    }
}

/// The `memory_read` event of a planner's account of the asker's facts: the used ones copied
/// with their values from the memory the run was given (a key the memory lacks is dropped:
/// a planner cannot make a fact up), the others by key.
fn memory_read(memory: &[Fact], used: &MemoryUse) -> MemoryRead {
    let named = |keys: &[String], f: &Fact| keys.iter().any(|k| same_key(k, &f.key));
    MemoryRead {
        used: (memory.iter())
            .filter(|f| named(&used.used, f))
            .map(FactRecord::from)
            .collect(),
        searched: (memory.iter())
            .filter(|f| named(&used.searched, f))
            .map(FactRecord::from)
            .collect(),
        stated: (memory.iter())
            .filter(|f| named(&used.stated, f))
            .map(|f| f.key.clone())
            .collect(),
        unused: (memory.iter())
            .filter(|f| !named(&used.used, f) && !named(&used.stated, f))
            .map(|f| f.key.clone())
            .collect(),
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

/// The text of an evidence outcome, in the question's language: one plain sentence saying
/// that no passage states the answer outright, then the passages, best first, each quoted with
/// its citation number.
fn evidence_text(question: &str, cited: &[Citation]) -> String {
    let lang = Lang::of(question);
    let mut out = lang
        .pick(
            "No passage states the answer outright; these are the closest, best first:",
            "没有哪段原文直接写明答案；以下是最接近的段落，按相关程度排列：",
        )
        .to_string();
    for (i, c) in cited.iter().enumerate() {
        out.push_str(&format!("\n[{}] {} — “{}”", i + 1, c.title_path, c.quote));
    }
    out
}

/// What the user is told when the run failed: the cause, once, in the question's language
/// (the cause itself is the failing part's own words). No keywords or searches: a broken setup
/// says nothing about the knowledge base.
fn error_message(question: &str, reason: &str) -> String {
    let cause = error_cause(reason);
    match Lang::of(question) {
        Lang::Zh => format!("运行出错而停止：{cause}"),
        Lang::En => format!("The run stopped with an error: {cause}"),
    }
}

/// The cause of an error's reason: `search_error: X` and `planner_error: X` are X.
pub fn error_cause(reason: &str) -> &str {
    [SEARCH_ERROR, PLANNER_ERROR]
        .iter()
        .find_map(|code| reason.strip_prefix(code)?.strip_prefix(": "))
        .unwrap_or(reason)
}

/// The planner's account of a refusal (after its reason code, "no_relevant_hits: …") as the
/// asker may read it: without its closing stop, and only when it is written in the question's
/// language and does not speak of the model's tools. A small model answers a Chinese question's
/// refusal in English, or sends the loop's own instructions back as its reason ("Please call
/// searchDocs …"); the trace keeps those, the asker reads the rest of the message.
fn account_for_asker(reason: &str, lang: Lang) -> Option<&str> {
    let (_, why) = reason.split_once(": ")?;
    let why = why
        .trim()
        .trim_end_matches(['.', '。', '!', '！', ';', '；'])
        .trim_end();
    let speaks_of_tools = super::llm::tools::names_a_tool(why);
    (!why.is_empty() && Lang::of(why) == lang && !speaks_of_tools).then_some(why)
}

/// `text` lowercased, with every run of characters other than letters and digits (in any
/// script) written as one space.
fn words_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out
}

/// The sections a refused run came nearest to (at most this many are named, as related).
const RELATED_SECTIONS: usize = 3;

/// The user-facing explanation when there is no grounded answer, in the question's language:
/// that the knowledge base does not answer, why (the planner's account in the asker's words),
/// the words tried, and the nearest sections, named as related rather than as an answer.
fn insufficient_message(
    question: &str,
    reason: &str,
    rounds: &[RoundRecord],
    tried: &[Vec<String>],
    from_results: &dyn Fn(&str) -> bool,
) -> String {
    let lang = Lang::of(question);
    let mut out = lang
        .pick(
            "The knowledge base does not hold enough evidence to answer this question.",
            "知识库中没有足够的依据回答这个问题。",
        )
        .to_string();
    // A planner's own account ("no_relevant_hits: …"), written for the asker; a bare reason
    // code (round_limit) or a search's sufficiency figures are for traces, not for them.
    if let Some(why) = account_for_asker(reason, lang) {
        out.push_str(&match lang {
            Lang::Zh => format!("原因：{why}。"),
            Lang::En => format!(" Why: {why}."),
        });
    }
    if tried.is_empty() {
        out.push_str(lang.pick(" No search was run.", "未进行检索。"));
    } else {
        let mut words: Vec<&str> = Vec::new();
        for w in tried.iter().flatten() {
            if !words.contains(&w.as_str()) && !from_results(w) {
                words.push(w);
            }
        }
        out.push_str(&match lang {
            Lang::Zh => format!("已尝试的词：{}。", words.join("、")),
            Lang::En => format!(" Words tried: {}.", words.join(", ")),
        });
    }
    // The nearest sections, best-ranked first, each once: a place to look, not an answer.
    let mut related: Vec<&str> = Vec::new();
    for hit in rounds.iter().flat_map(|r| &r.hits) {
        if related.len() == RELATED_SECTIONS {
            break;
        }
        if !related.contains(&hit.title_path.as_str()) {
            related.push(&hit.title_path);
        }
    }
    if !related.is_empty() {
        out.push_str(&match lang {
            Lang::Zh => format!("相关章节（不是答案）：{}。", related.join("；")),
            Lang::En => format!(" Related sections (not an answer): {}.", related.join("; ")),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_in_a_passage_whatever_punctuation_either_writes() {
        let passage = words_only("We will email you a Return Authorisation (RMA) number.");
        assert!(passage.contains(words_only("Return Authorisation RMA").trim()));
        assert!(passage.contains(words_only("(RMA)").trim()));
        assert!(!passage.contains(words_only("Authorisation number").trim()));
        assert_eq!(
            words_only("填写FIN-07《费用超标说明单》"),
            "填写fin 07 费用超标说明单 "
        );
    }

    #[test]
    fn the_asker_reads_the_planners_account_only_in_their_language_and_never_the_loops_words() {
        let zh = "no_relevant_hits: 知识库中没有段落提到“洗衣服”";
        assert_eq!(
            account_for_asker(zh, Lang::Zh),
            Some("知识库中没有段落提到“洗衣服”")
        );
        // Qwen2.5-Coder-1.5B's reasons, met on laws-zh: English for a Chinese question, and the
        // loop's re-ask sent back.
        let en = "no_relevant_hits: No evidence found for the question.";
        assert_eq!(account_for_asker(en, Lang::Zh), None);
        assert_eq!(
            account_for_asker(en, Lang::En),
            Some("No evidence found for the question")
        );
        let parrot = "no_relevant_hits: The previous response was empty. Please call searchDocs \
                      and submitAnswer with passage numbers to answer the question.";
        assert_eq!(account_for_asker(parrot, Lang::En), None);
        assert_eq!(account_for_asker("no_relevant_hits: 。", Lang::Zh), None);
        assert_eq!(account_for_asker("round_limit", Lang::En), None);
    }
}
