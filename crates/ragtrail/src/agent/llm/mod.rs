//! The LLM planner: an OpenAI-compatible chat model chooses the keywords and writes the answer
//! through tool calls (see [`tools`]).
//!
//! The planner keeps the conversation, in the question's language (the system prompt and every
//! message it writes). Each turn it first answers the previous reply's tool calls — one `tool`
//! message per `tool_call_id`, in the order of the calls — then asks the model again. A search
//! is answered with its hits as numbered passages ([`messages::RoundMessage`]); the planner
//! keeps what it showed under each number, so an answer citing numbers becomes chunk ids and
//! verbatim quotes for the loop to check. The agent loop hands back one observation per action, in order; calls refused here
//! (unknown tool, unreadable arguments) are answered with their error and produce no action.
//!
//! - A reply with tool calls: each call becomes an action or an error (its text is kept in the
//!   history and becomes the reason of searches that give none).
//! - A reply with text but no tool call: an answer attempt without citations. Under
//!   `requireSource` the loop refuses it and the model is told to use `submitAnswer`.
//! - A reply with neither: no action; the model is told its reply was empty.
//!
//! Every turn reports the number of messages sent, the token usage and the retries, so the
//! `llm_turn` trace events are enough to replay a run without the model.

pub mod context;
pub mod messages;
pub mod prompt;
pub mod tools;

use std::collections::HashSet;

use serde_json::Value;

use super::keywords::KeywordError;
use super::passages::{self, Passage};
use super::planner::{
    MemoryUse, Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
    Usage,
};
use crate::llm::{ChatClient, ChatConfig, ChatMessage, LlmError, WireToolCall};
use crate::memory::same_key;
use crate::text::Lang;
use context::ContextBudget;
use messages::RoundMessage;

/// How the previous reply's parts are answered on the next turn.
#[derive(Debug, Clone, PartialEq)]
enum Pending {
    /// A tool call carried out by the loop: its observation is the answer.
    Call { id: String },
    /// A plain-text answer attempt: its observation goes back as a user message.
    Text,
    /// A tool call refused here: the error is the answer.
    Refused { id: String, error: String },
    /// An empty reply.
    Empty,
    /// A reply that only wrote a tool's call prefix as text (`functions.searchDocs:`).
    CallPrefix { tool: &'static str },
    /// An action the planner added itself (the end of a run whose model sent the same unusable
    /// call twice): its observation goes back as a user message.
    Own,
}

/// Plans with a chat model over an OpenAI-compatible endpoint.
pub struct LlmPlanner {
    client: ChatClient,
    tools: Value,
    messages: Vec<ChatMessage>,
    pending: Vec<Pending>,
    told_answer_only: bool,
    calls_named: u32,
    /// Set when the model's context size is known (`RAGTRAIL_LLM_CONTEXT_TOKENS`).
    context: Option<ContextBudget>,
    /// A give-up before any search was turned into a search of the question's words.
    overrode_give_up: bool,
    /// The call whose give-up was overridden, until it is answered.
    overridden_call: Option<String>,
    /// The question's language: the prompts and tool messages are written in it.
    lang: Lang,
    /// Every passage shown in this run; passage `n` is `shown[n - 1]`.
    shown: Vec<Passage>,
    /// The calls (name, arguments) of the last reply, when all of them were refused here.
    last_unusable: Option<Vec<(String, String)>>,
    /// Characters of passages shown per search (fewer when the model's context is small).
    passage_chars: usize,
    /// The notices the loop itself has sent this run (an empty reply, plain text, no searches
    /// left): keywords made only of their words echo the loop, not the question.
    notices: String,
}

/// Sampling temperature: low, so the same passages give much the same call, but not zero, so a
/// model told its call was refused does not simply send it again word for word.
const TEMPERATURE: f32 = 0.2;

/// Characters a passage's number and line breaks add to its block, beyond its title and text.
const NUMBER_CHARS: usize = 8;

/// Starts the reason of the search made instead of a give-up before any search.
pub const OVERRODE_GIVE_UP: &str = "the model gave up before any search";

/// The reason a run ends with when the model sent the same unusable calls twice: it was told
/// what was wrong and how to write them, and did not change them.
pub const UNUSABLE_TWICE: &str = "unusable_tool_calls: the model sent the same unusable tool calls again after being told how to fix them";

impl LlmPlanner {
    /// Builds the client; nothing is sent until the first turn.
    pub fn new(config: &ChatConfig) -> Result<Self, LlmError> {
        let mut client = ChatClient::new(config)?;
        client.set_max_reply_tokens(config.context_tokens.map(context::reply_reserve));
        client.set_temperature(Some(TEMPERATURE));
        // A Chinese character counts about two tokens: with a small context, each search shows
        // fewer characters, so that a few rounds still fit.
        let passage_chars = match config.context_tokens {
            Some(c) => (c as usize / 4).clamp(600, passages::PASSAGE_CHARS),
            None => passages::PASSAGE_CHARS,
        };
        Ok(Self {
            client,
            tools: tools::definitions(),
            messages: Vec::new(),
            pending: Vec::new(),
            told_answer_only: false,
            calls_named: 0,
            context: config.context_tokens.map(ContextBudget::new),
            overrode_give_up: false,
            overridden_call: None,
            lang: Lang::En,
            shown: Vec::new(),
            last_unusable: None,
            passage_chars,
            notices: String::new(),
        })
    }

    /// Adds a message carrying an observation; a search's passages are noted as trimmable
    /// evidence.
    fn push_observation(&mut self, message: ChatMessage, round: Option<RoundMessage>) {
        if let (Some(budget), Some(round)) = (&mut self.context, round) {
            budget.evidence_at(self.messages.len(), round);
        }
        self.messages.push(message);
    }

    /// The number a chunk was shown under, giving it the next one when it is new; its shown
    /// sentences are added to those it already had (a quote may be any of them).
    fn number(&mut self, passage: &Passage) -> usize {
        match self
            .shown
            .iter()
            .position(|p| p.chunk_id == passage.chunk_id)
        {
            Some(i) => {
                for s in &passage.sentences {
                    if !self.shown[i].sentences.contains(s) {
                        self.shown[i].sentences.push(s.clone());
                    }
                }
                i + 1
            }
            None => {
                self.shown.push(passage.clone());
                self.shown.len()
            }
        }
    }

    /// What the model reads for an observation: a search's numbered passages, or a refusal.
    fn observation_message(
        &mut self,
        ctx: &PlannerContext<'_>,
        obs: &Observation,
        left: u32,
    ) -> (String, Option<RoundMessage>) {
        let Observation::Hits {
            round,
            keywords,
            hits,
            sufficiency,
        } = obs
        else {
            let shown = &self.shown;
            let number_of = |id: &str| shown.iter().position(|p| p.chunk_id == id).map(|i| i + 1);
            return (
                messages::observation_text(self.lang, obs, left, &number_of),
                None,
            );
        };
        // The sentences most about the question and what this search looked for.
        let searched = keywords.join(" ");
        let weights = passages::term_weights(&[ctx.question, &searched], ctx.lookup);
        let list: Vec<(String, String)> = (hits.iter())
            .map(|h| (h.chunk_id.clone(), h.title_path.clone()))
            .collect();
        let budget = (self.passage_chars).saturating_sub(list.len() * NUMBER_CHARS);
        // Room left in a passage goes to its other sentences: a short chunk is shown whole.
        let picked = passages::pick(&list, &weights, ctx.lookup, budget, true);
        let blocks: Vec<(usize, String, String)> = picked
            .iter()
            .map(|p| {
                let n = self.number(p);
                (n, p.chunk_id.clone(), passages::block(n, p))
            })
            .collect();
        let message = RoundMessage::new(self.lang, *round, keywords, left, sufficiency, blocks);
        (message.render(message.passages()), Some(message))
    }

    /// The conversation so far (the system prompt first).
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Adds the answers to the previous reply: tool messages in call order, then user messages.
    fn answer_previous(&mut self, ctx: &PlannerContext<'_>, observations: &[Observation]) {
        let left = ctx.max_searches.saturating_sub(ctx.searches_done);
        let lang = self.lang;
        let pending = std::mem::take(&mut self.pending);
        let had_actions = pending
            .iter()
            .any(|p| matches!(p, Pending::Call { .. } | Pending::Text | Pending::Own));
        let mut observed = observations.iter();
        let mut tool_messages: Vec<(ChatMessage, Option<RoundMessage>)> = Vec::new();
        let mut user_messages: Vec<(ChatMessage, Option<RoundMessage>)> = Vec::new();
        for p in pending {
            match p {
                Pending::Call { id } => {
                    let (content, round) = match observed.next() {
                        Some(o) => {
                            let (mut text, round) = self.observation_message(ctx, o, left);
                            if self.overridden_call.as_deref() == Some(id.as_str()) {
                                text.push_str("\n\n");
                                text.push_str(
                                    &self.notice(prompt::give_up_overridden(lang).to_string()),
                                );
                            }
                            // A round with an instruction appended is sent as it is: trimming
                            // would drop the instruction.
                            let round = round
                                .filter(|_| self.overridden_call.as_deref() != Some(id.as_str()));
                            (text, round)
                        }
                        None => (messages::not_run(lang).to_string(), None),
                    };
                    tool_messages.push((
                        ChatMessage::Tool {
                            tool_call_id: id,
                            content,
                        },
                        round,
                    ));
                }
                Pending::Refused { id, error } => tool_messages.push((
                    ChatMessage::Tool {
                        tool_call_id: id,
                        content: error,
                    },
                    None,
                )),
                Pending::Text => {
                    let mut content = observed
                        .next()
                        .map(|o| self.observation_message(ctx, o, left).0)
                        .unwrap_or_default();
                    if !content.is_empty() {
                        content.push_str("\n\n");
                    }
                    content.push_str(&self.notice(prompt::use_submit_answer(lang).to_string()));
                    user_messages.push((ChatMessage::User { content }, None));
                }
                Pending::Empty => {
                    let content = self.notice(prompt::empty_reply(lang).to_string());
                    user_messages.push((ChatMessage::User { content }, None));
                }
                Pending::CallPrefix { tool } => {
                    let content = self.notice(prompt::bare_call_prefix(lang, tool));
                    user_messages.push((ChatMessage::User { content }, None));
                }
                Pending::Own => {
                    if let Some(o) = observed.next() {
                        let (content, round) = self.observation_message(ctx, o, left);
                        user_messages.push((ChatMessage::User { content }, round));
                    }
                }
            }
        }
        // Observations the loop added on its own (e.g. "neither a search nor an answer" after a
        // reply whose calls were all refused here) say nothing the errors above did not.
        if had_actions {
            for o in observed {
                let (content, round) = self.observation_message(ctx, o, left);
                user_messages.push((ChatMessage::User { content }, round));
            }
        }
        for (message, round) in tool_messages.into_iter().chain(user_messages) {
            self.push_observation(message, round);
        }
    }

    /// Records a notice of the loop's own, for telling an echo of it from the asker's words.
    /// Its example arguments (`{"keywords": ["年假", "结转"]}`) are left out: a model that
    /// follows an example may search those words for a question they fit.
    fn notice(&mut self, text: String) -> String {
        self.notices.push('\n');
        let mut depth = 0usize;
        for c in text.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ if depth == 0 => self.notices.push(c),
                _ => {}
            }
        }
        text
    }

    fn call_id(&mut self, given: Option<&str>, used: &mut HashSet<String>) -> String {
        if let Some(id) = given
            && used.insert(id.to_string())
        {
            return id.to_string();
        }
        loop {
            self.calls_named += 1;
            let id = format!("call_ragtrail_{}", self.calls_named);
            if used.insert(id.clone()) {
                return id;
            }
        }
    }
}

/// A search action with its keywords repaired by `repair`, which gives the new keywords and
/// what it did (added to the reason in the trace), or `None` to leave them. Other actions are
/// left as they are.
fn with_repaired_keywords(
    action: PlannerAction,
    repair: impl FnOnce(&[String]) -> Option<(Vec<String>, String)>,
) -> PlannerAction {
    let PlannerAction::Search {
        keywords,
        reason,
        top_k,
        query,
        lexical,
    } = action
    else {
        return action;
    };
    let (keywords, reason) = match repair(&keywords) {
        Some((repaired, what)) => (repaired, format!("{reason} [keywords repaired: {what}]")),
        None => (keywords, reason),
    };
    PlannerAction::Search {
        keywords,
        reason,
        top_k,
        query,
        lexical,
    }
}

/// A search whose keywords include sentences or questions (which the loop refuses) searches
/// their content words instead, the rarest first, as a search of the question's own words
/// would: a small model that writes its question as a keyword loses no turn. The reason in the
/// trace says so. Any other action, or keywords that are short terms, are left as they are.
fn keywords_of_sentences(action: PlannerAction, ctx: &PlannerContext<'_>) -> PlannerAction {
    let sentence = |k: &String| {
        matches!(
            crate::agent::validate_keywords(std::slice::from_ref(k)),
            Err(KeywordError::Sentence(_) | KeywordError::TooLong(_))
        )
    };
    with_repaired_keywords(action, |keywords| {
        let sentences: Vec<&String> = keywords.iter().filter(|k| sentence(k)).collect();
        if sentences.is_empty() {
            return None;
        }
        let mut terms: Vec<String> = Vec::new();
        for k in keywords {
            let words = if sentence(k) {
                crate::agent::question_search::question_keywords(k, &|t| ctx.lookup.doc_freq(t))
                    .unwrap_or_default()
            } else {
                vec![k.clone()]
            };
            for w in words {
                if !terms.contains(&w) {
                    terms.push(w);
                }
            }
        }
        terms.truncate(crate::agent::MAX_KEYWORDS);
        crate::agent::validate_keywords(&terms).is_ok().then(|| {
            (
                terms,
                format!("sentences {sentences:?} searched as their terms"),
            )
        })
    })
}

/// A search whose keywords only repeat the loop's own words is the model echoing the loop:
/// after "Your last reply was empty: it had neither a tool call nor text. Call searchDocs …"
/// Qwen2.5-Coder-1.5B searched `["last reply empty", "tool call", "searchDocs"]`. A keyword that
/// names a tool, or whose every word is in the loop's notices (`notices`) and none in the
/// question, is dropped; when none is left, the question's own words are searched. The reason
/// in the trace says so. Other actions and other keywords are left as they are.
fn keywords_echoing_the_loop(
    action: PlannerAction,
    ctx: &PlannerContext<'_>,
    notices: &str,
) -> PlannerAction {
    let echoes = |k: &String| tools::names_a_tool(k) || only_words_of(k, notices, ctx.question);
    with_repaired_keywords(action, |keywords| {
        let (echoed, kept): (Vec<String>, Vec<String>) = keywords.iter().cloned().partition(echoes);
        if echoed.is_empty() {
            return None;
        }
        let dropped = format!("the loop's own words {echoed:?} dropped");
        if !kept.is_empty() {
            return Some((kept, dropped));
        }
        let words = crate::agent::question_search::question_keywords(ctx.question, &|t| {
            ctx.lookup.doc_freq(t)
        });
        Some(match words {
            Some(words) => (
                words,
                format!("{dropped}; the question's own words searched instead"),
            ),
            None => (keywords.to_vec(), dropped),
        })
    })
}

/// Whether every word of `keyword` is in `notices` and none is in `question`. Chinese is not
/// split into words here: a keyword with Han characters must appear in the notices whole.
fn only_words_of(keyword: &str, notices: &str, question: &str) -> bool {
    if notices.is_empty() {
        return false;
    }
    if keyword.chars().any(crate::text::is_cjk) {
        return notices.contains(keyword.trim()) && !question.contains(keyword.trim());
    }
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (own, asked) = (words(notices), words(question));
    let keyword = words(keyword);
    !keyword.is_empty()
        && keyword.iter().all(|w| own.contains(w))
        && !keyword.iter().any(|w| asked.contains(w))
}

/// The account of the facts given to the model, for the `memory_read` event: the model saw
/// them all, so all count as used (a re-run gives it the same); the keys the question states
/// itself are named too (the prompt tells the model the question wins for those).
fn given_facts(ctx: &PlannerContext<'_>) -> MemoryUse {
    let stated = crate::memory::learn::facts_stated(ctx.question, ctx.today);
    MemoryUse {
        searched: Vec::new(),
        used: ctx.memory.iter().map(|f| f.key.clone()).collect(),
        stated: (ctx.memory.iter())
            .filter(|f| stated.iter().any(|(k, _)| same_key(k, &f.key)))
            .map(|f| f.key.clone())
            .collect(),
    }
}

impl Planner for LlmPlanner {
    fn kind(&self) -> &'static str {
        "llm"
    }

    fn model(&self) -> Option<String> {
        Some(self.client.model().to_string())
    }

    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let mut memory = None;
        if self.messages.is_empty() {
            self.client.start_budget();
            self.lang = Lang::of(ctx.question);
            let mut system = prompt::system_prompt(self.lang, ctx.today, ctx.max_searches);
            // The asker's remembered facts go with the rules: never trimmed like evidence.
            if let Some(facts) = prompt::remembered_facts(ctx.question, ctx.memory) {
                system.push_str("\n\n");
                system.push_str(&facts);
                memory = Some(given_facts(ctx));
            }
            self.messages.push(ChatMessage::System { content: system });
            // The conversation so far, so a follow-up ("需要提供什么证明？", "what about Paris?")
            // can be turned into standalone keywords.
            for turn in ctx.history.iter().rev().take(prompt::HISTORY_TURNS).rev() {
                self.messages.push(ChatMessage::User {
                    content: turn.question.clone(),
                });
                if let Some(budget) = &mut self.context {
                    budget.earlier_answer_at(self.messages.len());
                }
                self.messages.push(ChatMessage::Assistant {
                    content: Some(prompt::earlier_answer(self.lang, turn)),
                    tool_calls: Vec::new(),
                });
            }
            self.messages.push(ChatMessage::User {
                content: ctx.question.to_string(),
            });
        } else {
            self.answer_previous(ctx, observations);
        }
        if ctx.answer_only && !self.told_answer_only {
            self.told_answer_only = true;
            let content = self.notice(prompt::answer_now(
                self.lang,
                ctx.searches_done,
                ctx.max_searches,
            ));
            self.messages.push(ChatMessage::User { content });
        }
        let message_count = u32::try_from(self.messages.len()).unwrap_or(u32::MAX);
        let mut fit = self
            .context
            .as_mut()
            .map(|budget| budget.fit(&mut self.messages, &self.tools));
        let mut reply = self.client.complete(&self.messages, &self.tools);
        // The estimate is characters, the server counts its tokenizer's tokens: when it says
        // the prompt overflowed, count denser and trim again (twice at most).
        for _ in 0..2 {
            let Some(budget) = self.context.as_mut() else {
                break;
            };
            if !reply.as_ref().is_err_and(LlmError::is_context_overflow) {
                break;
            }
            budget.count_denser();
            let refit = budget.fit(&mut self.messages, &self.tools);
            tracing::warn!(
                "the chat endpoint counted the prompt as longer than its context; trimmed to about {} tokens and retried",
                refit.prompt_tokens_estimate
            );
            fit = Some(match fit {
                // One record for the call: what either fit trimmed, and the request as sent.
                Some(mut first) => {
                    first.trimmed_chunks.extend(refit.trimmed_chunks);
                    for r in refit.trimmed_rounds {
                        if !first.trimmed_rounds.contains(&r) {
                            first.trimmed_rounds.push(r);
                        }
                    }
                    first.trimmed_history_turns += refit.trimmed_history_turns;
                    first.trimmed_replies += refit.trimmed_replies;
                    first.prompt_tokens_estimate = refit.prompt_tokens_estimate;
                    first.over_budget = refit.over_budget;
                    first
                }
                None => refit,
            });
            reply = self.client.complete(&self.messages, &self.tools);
        }
        let reply = reply.map_err(|e| PlannerError::Failed(e.to_string()))?;
        if let (Some(budget), Some(usage)) = (&mut self.context, reply.usage) {
            budget.calibrate(usage.prompt_tokens);
        }
        let message = reply.message;
        let mut actions = Vec::new();
        let mut wire_calls = Vec::new();
        let mut used = HashSet::new();
        for call in &message.tool_calls {
            let id = self.call_id(call.id.as_deref(), &mut used);
            let parsed = tools::parse_call(
                &call.name,
                &call.arguments,
                message.content.as_deref(),
                &self.shown,
            );
            let parsed = parsed
                .map(|a| keywords_of_sentences(a, ctx))
                .map(|a| keywords_echoing_the_loop(a, ctx, &self.notices));
            match parsed {
                Ok(action) => {
                    actions.push(action);
                    self.pending.push(Pending::Call { id: id.clone() });
                }
                Err(e) => {
                    tracing::debug!("tool call refused: {e}");
                    self.pending.push(Pending::Refused {
                        id: id.clone(),
                        error: e.to_message(self.lang),
                    });
                }
            }
            wire_calls.push(WireToolCall::function(
                id,
                call.name.clone(),
                call.arguments.clone(),
            ));
        }
        // Calls all refused here, the same as the last reply's that were refused too: the model
        // was told what was wrong and sent them again. Re-asked once, not every turn left: the
        // run ends (or, before any search, searches the question's words, as below).
        let unusable = (!wire_calls.is_empty() && actions.is_empty()).then(|| {
            (message.tool_calls.iter())
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect::<Vec<_>>()
        });
        if unusable.is_some() && unusable == self.last_unusable {
            actions.push(PlannerAction::GiveUp {
                reason: UNUSABLE_TWICE.to_string(),
            });
            self.pending.push(Pending::Own);
        }
        self.last_unusable = unusable;
        // A give-up before any search is not accepted, once per run: the question's own words
        // are always worth one search. The call is answered with that search's hits.
        if ctx.searches_done == 0 && !self.overrode_give_up && ctx.max_searches > 0 {
            let searched_before = |i: usize| {
                actions[..i].iter().any(|a| {
                    matches!(a, PlannerAction::Search { keywords, .. } if crate::agent::validate_keywords(keywords).is_ok())
                })
            };
            if let Some(i) = actions
                .iter()
                .position(|a| matches!(a, PlannerAction::GiveUp { .. }))
                .filter(|i| !searched_before(*i))
                && let Some(keywords) =
                    crate::agent::question_search::question_keywords(ctx.question, &|t| {
                        ctx.lookup.doc_freq(t)
                    })
                && let PlannerAction::GiveUp { reason: why } = &actions[i]
            {
                let why = why.strip_prefix("no_relevant_hits").unwrap_or(why);
                let why = why.trim_start_matches(':').trim();
                let reason = format!(
                    "{OVERRODE_GIVE_UP} ({why}); the planner overrode it and searched the question's own words"
                );
                actions[i] = PlannerAction::Search {
                    keywords,
                    reason,
                    top_k: None,
                    query: None,
                    lexical: false,
                };
                self.overrode_give_up = true;
                self.overridden_call = self
                    .pending
                    .iter()
                    .filter_map(|p| match p {
                        Pending::Call { id } => Some(id.clone()),
                        _ => None,
                    })
                    .nth(i);
            }
        }
        if wire_calls.is_empty() {
            match &message.content {
                Some(text) => match tools::bare_call_prefix(text) {
                    // Nothing to act on: the model is told to make the call it began.
                    Some(tool) => self.pending.push(Pending::CallPrefix { tool }),
                    None => {
                        actions.push(tools::text_answer(text, &self.shown));
                        self.pending.push(Pending::Text);
                    }
                },
                None => self.pending.push(Pending::Empty),
            }
        }
        if message.content.is_some() || !wire_calls.is_empty() {
            if let Some(budget) = &mut self.context {
                budget.own_reply_at(self.messages.len());
            }
            self.messages.push(ChatMessage::Assistant {
                content: message.content.clone(),
                tool_calls: wire_calls,
            });
        }
        Ok(PlannerStep {
            actions,
            message_count: Some(message_count),
            usage: reply.usage.map(|u| Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            }),
            retries: reply.retries,
            context: fit,
            memory,
            finish_reason: message.finish_reason.clone(),
            ..PlannerStep::default()
        })
    }
}
