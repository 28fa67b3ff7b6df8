//! What a run knows of the conversation it belongs to: the earlier turns (the planner reads
//! them) and the searches already run in it (served again instead of re-run). The agent owns
//! this shape; `session` only keeps it on disk between turns.

use serde::{Deserialize, Serialize};

use crate::search::SearchResponse;
use crate::search::sufficiency::Sufficiency;
use crate::search::{LegStats, SearchHit};

/// Turns kept per session (older ones are dropped).
pub const MAX_TURNS: usize = 8;
/// Cached searches kept per session.
pub const MAX_CACHED: usize = 64;

/// One earlier turn, as the planner of a later turn sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PriorTurn {
    pub turn: u32,
    pub question: String,
    /// The grounded answer, or the insufficient-evidence message.
    pub answer: String,
    pub cited: Vec<String>,
    /// Keyword sets searched in that turn, in order.
    pub keywords: Vec<Vec<String>>,
    pub trace: Option<String>,
}

/// A search served again when the same keyword set is asked under the same access context and
/// index version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedSearch {
    pub key: String,
    pub turn: u32,
    pub round: u32,
    pub hits: Vec<SearchHit>,
    pub content_hashes: Vec<String>,
    pub sufficiency: Sufficiency,
    pub fusion: String,
    /// See [`SearchResponse::weights`] (absent in conversations saved before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<crate::search::fusion::FusionWeights>,
    pub legs: std::collections::BTreeMap<String, LegStats>,
}

impl CachedSearch {
    pub fn new(key: String, turn: u32, round: u32, resp: &SearchResponse) -> Self {
        Self {
            key,
            turn,
            round,
            hits: resp.hits.clone(),
            content_hashes: resp.content_hashes.clone(),
            sufficiency: resp.sufficiency.clone(),
            fusion: resp.fusion.to_string(),
            weights: resp.weights,
            legs: resp.legs.clone(),
        }
    }
}

/// A conversation's memory: its last turns and its search cache, both bounded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Conversation {
    pub turns: Vec<PriorTurn>,
    pub cache: Vec<CachedSearch>,
}

impl Conversation {
    /// Number the next turn gets (1-based).
    pub fn next_turn(&self) -> u32 {
        self.turns.last().map(|t| t.turn + 1).unwrap_or(1)
    }

    pub fn push_turn(&mut self, turn: PriorTurn) {
        self.turns.push(turn);
        if self.turns.len() > MAX_TURNS {
            let excess = self.turns.len() - MAX_TURNS;
            self.turns.drain(..excess);
        }
    }

    pub fn cached(&self, key: &str) -> Option<&CachedSearch> {
        self.cache.iter().find(|c| c.key == key)
    }

    pub fn remember(&mut self, entry: CachedSearch) {
        self.cache.retain(|c| c.key != entry.key);
        self.cache.push(entry);
        if self.cache.len() > MAX_CACHED {
            let excess = self.cache.len() - MAX_CACHED;
            self.cache.drain(..excess);
        }
    }
}
