//! Audit: which evidence produced the answer, and can it still be trusted. Never calls a model.

use std::collections::HashMap;

use serde::Serialize;

use crate::access::AccessContext;
use crate::embed::EmbedderInfo;
use crate::engine::Engine;
use crate::trace::{EarlierTurn, EventBody, Integrity, RunStatus, TraceFile, run_started};

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
    /// The chunk text the run was shown, from the kept versions, and today's against it.
    pub seen: SeenText,
}

/// The text a citation's chunk held when the run was shown it (the version with the recorded
/// content hash), and whether today's chunk still says it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenText {
    /// `kept` (the text is below), `pruned` (dropped by `ingest --keep-versions`), `not kept`
    /// (indexed before versions were kept, or not visible to the auditor), `not checked` (no
    /// store at hand).
    pub version: &'static str,
    /// The exact chunk text the run was shown.
    pub text: Option<String>,
    /// When that text was first indexed.
    pub first_indexed: Option<String>,
    /// When it was pruned.
    pub pruned_at: Option<String>,
    /// Today's chunk against it: `same`, `changed`, `deleted`, or `not checked`.
    pub today: &'static str,
    /// Today's text, when it changed.
    pub current_text: Option<String>,
    /// What changed, word by word: `[-removed-]{+added+}` (when both texts are known).
    pub diff: Option<String>,
}

/// [`SeenText`] of a citation: the kept version with `hash` and today's chunk, as `caller` sees
/// them. An error reading the versions is a note, never a failed audit.
fn seen_text(
    engine: Option<&Engine>,
    chunk_id: &str,
    hash: Option<&str>,
    caller: &AccessContext,
    notes: &mut Vec<String>,
) -> SeenText {
    let Some(engine) = engine else {
        return SeenText {
            version: "not checked",
            text: None,
            first_indexed: None,
            pruned_at: None,
            today: "not checked",
            current_text: None,
            diff: None,
        };
    };
    let versions = match engine.chunk_versions(chunk_id, caller) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!(
                "the kept versions of {chunk_id} could not be read: {e}"
            ));
            Vec::new()
        }
    };
    let version = hash.and_then(|h| versions.iter().find(|v| v.content_hash == h));
    let current = engine.store().get_visible(chunk_id, caller);
    let today = match (current, hash) {
        (None, _) => "deleted",
        (Some(c), Some(h)) if c.content_hash == h => "same",
        (Some(_), _) => "changed",
    };
    let text = version.and_then(|v| v.text.clone());
    let current_text = current
        .filter(|_| today == "changed")
        .map(|c| c.text.clone());
    let diff = match (&text, &current_text) {
        (Some(old), Some(new)) => Some(super::diff::word_diff(old, new)),
        _ => None,
    };
    SeenText {
        version: match version {
            Some(v) if v.text.is_some() => "kept",
            Some(_) => "pruned",
            None => "not kept",
        },
        text,
        first_indexed: version.map(|v| v.first_indexed.clone()),
        pruned_at: version.and_then(|v| v.pruned_at.clone()),
        today,
        current_text,
        diff,
    }
}

/// One hit of a round, as the planner was shown it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditHit {
    /// 1-based position in the round's hits.
    pub rank: usize,
    pub chunk_id: String,
    pub title_path: String,
    pub score: f64,
    pub snippet: String,
}

/// One search round, and whether its hits were used.
///
/// `searchDocs` judges each round on *its keywords* (`keyword_coverage`); the run's verdict
/// ([`AuditReport::decision`]) is the planner's, about *the question* over every hit so far.
/// They are different measures and may disagree (keywords the hits cover, a question word no
/// chunk mentions), so the round says which one it carries instead of a bare "sufficient".
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundAudit {
    pub round: u32,
    pub keywords: Vec<String>,
    pub reason: String,
    /// How many hits the round returned (`hit_list` holds them).
    pub hits: usize,
    pub cited: bool,
    /// Best single hit's IDF-weighted share of the round's keyword terms, 0..=1.
    pub keyword_coverage: f64,
    /// Whether that share met `searchDocs`' bar (about the keywords, not the question).
    pub keywords_sufficient: bool,
    pub hit_list: Vec<AuditHit>,
}

/// The run's verdict, from its `run_finished` line: the one place the audit's status line, its
/// round table's last row and its JSON take it from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `answered`, `insufficient_evidence`, `error`, or `incomplete` (no `run_finished`).
    pub status: String,
    /// The status for people (`insufficient evidence`).
    pub label: String,
    /// Whether the run found its evidence sufficient (it answered with citations).
    pub sufficient: bool,
    /// Why the run ended, as it recorded it (`no_relevant_hits: …`, `round_limit`, …).
    pub reason: String,
}

/// The audit of one trace.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// The trace file audited (set by the caller, which knows where it read it).
    pub trace: String,
    pub run_id: String,
    pub question: String,
    pub today: String,
    pub planner: String,
    /// The chat model of an LLM planner.
    pub model: Option<String>,
    /// The access context the run was made under.
    pub access: AccessContext,
    /// The knowledge base the run searched and its version then (`gen-N:COUNT`).
    pub knowledge_base: String,
    pub knowledge_version: String,
    pub embedder: EmbedderInfo,
    pub session_id: Option<String>,
    pub turn: Option<u32>,
    /// The conversation's earlier turns, as the planner was given them.
    pub earlier_turns: Vec<EarlierTurn>,
    /// Which of the asker's remembered facts the run searched with and used (its
    /// `memory_read` event); `None` when the run read no memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::trace::MemoryRead>,
    pub status: String,
    pub reason: String,
    /// The run's verdict; `status` and `reason` are its fields, kept for older readers.
    pub decision: Decision,
    pub answer: Option<String>,
    pub integrity: Integrity,
    pub citations: Vec<CitationAudit>,
    pub rounds: Vec<RoundAudit>,
    /// Problems that make the audit exit 1.
    pub findings: Vec<String>,
    /// Worth knowing, not a problem (unused rounds, an insufficient-evidence answer).
    pub notes: Vec<String>,
    /// The operator's signature on the run, when the audit was given public keys (see
    /// [`AuditReport::add_signature`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureAudit>,
}

/// What the run's signature says, from [`crate::trace::check_signature`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureAudit {
    /// `valid`, `invalid` (the trace or its ledger entry was rewritten after signing: exit 3),
    /// `unsigned` or `key not at hand` (findings), `not checked` (the run has no ledger entry).
    pub state: &'static str,
    pub detail: String,
}

impl AuditReport {
    /// Adds the run's signature as [`crate::trace::check_signature`] checked it with the
    /// operator's public keys: valid, invalid (an integrity failure: exit 3), unsigned (a
    /// finding: a hash chain alone can be rewritten by whoever can write the trace folder), or
    /// signed by a key not at hand (a finding: a retired key that is no longer trusted, or a
    /// key the auditor was not given — nothing says the run was altered).
    pub fn add_signature(&mut self, signed: &crate::trace::RunSignature) {
        use crate::trace::SignatureState;
        match signed.state {
            SignatureState::Unsigned => self.findings.push(format!(
                "the run is not signed, though a signing key was given: {}",
                signed.detail
            )),
            SignatureState::KeyNotAtHand => self.findings.push(format!(
                "the run was signed by a key not at hand ({}): neither the data directory's signing key, nor in its keyring, nor given with --public-key; its signature cannot be checked",
                signed.key_id.as_deref().unwrap_or("-")
            )),
            _ => {}
        }
        self.signature = Some(SignatureAudit {
            state: signed.state.name(),
            detail: signed.detail.clone(),
        });
    }

    /// 0 clean, 1 findings, 3 integrity failure (an invalid signature included).
    pub fn exit_code(&self) -> i32 {
        if self
            .signature
            .as_ref()
            .is_some_and(|s| s.state == "invalid")
        {
            return 3;
        }
        match self.integrity.verdict.exit_code() {
            3 => 3,
            1 => 1,
            _ if !self.findings.is_empty() => 1,
            _ => 0,
        }
    }

    /// The verdict in words, as `audit` ends with it: `clean`, `findings`, `integrity
    /// failure` or `integrity failure (invalid signature)`.
    pub fn result(&self) -> &'static str {
        match self.exit_code() {
            0 => "clean",
            1 => "findings",
            _ if self
                .signature
                .as_ref()
                .is_some_and(|s| s.state == "invalid") =>
            {
                "integrity failure (invalid signature)"
            }
            _ => "integrity failure",
        }
    }

    /// The report as JSON, with its `result` and `exitCode`: what `audit --json` prints and
    /// the server's audit answers, so both say the same verdict.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("result".into(), self.result().into());
            map.insert("exitCode".into(), self.exit_code().into());
        }
        value
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
        trace: String::new(),
        run_id: file.run_id().map(|u| u.to_string()).unwrap_or_default(),
        question: WITHHELD.to_string(),
        today: started.map(|s| s.today.clone()).unwrap_or_default(),
        planner: started.map(|s| s.planner.clone()).unwrap_or_default(),
        model: None,
        access: mismatch.recorded.clone(),
        knowledge_base: String::new(),
        knowledge_version: String::new(),
        embedder: EmbedderInfo::default(),
        session_id: None,
        turn: None,
        earlier_turns: Vec::new(),
        memory: None,
        status: WITHHELD.to_string(),
        reason: WITHHELD.to_string(),
        decision: Decision {
            status: WITHHELD.to_string(),
            label: WITHHELD.to_string(),
            sufficient: false,
            reason: WITHHELD.to_string(),
        },
        answer: None,
        integrity,
        citations: Vec::new(),
        rounds: Vec::new(),
        findings: Vec::new(),
        notes: vec![format!("evidence withheld: {mismatch}")],
        signature: None,
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
                keyword_coverage: s.sufficiency.coverage,
                keywords_sufficient: s.sufficiency.sufficient,
                hit_list: s
                    .hits
                    .iter()
                    .enumerate()
                    .map(|(i, h)| AuditHit {
                        rank: i + 1,
                        chunk_id: h.hit.chunk_id.clone(),
                        title_path: h.hit.title_path.clone(),
                        score: h.hit.score,
                        snippet: h.hit.snippet.clone(),
                    })
                    .collect(),
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
            let seen = seen_text(
                engine,
                &c.chunk_id,
                rec.map(|r| r.0).filter(|h| !h.is_empty()),
                caller,
                &mut notes,
            );
            let quote_verified = match (store_state, current, rec) {
                // The text the run was shown, kept: the quote is checked against exactly it.
                _ if seen.text.is_some() => seen
                    .text
                    .as_deref()
                    .map(|t| crate::text::quote_in_text(&c.quote, t)),
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
                let what = if store_state == "gone" {
                    "was deleted"
                } else {
                    "changed"
                };
                findings.push(format!(
                    "cited chunk {} ({}) {what} since the run",
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
                seen,
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
    let decision = decision(finished);
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
        trace: String::new(),
        run_id: file.run_id().map(|u| u.to_string()).unwrap_or_default(),
        question: started.map(|s| s.question.clone()).unwrap_or_default(),
        today: started.map(|s| s.today.clone()).unwrap_or_default(),
        planner: started.map(|s| s.planner.clone()).unwrap_or_default(),
        model: started.and_then(|s| s.model.clone()),
        access: started.map(|s| s.access.clone()).unwrap_or_default(),
        knowledge_base: started
            .map(|s| s.knowledge_base.clone())
            .unwrap_or_default(),
        knowledge_version: started
            .map(|s| s.index_fingerprint.clone())
            .unwrap_or_default(),
        embedder: started.map(|s| s.embedder.clone()).unwrap_or_default(),
        session_id: started.and_then(|s| s.session_id.clone()),
        turn: started.and_then(|s| s.turn),
        earlier_turns: started.map(|s| s.earlier_turns.clone()).unwrap_or_default(),
        memory: file.events().find_map(|e| match &e.body {
            crate::trace::EventBody::MemoryRead(m) => Some(m.clone()),
            _ => None,
        }),
        status: decision.status.clone(),
        reason: decision.reason.clone(),
        decision,
        answer: final_answer.map(|a| a.text.clone()),
        integrity,
        citations,
        rounds,
        findings,
        notes,
        signature: None,
    }
}

/// The run's verdict from its `run_finished` line (none: the run did not finish).
fn decision(finished: Option<&crate::trace::RunFinished>) -> Decision {
    match finished {
        Some(f) => Decision {
            status: f.status.name().to_string(),
            label: f.status.label().to_string(),
            // One arm per status, so a new outcome has to say whether it is an answer.
            sufficient: match f.status {
                RunStatus::Answered => true,
                // Passages to read are not an answer.
                RunStatus::Evidence
                | RunStatus::InsufficientEvidence
                | RunStatus::Error
                | RunStatus::Unknown => false,
            },
            reason: f.reason.clone(),
        },
        None => Decision {
            status: "incomplete".to_string(),
            label: "incomplete (the run did not finish)".to_string(),
            sufficient: false,
            reason: String::new(),
        },
    }
}
