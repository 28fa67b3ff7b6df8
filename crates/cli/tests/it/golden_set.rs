//! The golden set checker: every expected section exists after ingesting the bundled knowledge,
//! every fact is in one of its turn's expected sections, and the set has the shape the
//! evaluation needs (multi-search, unanswerable, conversation and superseded-trap items).

use std::collections::{HashMap, HashSet};

use crate::common::*;
use ragtrail::DocStatus;
use ragtrail::eval::golden;
use ragtrail::{Engine, IngestOptions};

fn bundled() -> (tempfile::TempDir, Engine) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut engine = Engine::open(tmp.path()).expect("open");
    let summary = engine
        .ingest(
            &repo_root().join("knowledge"),
            &IngestOptions::default(),
            &mut |_| {},
        )
        .expect("ingest bundled knowledge");
    assert!(
        summary.skipped.is_empty(),
        "bundled knowledge must ingest cleanly: {:?}",
        summary.skipped
    );
    (tmp, engine)
}

#[test]
fn bundled_knowledge_has_the_promised_size_and_special_documents() {
    let (_tmp, engine) = bundled();
    let docs = engine.store().documents();
    assert!(docs.len() >= 14, "{} documents", docs.len());
    assert!(
        engine.store().chunks().expect("chunk records").len() >= 120,
        "{} chunks",
        engine.store().chunks().expect("chunk records").len()
    );
    assert!(
        docs.iter().any(|d| d.tenant != "default"),
        "a second tenant"
    );
    assert!(
        docs.iter().any(|d| !d.roles.is_empty()),
        "a role-restricted document"
    );
    assert!(
        docs.iter().any(|d| d.status == DocStatus::Superseded),
        "a superseded document"
    );
    let langs: HashSet<bool> = docs
        .iter()
        .map(|d| d.title.chars().any(ragtrail::internals::is_cjk))
        .collect();
    assert_eq!(langs.len(), 2, "Chinese and English documents");
}

#[test]
fn every_expected_section_exists_and_holds_its_facts() {
    let (_tmp, engine) = bundled();
    let items = golden::load(&repo_root().join("eval/golden.jsonl")).expect("golden set");
    let mut sections: HashMap<&str, String> = HashMap::new();
    let mut visible: HashSet<&str> = HashSet::new();
    for c in engine.store().chunks().expect("chunk records") {
        let text = sections.entry(c.title_path.as_str()).or_default();
        text.push_str(&c.title_path);
        text.push('\n');
        text.push_str(&c.text);
        text.push('\n');
        if c.tenant == "default" && c.roles.is_empty() && c.status == DocStatus::Active {
            visible.insert(c.title_path.as_str());
        }
    }
    let mut ids = HashSet::new();
    let mut problems = Vec::new();
    for item in &items {
        assert!(ids.insert(item.id.clone()), "duplicate id {}", item.id);
        assert!(!item.turns.is_empty(), "{} has no turns", item.id);
        for turn in &item.turns {
            if item.answerable {
                if turn.expected.is_empty() {
                    problems.push(format!("{}: answerable but no expected section", item.id));
                }
            } else if !turn.expected.is_empty() || !turn.facts.is_empty() {
                problems.push(format!("{}: unanswerable items expect nothing", item.id));
            }
            for path in &turn.expected {
                if !sections.contains_key(path.as_str()) {
                    problems.push(format!("{}: no section {path}", item.id));
                } else if !visible.contains(path.as_str()) {
                    problems.push(format!(
                        "{}: {path} is not visible to the default user",
                        item.id
                    ));
                }
            }
            for fact in &turn.facts {
                let found = turn.expected.iter().any(|p| {
                    sections
                        .get(p.as_str())
                        .is_some_and(|t| t.contains(fact.as_str()))
                });
                if !found {
                    problems.push(format!(
                        "{}: fact {fact:?} is in none of {:?}",
                        item.id, turn.expected
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn golden_set_has_the_required_shape() {
    let items = golden::load(&repo_root().join("eval/golden.jsonl")).expect("golden set");
    let count = |f: &dyn Fn(&golden::GoldenItem) -> bool| items.iter().filter(|i| f(i)).count();
    assert!(items.len() >= 50, "{} items", items.len());
    assert!(count(&|i| i.lang == "zh") >= 10 && count(&|i| i.lang == "en") >= 10);
    assert!(count(&|i| i.min_searches >= 2) >= 15);
    assert!(count(&|i| !i.answerable) >= 6);
    assert!(count(&|i| i.turns.len() == 2 && i.has_tag("conversation")) >= 4);
    assert!(count(&|i| i.has_tag("superseded-trap")) >= 3);
}

#[test]
fn rail_ticket_keywords_rank_the_rail_ticket_rule_first() {
    let (_tmp, engine) = bundled();
    let hits = search(&engine, &["高铁票", "报销凭证"], 5);
    assert_eq!(
        hits[0].title_path,
        "铁路电子客票报销规定 / 凭证要求 / 高铁票报销凭证"
    );
    assert!(
        hits[0]
            .source_uri
            .starts_with("finance/rail-eticket-rules.md#")
    );
}

/// The calibrated sufficiency bar (BENCHMARKS.md, "Evidence sufficiency") separates most of the
/// golden set's unanswerable first questions from the answerable ones. Lexical coverage cannot
/// separate them perfectly (people ask in other words than the documents use); this pins the
/// calibrated operating point so a regression in the decision shows.
#[test]
fn sufficiency_separates_unanswerable_from_answerable_questions() {
    let (_tmp, engine) = bundled();
    let items = golden::load(&repo_root().join("eval/golden.jsonl")).expect("golden set");
    let (mut tp, mut p, mut tn, mut n) = (0, 0, 0, 0);
    for item in &items {
        let req = ragtrail::SearchRequest::new(
            vec![item.turns[0].question.clone()],
            5,
            ragtrail::AccessContext::default(),
        );
        let sufficient = engine
            .search_docs(&req)
            .expect("search")
            .sufficiency
            .sufficient;
        if item.answerable {
            p += 1;
            tp += usize::from(sufficient);
        } else {
            n += 1;
            tn += usize::from(!sufficient);
        }
    }
    assert!(
        tn * 9 >= n * 7,
        "unanswerable judged insufficient: {tn}/{n}"
    );
    // Calibrated point (BENCHMARKS.md): 56/102 answerable sufficient, 7/9 unanswerable not.
    assert!(tp * 100 >= p * 50, "answerable judged sufficient: {tp}/{p}");
}
