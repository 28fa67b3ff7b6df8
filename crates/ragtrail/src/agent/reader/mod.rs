//! The reader mode (`--planner reader`): the offline planner searches, deterministic and in
//! milliseconds, and where it would finish, a chat model reads the passages found and writes
//! the answer in one call.
//!
//! The model sees the question and the hits shown compactly ([`passages`]): each chunk's two
//! or three sentences most about the question, numbered, about 2,000 characters in all. It
//! answers in the question's language citing passages by number, or says `NONE`. The loop maps
//! each number back to its chunk and quotes the shown sentence of it that shares the most words
//! with the answer; every quote is checked verbatim against its chunk, every figure the answer
//! writes in digits must be in the question or in the sentences it read of the passages it cites
//! (Chinese numerals and English number words read as digits), and at least half of the words the answer adds to the
//! question must be in those sentences (an answer restating the question is none). When the model says
//! none answers, writes something unusable, or cannot be reached, the run finishes as the
//! offline planner would have (its answer, its evidence or its refusal), except that once the
//! model has read the passages, an answer the offline planner would give is shown as evidence
//! (the same passages, no claim): an answer is then the model's checked answer. Never with a
//! claim these checks did not pass. What the
//! model replied goes to the trace (`llm_turn.reply`).

pub mod prompt;
pub mod reply;

use std::collections::HashSet;

use super::citations::{self, ReturnedTexts};
use super::numerals;
use super::offline::OfflinePlanner;
use super::passages::{self, Passage};
use super::planner::{
    EvidenceLookup, Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
    ProposedCitation, Usage,
};
use crate::llm::{ChatClient, ChatConfig, ChatMessage, LlmError};
use crate::text::{self, Lang, truncate_chars};
use reply::Read;

/// Tokens the model may write: an answer of a few sentences.
const MAX_REPLY_TOKENS: u32 = 320;

/// The evidence reason when the model's `NONE` turned the offline planner's answer into evidence.
pub const MODEL_FOUND_NONE: &str =
    "evidence: the model read the passages and found that none states the answer";

/// The evidence reason when the model's own answer was refused and the offline planner's answer
/// is shown as evidence.
pub const MODEL_DID_NOT_CONFIRM: &str =
    "evidence: the model's answer from the passages did not pass the checks";

/// Sampling temperature: the same passages should give the same answer.
const TEMPERATURE: f32 = 0.0;

/// The offline planner searching, a chat model writing the answer.
pub struct ReaderPlanner {
    offline: OfflinePlanner,
    client: ChatClient,
    /// Characters of passages shown (smaller when the model's context is small).
    passage_chars: usize,
    /// The offline planner's finishing action, once the model was asked: the run ends with it
    /// if the model's answer is refused after all.
    fallback: Option<PlannerAction>,
}

impl ReaderPlanner {
    /// Builds the client; nothing is sent until the offline planner would finish.
    pub fn new(config: &ChatConfig) -> Result<Self, LlmError> {
        let mut client = ChatClient::new(config)?;
        let reply_tokens = match config.context_tokens {
            Some(c) => MAX_REPLY_TOKENS.min(super::llm::context::reply_reserve(c)),
            None => MAX_REPLY_TOKENS,
        };
        client.set_max_reply_tokens(Some(reply_tokens));
        client.set_temperature(Some(TEMPERATURE));
        // Chinese counts about two tokens a character: the passages, the rules and the reply
        // must fit a small context.
        let passage_chars = match config.context_tokens {
            Some(c) => (c.saturating_sub(reply_tokens + 600) as usize / 2)
                .clamp(400, passages::PASSAGE_CHARS),
            None => passages::PASSAGE_CHARS,
        };
        Ok(Self {
            offline: OfflinePlanner::new(),
            client,
            passage_chars,
            fallback: None,
        })
    }

    /// Whether the model should read the passages before the run finishes with `action`.
    fn worth_reading(&self, ctx: &PlannerContext<'_>, step: &PlannerStep) -> bool {
        let finishing = match step.actions.as_slice() {
            [PlannerAction::Answer { .. } | PlannerAction::Evidence { .. }] => true,
            // A refusal because the question's subject is in no passage stands: the model
            // would only be tempted to answer from what is there.
            [PlannerAction::GiveUp { .. }] => !self.offline.subject_unknown(),
            _ => false,
        };
        // An answer decided by the asker's remembered facts is the offline planner's to give.
        let from_memory = step.memory.as_ref().is_some_and(|m| !m.used.is_empty());
        finishing && !from_memory && ctx.searches_done > 0
    }

    /// Asks the model; the step finishes with its checked answer, or with `fallback`.
    fn read(
        &mut self,
        ctx: &PlannerContext<'_>,
        mut step: PlannerStep,
    ) -> Result<PlannerStep, PlannerError> {
        let fallback = step.actions.first().cloned();
        let first: Vec<String> = match &fallback {
            Some(
                PlannerAction::Answer { citations, .. } | PlannerAction::Evidence { citations, .. },
            ) => citations.iter().map(|c| c.chunk_id.clone()).collect(),
            _ => Vec::new(),
        };
        let shown = passages::select(ctx, &first, self.passage_chars);
        if shown.is_empty() {
            return Ok(step);
        }
        let lang = Lang::of(ctx.question);
        let earlier = ctx.history.last().map(|t| t.question.as_str());
        let messages = vec![
            ChatMessage::System {
                content: prompt::system(lang).to_string(),
            },
            ChatMessage::User {
                content: prompt::user(lang, &passages::render(&shown), ctx.question, earlier),
            },
        ];
        self.client.start_budget();
        step.message_count = Some(messages.len() as u32);
        self.fallback = fallback;
        let reply = match self.client.complete(&messages, &serde_json::Value::Null) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("the reader's model call failed ({e}); the offline reply stands");
                step.model_reply = Some(format!("error: {e}"));
                return Ok(step);
            }
        };
        step.usage = reply.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        });
        step.retries = reply.retries;
        step.finish_reason = reply.message.finish_reason.clone();
        let text = reply.message.content.clone().unwrap_or_default();
        let read = reply::read(&text, shown.len());
        let says_none = read == Read::None;
        let verdict = match read {
            Read::Answer {
                text: answer,
                cited,
            } => checked(ctx, &shown, &answer, &cited),
            Read::None => Err("the model said no passage answers".to_string()),
            Read::Unusable(why) => Err(why),
        };
        step.model_reply = Some(text);
        // The model read the passages and did not confirm the offline planner's answer (it said
        // none states the answer, or wrote one the checks refused): that answer is shown as
        // evidence instead, the same passages with no claim. Once the model has read, an answer
        // is the model's checked answer; evidence or a refusal stands as it was.
        if verdict.is_err()
            && let [PlannerAction::Answer { citations, .. }] = step.actions.as_slice()
        {
            let reason = if says_none {
                MODEL_FOUND_NONE
            } else {
                MODEL_DID_NOT_CONFIRM
            };
            step.actions = vec![PlannerAction::Evidence {
                reason: reason.to_string(),
                citations: citations.clone(),
            }];
        }
        match verdict {
            Ok(action) => step.actions = vec![action],
            Err(why) => {
                tracing::debug!("the reader's answer is not used: {why}");
                step.model_note = Some(why);
            }
        }
        Ok(step)
    }
}

/// The chunks returned in this run, as the citation checks read them.
struct Returned<'a>(&'a dyn EvidenceLookup);

impl ReturnedTexts for Returned<'_> {
    fn text_of(&self, chunk_id: &str) -> Option<&str> {
        self.0.returned_chunk_text(chunk_id)
    }
}

/// The model's answer as an action, once every check passed; else why not.
fn checked(
    ctx: &PlannerContext<'_>,
    shown: &[Passage],
    answer: &str,
    cited: &[usize],
) -> Result<PlannerAction, String> {
    let bare = passages::strip_markers(answer);
    let mut proposed = Vec::new();
    for &n in cited {
        let passage = &shown[n - 1];
        let Some((sentence, _)) = passages::supporting_sentence(passage, &bare) else {
            return Err(format!("passage {n} shares no word with the answer"));
        };
        proposed.push(ProposedCitation {
            chunk_id: passage.chunk_id.clone(),
            quote: truncate_chars(sentence, citations::MAX_QUOTE_CHARS).to_string(),
        });
    }
    if let Some(r) = citations::check(&proposed, &Returned(ctx.lookup)).first() {
        return Err(format!("citation of {} refused: {}", r.chunk_id, r.reason));
    }
    // A figure the model did not read, in the question or the sentences of the passages it
    // cites (Chinese numerals and English number words read as digits), is its own.
    let mut known: HashSet<String> = numerals::figures(&numerals::arabic(ctx.question))
        .into_iter()
        .collect();
    for &n in cited {
        let p = &shown[n - 1];
        for s in std::iter::once(&p.title_path).chain(&p.sentences) {
            known.extend(numerals::figures(&numerals::arabic(
                &numerals::english_digits(s),
            )));
        }
    }
    let cited_figures = numerals::figures(&numerals::arabic(&bare));
    if let Some(f) = cited_figures.iter().find(|f| !known.contains(*f)) {
        return Err(format!("the answer's figure {f} is in no cited passage"));
    }
    // What the answer says beyond the question must come from what it cites: an answer
    // that only restates the question ("Yes, you can …") or adds words of its own is the
    // model's, not the passages'.
    let shown: Vec<&Passage> = cited.iter().map(|&n| &shown[n - 1]).collect();
    if let Some(why) = unsupported(ctx.question, &bare, &shown) {
        return Err(why);
    }
    Ok(PlannerAction::Answer {
        text: answer.to_string(),
        citations: proposed,
    })
}

/// Why an answer is not the cited passages' own, if it is not: it adds nothing to the
/// question, or fewer than half of the words it adds are in the passages it cites (their
/// shown sentences and titles: what the model read).
fn unsupported(question: &str, answer: &str, cited: &[&Passage]) -> Option<String> {
    let terms = |s: &str| text::terms(&numerals::arabic(s));
    let asked: HashSet<String> = terms(question).into_iter().map(|t| t.text).collect();
    let mut added: Vec<String> = terms(answer)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !asked.contains(t))
        .collect();
    added.sort();
    added.dedup();
    if added.is_empty() {
        return Some("the answer only restates the question".to_string());
    }
    let read: HashSet<String> = cited
        .iter()
        .flat_map(|p| {
            std::iter::once(p.title_path.as_str()).chain(p.sentences.iter().map(String::as_str))
        })
        .flat_map(|s| terms(&numerals::english_digits(s)))
        .map(|t| t.text)
        .collect();
    let found = added.iter().filter(|t| read.contains(*t)).count();
    (found * 2 < added.len()).then(|| {
        format!(
            "{found} of the {} words the answer adds to the question are in the passages it cites",
            added.len()
        )
    })
}

impl Planner for ReaderPlanner {
    fn kind(&self) -> &'static str {
        "reader"
    }

    fn model(&self) -> Option<String> {
        Some(self.client.model().to_string())
    }

    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        // The model's answer was refused after all: the offline reply stands.
        if let Some(fallback) = self.fallback.take()
            && observations
                .iter()
                .any(|o| matches!(o, Observation::CitationsRefused { .. }))
        {
            return Ok(PlannerStep {
                actions: vec![fallback],
                ..PlannerStep::default()
            });
        }
        let step = self.offline.next(ctx, observations)?;
        if self.worth_reading(ctx, &step) {
            return self.read(ctx, step);
        }
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(title: &str, sentences: &[&str]) -> Passage {
        Passage {
            chunk_id: "c1".into(),
            title_path: title.into(),
            sentences: sentences.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn an_answer_must_add_what_its_passages_say() {
        let receipts = passage(
            "FAQ / Receipts",
            &["You can attach receipts by clicking on the Add receipt button."],
        );
        let q = "Do I need to keep the paper slip for every purchase on a trip?";
        // It restates the question, with a "yes" the passage does not say.
        assert!(
            unsupported(
                q,
                "Yes, I need to keep the paper slip for every purchase on a trip.",
                &[&receipts]
            )
            .is_some()
        );
        assert_eq!(
            unsupported(
                q,
                "Do I need to keep the paper slip for every purchase on a trip",
                &[&receipts]
            )
            .as_deref(),
            Some("the answer only restates the question")
        );
        // Words of its own.
        let why = unsupported(
            q,
            "Yes, keep every slip for seven years in a binder.",
            &[&receipts],
        );
        assert!(why.is_some_and(|w| w.contains("words the answer adds")));
        // The passage's own words.
        assert_eq!(
            unsupported(
                q,
                "You attach receipts with the Add receipt button.",
                &[&receipts]
            ),
            None
        );
        // A figure in digits is found where the passage writes it in Chinese numerals.
        let notice = passage(
            "劳动合同法 / 解除",
            &["第三十七条 劳动者提前三十日以书面形式通知用人单位，可以解除劳动合同。"],
        );
        let q = "我不想干了，得提前多少天跟单位打招呼？";
        assert_eq!(unsupported(q, "30天。", &[&notice]), None);
        assert!(passages::supporting_sentence(&notice, "30天。").is_some());
        let leave = passage("Leave / 年假", &["员工每年享有十天年假，最多累计二十天。"]);
        assert_eq!(
            unsupported("年假有几天？", "员工每年享有十天年假。", &[&leave]),
            None
        );
        assert!(unsupported("年假有几天？", "年假有几天。", &[&leave]).is_some());
    }
}
