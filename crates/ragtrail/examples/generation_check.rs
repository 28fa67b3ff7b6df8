//! What the per-request generation check of `serve` and `mcp` costs (`Engine::behind`: one read
//! of the store's `CURRENT` file), beside a `searchDocs` call on the same engine.
//!
//! Opens the embedded data directory DATA_DIR (ingested beforehand, e.g. by `ragtrail ingest`)
//! and times CALLS checks, then CALLS searches of three keywords; prints medians in
//! microseconds. `cargo run -p ragtrail --example generation_check -- DATA_DIR [CALLS]`

use std::path::PathBuf;
use std::time::Instant;

use ragtrail::AccessContext;
use ragtrail::Engine;
use ragtrail::SearchRequest;

fn median_us(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2] * 1e6
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: generation_check DATA_DIR [CALLS]");
        std::process::exit(2);
    };
    let calls: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let engine = Engine::open(&dir)?;
    let checks: Vec<f64> = (0..calls)
        .map(|_| {
            let start = Instant::now();
            let behind = engine.behind();
            let took = start.elapsed().as_secs_f64();
            assert!(matches!(behind, Ok(false)), "{behind:?}");
            took
        })
        .collect();
    let words = ["报销", "hotel", "invoice", "合同", "travel", "审批"];
    let searches: Vec<f64> = (0..calls.min(200))
        .map(|i| {
            let keywords = (0..3).map(|k| words[(i + k) % words.len()].to_string());
            let req = SearchRequest::new(keywords.collect(), 5, AccessContext::default());
            let start = Instant::now();
            let found = engine.search_docs(&req);
            let took = start.elapsed().as_secs_f64();
            assert!(found.is_ok(), "search failed");
            took
        })
        .collect();
    println!(
        "{} chunks, generation {}: Engine::behind median {:.1} µs over {} calls; searchDocs median {:.1} µs over {} calls",
        engine.store().chunks().expect("chunk records").len(),
        engine.store().generation(),
        median_us(checks),
        calls,
        median_us(searches.clone()),
        searches.len()
    );
    Ok(())
}
