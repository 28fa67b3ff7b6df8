//! `replay --rerun` and `replay --live`: the recorded question planned again, by the planner the
//! caller hands (the offline planner for `--rerun`, the configured one for `--live`), on
//! today's index, under the caller's access and the run's recorded date, options and earlier
//! turns; then keywords, hits and answer compared round by round with the recorded run.
//!
//! With the offline planner it is deterministic: the planner and the search are, and nothing
//! random (the new run's id, times) enters the report. No trace is written unless the caller
//! hands trace settings.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::access::AccessContext;
use crate::agent::conversation::{Conversation, PriorTurn};
use crate::agent::{self, AgentError, AgentRagOptions, Planner, RunSettings, TraceSettings};
use crate::engine::Engine;
use crate::trace::{EventBody, RunStatus, TraceFile, run_started};

use super::{AccessMismatch, check_access};

#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    #[error(transparent)]
    Access(#[from] AccessMismatch),
    #[error("the trace has no run_started line: there is no recorded question to re-run")]
    NoQuestion,
    #[error("re-running the planner: {0}")]
    Agent(#[from] AgentError),
}

/// A hit one side has and the other lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RerunHit {
    pub chunk_id: String,
    pub title_path: String,
    /// 1-based rank on its side.
    pub rank: usize,
}

/// One round, recorded beside re-run (either side may have fewer rounds).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RerunRound {
    pub round: usize,
    pub recorded_keywords: Option<Vec<String>>,
    pub rerun_keywords: Option<Vec<String>>,
    pub keywords_same: bool,
    /// Chunk ids of each side's hits, in rank order.
    pub recorded_hits: Vec<String>,
    pub rerun_hits: Vec<String>,
    /// Hits the run had in this round and the re-run has not, and the other way round.
    pub lost: Vec<RerunHit>,
    pub gained: Vec<RerunHit>,
    pub hits_same: bool,
}

/// The comparison of the recorded run with the re-run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RerunReport {
    /// The planner that re-ran (`offline` for `--rerun`).
    pub planner: String,
    /// The planner that made the run.
    pub recorded_planner: String,
    /// Said when the re-run differs in kind from the run (another planner, earlier turns
    /// without their keywords).
    pub notes: Vec<String>,
    pub rounds: Vec<RerunRound>,
    /// `incomplete` when the trace has no `run_finished` line.
    pub recorded_status: String,
    pub rerun_status: String,
    /// The same two statuses, typed (`None`: incomplete), for renderers that label them.
    #[serde(skip)]
    pub recorded_run_status: Option<RunStatus>,
    #[serde(skip)]
    pub rerun_run_status: RunStatus,
    /// The answer text, or the message without one.
    pub recorded_answer: Option<String>,
    pub rerun_answer: Option<String>,
    pub recorded_citations: Vec<String>,
    pub rerun_citations: Vec<String>,
    pub answer_same: bool,
    /// Every round, the status and the answer are the same.
    pub same: bool,
    /// The re-run's trace, when one was asked for.
    pub trace: Option<String>,
}

/// Re-runs `file`'s question with `planner` on `engine` for `caller` (who must be the run's
/// access context), writing a trace only with `trace`.
pub fn rerun(
    engine: &Engine,
    file: &TraceFile,
    caller: &AccessContext,
    planner: &mut dyn Planner,
    trace: Option<TraceSettings>,
) -> Result<RerunReport, RerunError> {
    check_access(file, caller)?;
    let started = run_started(file).ok_or(RerunError::NoQuestion)?;
    let options: AgentRagOptions =
        serde_json::from_value(started.options.clone()).unwrap_or_default();
    let mut notes = Vec::new();
    let kind = planner.kind().to_string();
    if started.planner != kind {
        notes.push(format!(
            "the run was planned by the {} planner{}; {}, so the {kind} planner plans the re-run",
            if started.planner.is_empty() {
                "unrecorded"
            } else {
                &started.planner
            },
            started
                .model
                .as_deref()
                .map(|m| format!(" (model {m})"))
                .unwrap_or_default(),
            if started.planner == "offline" {
                "it is re-run with another planner"
            } else {
                "a model's plan cannot be reproduced"
            }
        ));
    }
    // Earlier turns as the planner was given them (their keywords were not recorded).
    let conversation = (!started.earlier_turns.is_empty()).then(|| {
        notes.push(format!(
            "re-run as turn {} of its conversation, with the {} earlier turns the trace records",
            started.turn.unwrap_or(0),
            started.earlier_turns.len()
        ));
        let mut c = Conversation::default();
        for t in &started.earlier_turns {
            c.push_turn(PriorTurn {
                turn: t.turn,
                question: t.question.clone(),
                answer: t.answer.clone(),
                trace: t.trace.clone(),
                ..PriorTurn::default()
            });
        }
        Arc::new(Mutex::new(c))
    });
    let settings = RunSettings {
        options,
        access: caller.clone(),
        today: started.today.clone(),
        trace,
        session: started.session_id.clone().zip(started.turn),
        conversation,
        // The facts the run used, as recorded: today's memory may have changed or be gone.
        memory: recorded_facts(file),
        observer: None,
    };
    let outcome = agent::run(engine, planner, &started.question, &settings, &mut |_| {})?;

    let recorded: Vec<Side> = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Search(s) => Some((
                s.keywords.clone(),
                s.hits
                    .iter()
                    .map(|h| (h.hit.chunk_id.clone(), h.hit.title_path.clone()))
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    let rerun: Vec<Side> = outcome
        .rounds
        .iter()
        .map(|r| {
            (
                r.keywords.clone(),
                r.hits
                    .iter()
                    .map(|h| (h.chunk_id.clone(), h.title_path.clone()))
                    .collect(),
            )
        })
        .collect();
    let rounds: Vec<RerunRound> = (0..recorded.len().max(rerun.len()))
        .map(|i| compare_round(i + 1, recorded.get(i), rerun.get(i)))
        .collect();

    let finished = file.events().find_map(|e| match &e.body {
        EventBody::RunFinished(f) => Some(f),
        _ => None,
    });
    let recorded_run_status = finished.map(|f| f.status);
    let recorded_status = recorded_run_status.map_or("incomplete", |s| s.name());
    let last_answer = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a),
            _ => None,
        })
        .last();
    // A run without a grounded answer records its message as an ungrounded answer.
    let recorded_answer = last_answer.map(|a| a.text.clone());
    let recorded_citations: Vec<String> = last_answer
        .filter(|a| a.grounded)
        .map(|a| a.citations.iter().map(|c| c.chunk_id.clone()).collect())
        .unwrap_or_default();
    let rerun_answer = outcome
        .answer
        .as_ref()
        .map(|a| a.text.clone())
        .or_else(|| outcome.message.clone());
    let rerun_citations: Vec<String> = outcome
        .answer
        .as_ref()
        .map(|a| a.citations.iter().map(|c| c.chunk_id.clone()).collect())
        .unwrap_or_default();
    let rerun_status = outcome.status.name();
    let answer_same = recorded_answer == rerun_answer && recorded_citations == rerun_citations;
    let same = answer_same
        && recorded_status == rerun_status
        && rounds.iter().all(|r| r.keywords_same && r.hits_same);
    Ok(RerunReport {
        planner: kind,
        recorded_planner: started.planner.clone(),
        notes,
        rounds,
        recorded_status: recorded_status.to_string(),
        rerun_status: rerun_status.to_string(),
        recorded_run_status,
        rerun_run_status: outcome.status,
        recorded_answer,
        rerun_answer,
        recorded_citations,
        rerun_citations,
        answer_same,
        same,
        trace: outcome.trace.map(|t| t.path.display().to_string()),
    })
}

/// One side of a round: its keywords, and its hits as (chunk id, titlePath) in rank order.
type Side = (Vec<String>, Vec<(String, String)>);

fn compare_round(round: usize, recorded: Option<&Side>, rerun: Option<&Side>) -> RerunRound {
    let ids = |side: Option<&Side>| -> Vec<String> {
        side.map(|s| s.1.iter().map(|h| h.0.clone()).collect())
            .unwrap_or_default()
    };
    let only_in = |a: Option<&Side>, b: Option<&Side>| -> Vec<RerunHit> {
        let other: HashSet<&str> = b
            .map(|s| s.1.iter().map(|h| h.0.as_str()).collect())
            .unwrap_or_default();
        a.map(|s| {
            s.1.iter()
                .enumerate()
                .filter(|(_, h)| !other.contains(h.0.as_str()))
                .map(|(i, h)| RerunHit {
                    chunk_id: h.0.clone(),
                    title_path: h.1.clone(),
                    rank: i + 1,
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let recorded_hits = ids(recorded);
    let rerun_hits = ids(rerun);
    RerunRound {
        round,
        recorded_keywords: recorded.map(|s| s.0.clone()),
        rerun_keywords: rerun.map(|s| s.0.clone()),
        keywords_same: recorded.map(|s| &s.0) == rerun.map(|s| &s.0),
        hits_same: recorded.is_some() && rerun.is_some() && recorded_hits == rerun_hits,
        lost: only_in(recorded, rerun),
        gained: only_in(rerun, recorded),
        recorded_hits,
        rerun_hits,
    }
}

/// The remembered facts a recorded run used or searched (its `memory_read` event), as the
/// memory held them then.
pub fn recorded_facts(file: &TraceFile) -> Vec<crate::memory::Fact> {
    let mut facts: Vec<crate::memory::Fact> = Vec::new();
    for e in file.events() {
        if let EventBody::MemoryRead(m) = &e.body {
            // The searched ones first, in the order they were searched.
            for record in m.searched.iter().chain(&m.used) {
                if !facts.iter().any(|f| f.key == record.key) {
                    facts.push(record.into());
                }
            }
        }
    }
    facts
}

/// What the asker's memory today would do to a recorded run (`replay --rerun`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryToday {
    /// How today's facts differ from those the run recorded ("base city: 成都 → forgotten").
    pub changes: Vec<String>,
    /// The answer (or message) the offline planner gives with today's facts.
    pub answer: Option<String>,
    /// It is the recorded answer.
    pub answer_same: bool,
}

/// When the asker's facts `today` differ from those `file` recorded (a fact changed or
/// forgotten since, or one the run did not have), the question planned again by the offline
/// planner with today's facts, no trace written; `None` when they are the same.
pub fn memory_today(
    engine: &Engine,
    file: &TraceFile,
    caller: &AccessContext,
    today: &[crate::memory::Fact],
) -> Result<Option<MemoryToday>, RerunError> {
    use crate::memory::same_key;
    check_access(file, caller)?;
    let started = run_started(file).ok_or(RerunError::NoQuestion)?;
    let recorded = recorded_facts(file);
    // Keys the run knew of without their values (stated by the question, not bearing).
    let named: Vec<String> = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::MemoryRead(m) => Some(m.stated.iter().chain(&m.unused).cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut changes = Vec::new();
    for r in &recorded {
        match today.iter().find(|f| same_key(&f.key, &r.key)) {
            Some(f) if f.value == r.value => {}
            Some(f) => changes.push(format!("{}: {} → {}", r.key, r.value, f.value)),
            None => changes.push(format!("{}: {} → forgotten", r.key, r.value)),
        }
    }
    for f in today {
        let known = recorded.iter().any(|r| same_key(&r.key, &f.key))
            || named.iter().any(|k| same_key(k, &f.key));
        if !known {
            changes.push(format!("{}: new, {}", f.key, f.value));
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let options: AgentRagOptions =
        serde_json::from_value(started.options.clone()).unwrap_or_default();
    let mut settings = RunSettings::new(options, caller.clone(), started.today.clone());
    settings.memory = today.to_vec();
    let mut planner = agent::offline::OfflinePlanner::new();
    let outcome = agent::run(
        engine,
        &mut planner,
        &started.question,
        &settings,
        &mut |_| {},
    )?;
    let answer = outcome
        .answer
        .as_ref()
        .map(|a| a.text.clone())
        .or(outcome.message);
    let recorded_answer = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.text.clone()),
            _ => None,
        })
        .last();
    Ok(Some(MemoryToday {
        changes,
        answer_same: answer == recorded_answer,
        answer,
    }))
}
