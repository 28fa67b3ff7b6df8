//! Options of one agent run.

use serde::{Deserialize, Serialize};

/// Hard cap on hits per round, whatever the options or the model ask for.
pub const MAX_TOP_K_PER_ROUND: u32 = 20;

/// Hard cap on searches in one run.
pub const MAX_SEARCH_ROUNDS: u32 = 10;

/// `AgentRagOptions { maxSearchRounds, topKPerRound, requireSource }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRagOptions {
    /// Searches allowed in one run (capped at [`MAX_SEARCH_ROUNDS`]); after the last one the
    /// planner may only answer.
    pub max_search_rounds: u32,
    /// Hits per search (capped at [`MAX_TOP_K_PER_ROUND`]).
    pub top_k_per_round: u32,
    /// Refuse answers whose citations were not returned in this run or whose quotes are not in
    /// the cited chunk.
    pub require_source: bool,
}

impl Default for AgentRagOptions {
    fn default() -> Self {
        Self {
            max_search_rounds: 3,
            top_k_per_round: 5,
            require_source: true,
        }
    }
}

impl AgentRagOptions {
    /// The options with every value inside its bounds.
    pub fn clamped(self) -> Self {
        Self {
            max_search_rounds: self.max_search_rounds.clamp(1, MAX_SEARCH_ROUNDS),
            top_k_per_round: self.top_k_per_round.clamp(1, MAX_TOP_K_PER_ROUND),
            require_source: self.require_source,
        }
    }

    /// Planner turns allowed in one run: every search may be followed by a refused answer, plus
    /// the answer-only turn. Bounds the loop even for a planner that never searches or answers.
    pub fn max_planner_turns(&self) -> u32 {
        self.max_search_rounds * 2 + 2
    }
}
