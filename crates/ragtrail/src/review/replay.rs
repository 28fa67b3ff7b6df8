//! Frozen replay: re-run every recorded `searchDocs` (same keywords, topK, fusion) under the
//! caller's access context against the current index and say, round by round, what changed.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::access::AccessContext;
use crate::engine::Engine;
use crate::search::SearchRequest;
use crate::trace::{EventBody, SearchRound, TraceFile, run_started};

use super::{AccessMismatch, check_access};

/// How a recorded hit list compares with today's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundVerdict {
    /// Same chunks in the same order, contents unchanged.
    Identical,
    /// Same chunks, different order.
    Reordered,
    /// Chunks appeared or disappeared, or their content changed.
    Differs,
}

/// A chunk whose content hash changed (or that is gone) since the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    pub chunk_id: String,
    pub title_path: String,
    /// `changed` or `gone`.
    pub state: &'static str,
    pub recorded_hash: String,
    pub current_hash: Option<String>,
}

/// One replayed round.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundReplay {
    pub round: u32,
    pub keywords: Vec<String>,
    pub verdict: RoundVerdict,
    pub recorded: Vec<String>,
    pub current: Vec<String>,
    pub missing: Vec<String>,
    pub new: Vec<String>,
    pub drift: Vec<Drift>,
    /// Set when the search could not be re-run.
    pub error: Option<String>,
}

/// The whole replay.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    pub run_id: String,
    pub question: String,
    pub today: String,
    pub access: AccessContext,
    pub rounds: Vec<RoundReplay>,
    /// Cited chunks whose content changed or that are gone.
    pub cited_drift: Vec<Drift>,
    pub reproduced: bool,
}

fn drift_of(
    engine: &Engine,
    access: &AccessContext,
    chunk_id: &str,
    title_path: &str,
    recorded_hash: &str,
) -> Option<Drift> {
    let current = engine
        .store()
        .get_visible(chunk_id, access)
        .map(|c| c.content_hash.clone());
    match current {
        Some(h) if h == recorded_hash => None,
        current => Some(Drift {
            chunk_id: chunk_id.to_string(),
            title_path: title_path.to_string(),
            state: if current.is_some() { "changed" } else { "gone" },
            recorded_hash: recorded_hash.to_string(),
            current_hash: current,
        }),
    }
}

/// Re-runs every recorded search under `caller`'s access context, which must be the one the
/// run was recorded under (a round recorded with other filters is narrowed to `caller`, or not
/// re-run when its tenant differs); every chunk is looked up under `caller` too.
pub fn replay(
    engine: &Engine,
    file: &TraceFile,
    caller: &AccessContext,
) -> Result<ReplayReport, AccessMismatch> {
    check_access(file, caller)?;
    let started = run_started(file);
    let access = caller.clone();
    let mut rounds = Vec::new();
    for event in file.events() {
        let EventBody::Search(s) = &event.body else {
            continue;
        };
        if s.repeated {
            continue;
        }
        rounds.push(replay_round(engine, s, &access));
    }
    let mut cited_drift = Vec::new();
    let hashes: HashMap<&str, &str> = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Search(s) => Some(
                s.hits
                    .iter()
                    .map(|h| (h.hit.chunk_id.as_str(), h.content_hash.as_str())),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    for event in file.events() {
        if let EventBody::Answer(a) = &event.body
            && a.grounded
        {
            for c in &a.citations {
                if let Some(d) = hashes
                    .get(c.chunk_id.as_str())
                    .and_then(|h| drift_of(engine, &access, &c.chunk_id, &c.title_path, h))
                {
                    cited_drift.push(d);
                }
            }
        }
    }
    let reproduced =
        cited_drift.is_empty() && rounds.iter().all(|r| r.verdict == RoundVerdict::Identical);
    Ok(ReplayReport {
        run_id: file.run_id().map(|u| u.to_string()).unwrap_or_default(),
        question: started.map(|s| s.question.clone()).unwrap_or_default(),
        today: started.map(|s| s.today.clone()).unwrap_or_default(),
        access,
        rounds,
        cited_drift,
        reproduced,
    })
}

fn replay_round(engine: &Engine, s: &SearchRound, caller: &AccessContext) -> RoundReplay {
    let recorded: Vec<String> = s.hits.iter().map(|h| h.hit.chunk_id.clone()).collect();
    let mut drift: Vec<Drift> = s
        .hits
        .iter()
        .filter_map(|h| {
            drift_of(
                engine,
                caller,
                &h.hit.chunk_id,
                &h.hit.title_path,
                &h.content_hash,
            )
        })
        .collect();
    // The round's own filters may only narrow the caller's context, never widen or move it.
    let (current, error) = if s.filters.tenant != caller.tenant {
        (
            Vec::new(),
            Some(format!(
                "not re-run: the round was recorded for tenant {}, not yours",
                s.filters.tenant
            )),
        )
    } else {
        let mut access = caller.clone();
        access.roles.retain(|r| s.filters.roles.contains(r));
        let mut req = SearchRequest::new(s.keywords.clone(), s.top_k.max(1) as usize, access);
        req.include_superseded = s.filters.include_superseded;
        req.fusion = s.fusion.parse().ok();
        req.query = s.query.clone();
        match engine.search_docs(&req) {
            Ok(resp) => (
                resp.hits
                    .iter()
                    .map(|h| h.chunk_id.clone())
                    .collect::<Vec<_>>(),
                None,
            ),
            Err(e) => (Vec::new(), Some(e.to_string())),
        }
    };
    let rec_set: HashSet<&String> = recorded.iter().collect();
    let cur_set: HashSet<&String> = current.iter().collect();
    let missing: Vec<String> = recorded
        .iter()
        .filter(|id| !cur_set.contains(id))
        .cloned()
        .collect();
    let new: Vec<String> = current
        .iter()
        .filter(|id| !rec_set.contains(id))
        .cloned()
        .collect();
    drift.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
    let verdict = if error.is_some() || !missing.is_empty() || !new.is_empty() || !drift.is_empty()
    {
        RoundVerdict::Differs
    } else if recorded != current {
        RoundVerdict::Reordered
    } else {
        RoundVerdict::Identical
    };
    RoundReplay {
        round: s.round,
        keywords: s.keywords.clone(),
        verdict,
        recorded,
        current,
        missing,
        new,
        drift,
        error,
    }
}
