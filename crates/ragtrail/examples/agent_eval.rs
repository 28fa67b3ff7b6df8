//! The offline planner over the golden set (first turns): evidence recall, citation precision,
//! facts, refusals. `cargo run --release --example agent_eval [-- --verbose]`
use std::sync::Arc;

use ragtrail::AccessContext;
use ragtrail::OfflinePlanner;
use ragtrail::eval::{agent, golden};
use ragtrail::{AgentRagOptions, Planner, RunSettings};
use ragtrail::{Engine, IngestOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir()?;
    let mut engine = Engine::open_with(tmp.path(), Arc::new(ragtrail::HashingEmbedder::default()))?;
    engine.ingest(
        &root.join("knowledge"),
        &IngestOptions::default(),
        &mut |_| {},
    )?;
    let items = golden::load(&root.join("eval/golden.jsonl"))?;
    let settings = RunSettings {
        options: AgentRagOptions::default(),
        access: AccessContext::default(),
        today: "2026-11-30".into(),
        trace: None,
        session: None,
        conversation: None,
        memory: Vec::new(),
        observer: None,
    };
    let report = agent::evaluate(&engine, &items, &settings, &mut || {
        Box::new(OfflinePlanner::new()) as Box<dyn Planner>
    })?;
    if std::env::args().any(|a| a == "--verbose") {
        for r in &report.items {
            println!(
                "{} {} {} rounds={} recall={:.2} cp={:?} facts={:?}",
                r.id,
                r.answerable,
                r.status,
                r.rounds,
                r.recall,
                r.citation_precision,
                r.facts_found
            );
        }
    }
    let mut summary = serde_json::to_value(&report)?;
    if let Some(o) = summary.as_object_mut() {
        o.remove("items");
    }
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
