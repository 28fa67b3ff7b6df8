//! Audit: which evidence produced the answer, and can it still be trusted. Never calls a model.

use std::collections::HashMap;

use serde::Serialize;

use crate::access::AccessContext;
use crate::engine::Engine;
use crate::trace::{EventBody, Integrity, RunStatus, TraceFile, run_started};

/// Where a cited chunk was returned.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Surfaced {
    pub round: u32,
    pub keywords: Vec<String>,
    /// 1-based position in that round's hits.
    pub rank: usize,
    pub score: f64,
    pub bm25_rank: Option<String>,
    pub vector_rank: Option<String>,
}

/// One citation of the answer and what can be said about it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationAudit {
    pub chunk_id: String,
    pub title_path: String,
    pub source_uri: String,
    pub quote: String,
    pub surfaced: Vec<Surfaced>,
    /// Whether the quote is in the chunk as it was when cited (`None`: cannot tell).
    pub quote_verified: Option<bool>,
    /// `unchanged`, `changed`, `gone`, or `not checked` (no store at hand).
    pub store_state: &'static str,
    pub recorded_hash: Option<String>,
    pub current_hash: Option<String>,
}

/// One search round, and whether its hits were used.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundAudit {
    pub round: u32,
    pub keywords: Vec<String>,
    pub reason: String,
    pub hits: usize,
    pub cited: bool,
    pub sufficient: bool,
}

/// The audit of one trace.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    pub run_id: String,
    pub question: String,
    pub today: String,
    pub planner: String,
    /// The access context the run was made under.
    pub access: AccessContext,
    pub status: String,
    pub reason: String,
    pub answer: Option<String>,
    pub integrity: Integrity,
    pub citations: Vec<CitationAudit>,
    pub rounds: Vec<RoundAudit>,
    /// Problems that make the audit exit 1.
    pub findings: Vec<String>,
    /// Worth knowing, not a problem (unused rounds, an insufficient-evidence answer).
    pub notes: Vec<String>,
}

impl AuditReport {
    /// 0 clean, 1 findings, 3 integrity failure.
    pub fn exit_code(&self) -> i32 {
        match self.integrity.verdict.exit_code() {
            3 => 3,
            1 => 1,
            _ if !self.findings.is_empty() => 1,
            _ => 0,
        }
    }
}

/// Text shown in place of evidence the auditor may not see.
pub const WITHHELD: &str = "[withheld: outside the auditor's access]";

/// The report for an auditor whose access differs from the run's: the trace's integrity (a
/// property of the file they hold) and nothing of its evidence, and the store is not consulted,
/// so neither the output nor the exit status depends on another context's chunks.
fn withheld(
    file: &TraceFile,
    integrity: Integrity,
    mismatch: &super::AccessMismatch,
) -> AuditReport {
    let started = run_started(file);
    AuditReport {
        run_id: file.run_id().map(|u| u.to_string()).unwrap_or_default(),
        question: WITHHELD.to_string(),
        today: started.map(|s| s.today.clone()).unwrap_or_default(),
        planner: started.map(|s| s.planner.clone()).unwrap_or_default(),
        access: mismatch.recorded.clone(),
        status: WITHHELD.to_string(),
        reason: WITHHELD.to_string(),
        answer: None,
        integrity,
        citations: Vec::new(),
        rounds: Vec::new(),
        findings: Vec::new(),
        notes: vec![format!("evidence withheld: {mismatch}")],
    }
}

/// Audits a trace that was read (`integrity` from [`crate::trace::check_integrity`]) for
/// `caller`. With an engine, each cited chunk is compared with the current store as `caller`
/// sees it. A run recorded under another access context shows its integrity only.
pub fn audit(
    file: &TraceFile,
    integrity: Integrity,
    engine: Option<&Engine>,
    caller: &AccessContext,
) -> AuditReport {
    if let Err(mismatch) = super::check_access(file, caller) {
        return withheld(file, integrity, &mismatch);
    }
    let started = run_started(file);
    let mut rounds = Vec::new();
    // chunk id -> (content hash, snippet) as recorded, and where it surfaced.
    let mut recorded: HashMap<&str, (&str, &str)> = HashMap::new();
    let mut surfaced: HashMap<&str, Vec<Surfaced>> = HashMap::new();
    for event in file.events() {
        if let EventBody::Search(s) = &event.body {
            if s.repeated {
                continue;
            }
            rounds.push(RoundAudit {
                round: s.round,
                keywords: s.keywords.clone(),
                reason: s.reason.clone(),
                hits: s.hits.len(),
                cited: false,
                sufficient: s.sufficiency.sufficient,
            });
            for (i, h) in s.hits.iter().enumerate() {
                recorded
                    .entry(h.hit.chunk_id.as_str())
                    .or_insert((h.content_hash.as_str(), h.hit.snippet.as_str()));
                surfaced
                    .entry(h.hit.chunk_id.as_str())
                    .or_default()
                    .push(Surfaced {
                        round: s.round,
                        keywords: s.keywords.clone(),
                        rank: i + 1,
                        score: h.hit.score,
                        bm25_rank: h.hit.metadata.get("bm25Rank").cloned(),
                        vector_rank: h.hit.metadata.get("vectorRank").cloned(),
                    });
            }
        }
    }
    let final_answer = file.events().filter_map(|e| match &e.body {
        EventBody::Answer(a) => Some(a),
        _ => None,
    });
    let final_answer = final_answer.last();
    let finished = file.events().find_map(|e| match &e.body {
        EventBody::RunFinished(f) => Some(f),
        _ => None,
    });
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    let mut citations = Vec::new();
    if let Some(answer) = final_answer.filter(|a| a.grounded) {
        for c in &answer.citations {
            let rec = recorded.get(c.chunk_id.as_str());
            let found = surfaced
                .get(c.chunk_id.as_str())
                .cloned()
                .unwrap_or_default();
            if found.is_empty() {
                findings.push(format!(
                    "citation {} was not returned by any search in this run",
                    c.chunk_id
                ));
            }
            for r in rounds.iter_mut() {
                if found.iter().any(|s| s.round == r.round) {
                    r.cited = true;
                }
            }
            let current = engine.and_then(|e| e.store().get_visible(&c.chunk_id, caller));
            let store_state = match (engine, current, rec) {
                (None, _, _) => "not checked",
                (Some(_), None, _) => "gone",
                (Some(_), Some(chunk), Some((hash, _))) if chunk.content_hash == *hash => {
                    "unchanged"
                }
                (Some(_), Some(_), _) => "changed",
            };
            let quote_verified = match (store_state, current, rec) {
                ("unchanged", Some(chunk), _) => {
                    Some(crate::text::quote_in_text(&c.quote, &chunk.text))
                }
                (_, _, Some((_, snippet))) if crate::text::quote_in_text(&c.quote, snippet) => {
                    Some(true)
                }
                _ => None,
            };
            match quote_verified {
                Some(false) => findings.push(format!("the quote cited from {} is not in that chunk", c.chunk_id)),
                None if store_state != "not checked" => notes.push(format!(
                    "the quote cited from {} cannot be checked: the chunk {store_state} since the run and the quote is not in the recorded snippet",
                    c.chunk_id
                )),
                _ => {}
            }
            if matches!(store_state, "changed" | "gone") {
                findings.push(format!(
                    "cited chunk {} ({}) {store_state} since the run",
                    c.chunk_id, c.title_path
                ));
            }
            citations.push(CitationAudit {
                chunk_id: c.chunk_id.clone(),
                title_path: c.title_path.clone(),
                source_uri: c.source_uri.clone(),
                quote: c.quote.clone(),
                surfaced: found,
                quote_verified,
                store_state,
                recorded_hash: rec.map(|r| r.0.to_string()),
                current_hash: current.map(|c| c.content_hash.clone()),
            });
        }
        for r in rounds.iter().filter(|r| !r.cited) {
            notes.push(format!(
                "round {} ([{}]) returned nothing that was cited",
                r.round,
                r.keywords.join(", ")
            ));
        }
    }
    let status = finished
        .map(|f| {
            serde_json::to_value(f.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        })
        .unwrap_or_else(|| "incomplete".to_string());
    match finished.map(|f| f.status) {
        Some(RunStatus::InsufficientEvidence) => {
            notes.push("the run ended with insufficient evidence: no grounded answer".to_string())
        }
        Some(RunStatus::Evidence) => notes
            .push("the run ended with evidence: cited passages to read, not an answer".to_string()),
        _ => {}
    }
    if finished.is_none() {
        findings.push("the run did not finish (no run_finished line)".to_string());
    }
    AuditReport {
        run_id: file.run_id().map(|u| u.to_string()).unwrap_or_default(),
        question: started.map(|s| s.question.clone()).unwrap_or_default(),
        today: started.map(|s| s.today.clone()).unwrap_or_default(),
        planner: started.map(|s| s.planner.clone()).unwrap_or_default(),
        access: started.map(|s| s.access.clone()).unwrap_or_default(),
        status,
        reason: finished.map(|f| f.reason.clone()).unwrap_or_default(),
        answer: final_answer.map(|a| a.text.clone()),
        integrity,
        citations,
        rounds,
        findings,
        notes,
    }
}
