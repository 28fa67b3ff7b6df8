//! The planner of a `searchDocs` tool call: the outside agent already chose its keywords, so
//! this planner searches them once and stops. Running the call through the agent loop gives it
//! the same trace as an `ask` (run_started, the planner turn, the search round with every hit
//! and its content hash, run_finished, the ledger entry), so replay and audit read it as any
//! other run.

use ragtrail::{Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep};

/// How a direct search ends: the caller asked for hits, not for an answer.
pub const SEARCH_ONLY_REASON: &str = "search_only";

pub struct DirectSearch {
    keywords: Vec<String>,
    searched: bool,
    rejected: Option<String>,
}

impl DirectSearch {
    pub fn new(keywords: Vec<String>) -> Self {
        Self {
            keywords,
            searched: false,
            rejected: None,
        }
    }

    /// What the trace records as the run's question.
    pub fn question(keywords: &[String]) -> String {
        format!("searchDocs: {}", keywords.join(", "))
    }

    /// Why the loop refused the search (invalid keywords), if it did.
    pub fn rejected(&self) -> Option<&str> {
        self.rejected.as_deref()
    }
}

impl Planner for DirectSearch {
    fn kind(&self) -> &'static str {
        "direct"
    }

    fn next(
        &mut self,
        _ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let action = if self.searched {
            self.rejected = observations.iter().find_map(|o| match o {
                Observation::Rejected { message } => Some(message.clone()),
                _ => None,
            });
            PlannerAction::GiveUp {
                reason: SEARCH_ONLY_REASON.to_string(),
            }
        } else {
            self.searched = true;
            PlannerAction::Search {
                keywords: self.keywords.clone(),
                reason: "searchDocs tool call".to_string(),
                // The run's topK (the tool call's).
                top_k: None,
                // An agent's keywords are all there is: no question to embed.
                query: None,
                lexical: false,
            }
        };
        Ok(PlannerStep {
            actions: vec![action],
            ..Default::default()
        })
    }
}
