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
    /// The text the run was shown (the recorded snippet).
    pub recorded_text: String,
    /// The chunk's text today (cut to [`DIFF_TEXT_CHARS`]); `None` when it is gone.
    pub current_text: Option<String>,
}

/// A hit that one side of a comparison has and the other lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffHit {
    pub chunk_id: String,
    pub title_path: String,
    /// 1-based position in the hit list it comes from.
    pub rank: usize,
    /// Its snippet on that side (recorded for a missing hit, today's for a new one).
    pub text: String,
}

/// A hit both sides have, at different ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    pub chunk_id: String,
    pub title_path: String,
    /// 1-based rank in the recorded hits, and today.
    pub from: usize,
    pub to: usize,
}

/// Where a chunk was found: the first round that returned it and its rank there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub round: u32,
    pub rank: usize,
}

/// One citation of the recorded answer: where the run found it, and where the replay does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationReplay {
    pub chunk_id: String,
    pub title_path: String,
    pub recorded: Option<Found>,
    /// `None`: no replayed round returns it.
    pub now: Option<Found>,
}

/// A configuration other than the recorded one, for a counterfactual replay: "what would the
/// run have been shown under this fusion, with this many hits?". Unset fields keep each
/// round's recorded value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReplayOptions {
    pub fusion: Option<crate::search::fusion::Fusion>,
    pub top_k: Option<usize>,
}

/// The configuration a counterfactual replay used, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counterfactual {
    /// The fusion every round was re-run with (e.g. `rrf`), when not the recorded one.
    pub fusion: Option<String>,
    pub top_k: Option<usize>,
}

/// Characters of a chunk's current text shown beside its recorded snippet.
pub const DIFF_TEXT_CHARS: usize = 240;

/// One replayed round.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundReplay {
    pub round: u32,
    pub keywords: Vec<String>,
    pub verdict: RoundVerdict,
    pub recorded: Vec<String>,
    pub current: Vec<String>,
    /// Recorded hits today's search no longer returns.
    pub missing: Vec<DiffHit>,
    /// Hits today's search returns that the run was not shown.
    pub new: Vec<DiffHit>,
    /// Hits both have, at another rank today.
    pub moved: Vec<Moved>,
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
    /// The knowledge base the run searched, and the one replayed against.
    pub recorded_knowledge_base: String,
    pub current_knowledge_base: String,
    /// Set for a counterfactual replay ([`ReplayOptions`]).
    pub counterfactual: Option<Counterfactual>,
    pub rounds: Vec<RoundReplay>,
    /// Each citation of the recorded answer: still found, and where.
    pub citations: Vec<CitationReplay>,
    /// Cited chunks whose content changed or that are gone.
    pub cited_drift: Vec<Drift>,
    pub reproduced: bool,
}

/// The recorded side of a hit: what [`drift_of`] compares with the store.
struct Recorded<'a> {
    chunk_id: &'a str,
    title_path: &'a str,
    hash: &'a str,
    snippet: &'a str,
}

fn drift_of(engine: &Engine, access: &AccessContext, rec: &Recorded<'_>) -> Option<Drift> {
    let current = engine.store().get_visible(rec.chunk_id, access);
    match current {
        Some(c) if c.content_hash == rec.hash => None,
        current => Some(Drift {
            chunk_id: rec.chunk_id.to_string(),
            title_path: rec.title_path.to_string(),
            state: if current.is_some() { "changed" } else { "gone" },
            recorded_hash: rec.hash.to_string(),
            current_hash: current.map(|c| c.content_hash.clone()),
            recorded_text: rec.snippet.to_string(),
            current_text: current
                .map(|c| crate::text::truncate_chars(&c.text, DIFF_TEXT_CHARS).to_string()),
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
    replay_with(engine, file, caller, &ReplayOptions::default())
}

/// [`replay`] under another configuration: every recorded keyword set is searched again with
/// `options`' fusion and topK, and the report says per round which hits were gained, lost or
/// moved, and per citation whether it is still found. The output depends only on the trace,
/// the index and the options, so two replays print the same.
pub fn replay_with(
    engine: &Engine,
    file: &TraceFile,
    caller: &AccessContext,
    options: &ReplayOptions,
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
        rounds.push(replay_round(engine, s, &access, options));
    }
    let mut cited_drift = Vec::new();
    let mut citations = Vec::new();

    let hashes: HashMap<&str, (&str, &str)> = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Search(s) => Some(s.hits.iter().map(|h| {
                (
                    h.hit.chunk_id.as_str(),
                    (h.content_hash.as_str(), h.hit.snippet.as_str()),
                )
            })),
            _ => None,
        })
        .flatten()
        .collect();
    for event in file.events() {
        if let EventBody::Answer(a) = &event.body
            && a.grounded
        {
            for c in &a.citations {
                citations.push(CitationReplay {
                    chunk_id: c.chunk_id.clone(),
                    title_path: c.title_path.clone(),
                    recorded: first_found(&rounds, |r| &r.recorded, &c.chunk_id),
                    now: first_found(&rounds, |r| &r.current, &c.chunk_id),
                });
                let Some((hash, snippet)) = hashes.get(c.chunk_id.as_str()) else {
                    continue;
                };
                let rec = Recorded {
                    chunk_id: &c.chunk_id,
                    title_path: &c.title_path,
                    hash,
                    snippet,
                };
                if let Some(d) = drift_of(engine, &access, &rec) {
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
        recorded_knowledge_base: started
            .map(|s| s.knowledge_base.clone())
            .unwrap_or_default(),
        current_knowledge_base: engine.knowledge_base_id().to_string(),
        counterfactual: (options.fusion.is_some() || options.top_k.is_some()).then(|| {
            Counterfactual {
                fusion: options.fusion.map(|f| f.to_string()),
                top_k: options.top_k,
            }
        }),
        rounds,
        citations,
        cited_drift,
        reproduced,
    })
}

fn replay_round(
    engine: &Engine,
    s: &SearchRound,
    caller: &AccessContext,
    options: &ReplayOptions,
) -> RoundReplay {
    let recorded: Vec<String> = s.hits.iter().map(|h| h.hit.chunk_id.clone()).collect();
    let mut drift: Vec<Drift> = s
        .hits
        .iter()
        .filter_map(|h| {
            let rec = Recorded {
                chunk_id: &h.hit.chunk_id,
                title_path: &h.hit.title_path,
                hash: &h.content_hash,
                snippet: &h.hit.snippet,
            };
            drift_of(engine, caller, &rec)
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
        let top_k = options.top_k.unwrap_or(s.top_k.max(1) as usize);
        let mut req = SearchRequest::new(s.keywords.clone(), top_k, access);
        req.include_superseded = s.filters.include_superseded;
        req.fusion = options.fusion.or_else(|| s.fusion.parse().ok());
        req.query = s.query.clone();
        match engine.search_docs(&req) {
            Ok(resp) => (resp.hits, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        }
    };
    let current_hits = current;
    let current: Vec<String> = current_hits.iter().map(|h| h.chunk_id.clone()).collect();
    let rec_set: HashSet<&String> = recorded.iter().collect();
    let cur_set: HashSet<&String> = current.iter().collect();
    let missing: Vec<DiffHit> = s
        .hits
        .iter()
        .enumerate()
        .filter(|(_, h)| !cur_set.contains(&h.hit.chunk_id))
        .map(|(i, h)| diff_hit(i, &h.hit.chunk_id, &h.hit.title_path, &h.hit.snippet))
        .collect();
    let new: Vec<DiffHit> = current_hits
        .iter()
        .enumerate()
        .filter(|(_, h)| !rec_set.contains(&h.chunk_id))
        .map(|(i, h)| diff_hit(i, &h.chunk_id, &h.title_path, &h.snippet))
        .collect();
    let moved: Vec<Moved> = s
        .hits
        .iter()
        .enumerate()
        .filter_map(|(from, h)| {
            let to = current.iter().position(|id| *id == h.hit.chunk_id)?;
            (to != from).then(|| Moved {
                chunk_id: h.hit.chunk_id.clone(),
                title_path: h.hit.title_path.clone(),
                from: from + 1,
                to: to + 1,
            })
        })
        .collect();
    // A changed chunk that today's search returns shows today's snippet for the same keywords,
    // which reads side by side with the recorded one better than the chunk's opening.
    for d in drift.iter_mut() {
        if let Some(h) = current_hits.iter().find(|h| h.chunk_id == d.chunk_id) {
            d.current_text = Some(h.snippet.clone());
        }
    }
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
        moved,
        drift,
        error,
    }
}

/// A recorded hit or today's, as a diff names it.
fn diff_hit(index: usize, chunk_id: &str, title_path: &str, snippet: &str) -> DiffHit {
    DiffHit {
        chunk_id: chunk_id.to_string(),
        title_path: title_path.to_string(),
        rank: index + 1,
        text: snippet.to_string(),
    }
}

/// The first round whose `ids` (recorded or current) hold `id`, and its rank there.
fn first_found(
    rounds: &[RoundReplay],
    ids: impl Fn(&RoundReplay) -> &Vec<String>,
    id: &str,
) -> Option<Found> {
    rounds.iter().find_map(|r| {
        ids(r).iter().position(|x| x == id).map(|i| Found {
            round: r.round,
            rank: i + 1,
        })
    })
}
