//! What a run knows of the conversation it belongs to: the earlier turns (the planner reads
//! them) and the searches already run in it (served again instead of re-run). The agent owns
//! this shape; `session` only keeps it on disk between turns.

use serde::{Deserialize, Serialize};

use crate::search::fusion::{Fusion, FusionWeights};
use crate::search::sufficiency::Sufficiency;
use crate::search::{Found, LegStats, SearchHit};

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
    /// See [`crate::search::SearchResponse::weights`] (absent in conversations saved before it
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<crate::search::fusion::FusionWeights>,
    pub legs: std::collections::BTreeMap<String, LegStats>,
}

/// A hit as the planner saw it, with the content hash of its chunk when it was returned (what
/// the trace records of it).
#[derive(Debug, Clone, PartialEq)]
pub struct HashedHit {
    pub hit: SearchHit,
    pub content_hash: String,
}

/// A search round's result as a run keeps it (and a conversation caches it): each hit with
/// the content hash of its chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundResult {
    pub hits: Vec<HashedHit>,
    pub legs: std::collections::BTreeMap<String, LegStats>,
    pub fusion: Fusion,
    pub weights: Option<FusionWeights>,
    pub sufficiency: Sufficiency,
}

impl From<Found<'_>> for RoundResult {
    fn from(found: Found<'_>) -> Self {
        Self {
            hits: found
                .hits
                .into_iter()
                .map(|h| HashedHit {
                    content_hash: h.chunk.content_hash.clone(),
                    hit: h.hit,
                })
                .collect(),
            legs: found.legs,
            fusion: found.fusion,
            weights: found.weights,
            sufficiency: found.sufficiency,
        }
    }
}

impl CachedSearch {
    pub fn new(key: String, turn: u32, round: u32, result: &RoundResult) -> Self {
        Self {
            key,
            turn,
            round,
            hits: result.hits.iter().map(|h| h.hit.clone()).collect(),
            content_hashes: result.hits.iter().map(|h| h.content_hash.clone()).collect(),
            sufficiency: result.sufficiency.clone(),
            fusion: result.fusion.to_string(),
            weights: result.weights,
            legs: result.legs.clone(),
        }
    }

    /// The cached round as a run keeps it; `fusion` when the recorded one no longer parses.
    pub fn result(self, fusion: Fusion) -> RoundResult {
        RoundResult {
            hits: self
                .hits
                .into_iter()
                .zip(self.content_hashes)
                .map(|(hit, content_hash)| HashedHit { hit, content_hash })
                .collect(),
            legs: self.legs,
            fusion: self.fusion.parse().unwrap_or(fusion),
            weights: self.weights,
            sufficiency: self.sufficiency,
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
