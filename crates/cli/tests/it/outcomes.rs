//! The three outcomes of a run on the bundled knowledge (#19): everyday wording is answered or
//! shown as evidence from the section that answers it, function words never cause a refusal,
//! the vector leg is sent the question, and a run that ends with evidence leaves a trace that
//! verifies, audits and replays.

use ragtrail::access::AccessContext;
use std::path::{Path, PathBuf};

use crate::common::*;
use ragtrail::agent::offline::OfflinePlanner;
use ragtrail::agent::{
    self, Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
    ProposedCitation,
};
use ragtrail::engine::Engine;
use ragtrail::review::audit::audit;
use ragtrail::review::replay::replay;
use ragtrail::trace::{self, EventBody, RunStatus, Verdict, check_integrity};

/// A copy of the bundled knowledge, ingested.
fn bundled() -> (Workspace, Engine) {
    let ws = Workspace::new();
    copy_dir(&repo_root().join("knowledge"), &ws.knowledge());
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    (ws, engine)
}

fn copy_dir(from: &Path, to: &Path) {
    let mut stack: Vec<PathBuf> = vec![from.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let dest = to.join(path.strip_prefix(from).expect("prefix"));
            std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
            std::fs::copy(&path, dest).expect("copy");
        }
    }
}

const PATERNITY_SECTION: &str = "陪产假";

fn cites_paternity_section(outcome: &agent::AgentOutcome) -> bool {
    outcome.answer.as_ref().is_some_and(|a| {
        a.citations.iter().any(|c| {
            c.title_path
                .rsplit(" / ")
                .next()
                .is_some_and(|leaf| leaf == PATERNITY_SECTION)
        })
    })
}

#[test]
fn the_paraphrased_paternity_leave_question_is_answered_or_shown_as_evidence_from_its_section() {
    let (ws, engine) = bundled();
    // 老婆 and 孩子 are everyday words the handbook never uses (it says 配偶, 子女).
    let outcome = ws.ask(
        &engine,
        &mut OfflinePlanner::new(),
        "老婆生孩子，我能休几天陪产假？",
    );
    assert!(
        matches!(outcome.status, RunStatus::Answered | RunStatus::Evidence),
        "{:?}: {:?}",
        outcome.reason,
        outcome.message
    );
    assert!(cites_paternity_section(&outcome), "{:?}", outcome.answer);
}

#[test]
fn function_words_never_cause_a_refusal() {
    let (ws, engine) = bundled();
    // Each question asks what the plain one asks, with 去, 谁 or 来 (words the handbook does
    // not need) added the way people speak.
    for question in [
        "陪产假有几天？",
        "我去休陪产假，能休几天？",
        "陪产假谁来批？能休几天？",
    ] {
        let outcome = ws.ask(&engine, &mut OfflinePlanner::new(), question);
        assert_ne!(
            outcome.status,
            RunStatus::InsufficientEvidence,
            "{question}: {:?}",
            outcome.message
        );
        assert!(
            cites_paternity_section(&outcome),
            "{question}: {:?}",
            outcome.answer
        );
    }
}

#[test]
fn the_insufficient_evidence_message_is_in_the_question_s_language() {
    let (ws, engine) = bundled();
    let zh = ws.ask(
        &engine,
        &mut OfflinePlanner::new(),
        "公司食堂的火锅底料是什么牌子？",
    );
    assert_eq!(
        zh.status,
        RunStatus::InsufficientEvidence,
        "{:?}",
        zh.answer
    );
    let message = zh.message.expect("message");
    assert!(message.starts_with("知识库中没有足够的依据"), "{message}");
    assert!(message.contains("已尝试的关键词"), "{message}");
    let en = ws.ask(
        &engine,
        &mut OfflinePlanner::new(),
        "Which brand of hotpot base does the canteen use?",
    );
    assert_eq!(
        en.status,
        RunStatus::InsufficientEvidence,
        "{:?}",
        en.answer
    );
    let message = en.message.expect("message");
    assert!(
        message.starts_with("The knowledge base does not hold enough evidence"),
        "{message}"
    );
}

#[test]
fn the_offline_planner_sends_the_question_to_the_vector_leg_and_replay_sends_it_again() {
    let (ws, engine) = bundled();
    let question = "坐高铁出差，报销凭证要怎么弄？";
    let outcome = ws.ask(&engine, &mut OfflinePlanner::new(), question);
    let path = outcome.trace.expect("trace").path;
    let file = trace::read_trace(&path).expect("read");
    let first = file
        .events()
        .find_map(|e| match &e.body {
            EventBody::Search(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a search");
    assert_eq!(first.query.as_deref(), Some(question));
    let report = replay(&engine, &file, &AccessContext::default()).expect("own trace");
    assert!(report.reproduced, "{:?}", report.rounds);
}

/// A planner that searches once, then offers the first hit's first sentence as evidence.
struct EvidenceOnly {
    keywords: Vec<String>,
}

impl Planner for EvidenceOnly {
    fn kind(&self) -> &'static str {
        "scripted"
    }
    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        _: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let action = match ctx.rounds.first() {
            None => PlannerAction::Search {
                keywords: self.keywords.clone(),
                reason: "test".into(),
                top_k: None,
                query: Some(ctx.question.to_string()),
            },
            Some(Observation::Hits { hits, .. }) => {
                let id = hits[0].chunk_id.clone();
                let text = ctx.lookup.returned_chunk_text(&id).expect("returned text");
                let quote: String = text.chars().take(12).collect();
                PlannerAction::Evidence {
                    citations: vec![ProposedCitation {
                        chunk_id: id,
                        quote,
                    }],
                    reason: "evidence: test".into(),
                }
            }
            Some(other) => panic!("unexpected {other:?}"),
        };
        Ok(PlannerStep {
            actions: vec![action],
            ..PlannerStep::default()
        })
    }
}

#[test]
fn an_evidence_run_is_shown_as_no_answer_and_its_trace_verifies_audits_and_replays() {
    let (ws, engine) = bundled();
    let mut planner = EvidenceOnly {
        keywords: vec!["陪产假".into()],
    };
    let outcome = ws.ask(&engine, &mut planner, "陪产假怎么休？");
    assert_eq!(outcome.status, RunStatus::Evidence, "{:?}", outcome.message);
    assert_eq!(outcome.reason, "evidence: test");
    let evidence = outcome.answer.clone().expect("evidence");
    assert!(evidence.text.starts_with("这不是答案"), "{}", evidence.text);
    assert_eq!(evidence.citations.len(), 1);
    assert!(evidence.text.contains(&evidence.citations[0].quote));
    let path = outcome.trace.expect("trace").path;
    let (integrity, file) = check_integrity(&path, None).expect("check");
    let file = file.expect("trace read");
    assert_eq!(
        integrity.verdict,
        Verdict::Clean,
        "{:?}",
        integrity.problems
    );
    // The evidence is recorded in an answer event, checked, and the status tells it apart.
    let recorded = file
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Answer(a) => Some(a.clone()),
            _ => None,
        })
        .last()
        .expect("answer event");
    assert!(recorded.grounded);
    assert_eq!(recorded.citations, evidence.citations);
    let report = audit(&file, integrity, Some(&engine), &AccessContext::default());
    assert_eq!(report.status, "evidence");
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert_eq!(report.citations.len(), 1);
    assert_eq!(report.citations[0].quote_verified, Some(true));
    assert_eq!(report.citations[0].store_state, "unchanged");
    assert_eq!(report.exit_code(), 0);
    let replayed = replay(&engine, &file, &AccessContext::default()).expect("own trace");
    assert!(replayed.reproduced, "{:?}", replayed.rounds);
    // The CLI says what it is and exits 4.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .arg("--data-dir")
        .arg(ws.data())
        .arg("--knowledge")
        .arg(ws.knowledge())
        .arg("--trace-dir")
        .arg(ws.dir.path().join("traces"))
        .arg("audit")
        .arg(&path)
        .output()
        .expect("audit");
    let stdout = String::from_utf8_lossy(&cli.stdout);
    assert_eq!(cli.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("evidence:"), "{stdout}");
}

#[test]
fn evidence_without_a_citation_is_refused() {
    let (ws, engine) = bundled();
    struct Empty;
    impl Planner for Empty {
        fn kind(&self) -> &'static str {
            "scripted"
        }
        fn next(
            &mut self,
            ctx: &PlannerContext<'_>,
            obs: &[Observation],
        ) -> Result<PlannerStep, PlannerError> {
            let action = if obs
                .iter()
                .any(|o| matches!(o, Observation::CitationsRefused { .. }))
            {
                PlannerAction::GiveUp {
                    reason: "refused_citations".into(),
                }
            } else {
                let _ = ctx;
                PlannerAction::Evidence {
                    citations: Vec::new(),
                    reason: "evidence: none".into(),
                }
            };
            Ok(PlannerStep {
                actions: vec![action],
                ..PlannerStep::default()
            })
        }
    }
    let outcome = ws.ask(&engine, &mut Empty, "陪产假怎么休？");
    assert_eq!(outcome.status, RunStatus::InsufficientEvidence);
    assert!(outcome.answer.is_none());
}
