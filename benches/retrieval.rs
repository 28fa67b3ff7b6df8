//! Retrieval benchmark: ingest throughput and `searchDocs` latency on real knowledge folders.
//!
//! Run with `scripts/bench.sh` (or `cargo bench --bench retrieval -- DIR...`). Prints Markdown
//! rows for BENCHMARKS.md. Not part of the test suite: timings never decide pass or fail.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ragtrail::access::AccessContext;
use ragtrail::engine::{Engine, IngestOptions};
use ragtrail::search::SearchRequest;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

/// Deterministic keyword sets drawn from the corpus itself: three terms from every n-th chunk.
fn queries(engine: &Engine, max: usize) -> Vec<Vec<String>> {
    let chunks = engine.store().chunks();
    let step = (chunks.len() / max).max(1);
    chunks
        .iter()
        .step_by(step)
        .take(max)
        .filter_map(|c| {
            let terms = ragtrail::text::terms(&c.text);
            if terms.len() < 3 {
                return None;
            }
            let pick = |f: usize| {
                let t = &terms[terms.len() * f / 4];
                c.text[t.start..t.end].to_string()
            };
            Some(vec![pick(1), pick(2), pick(3)])
        })
        .collect()
}

fn bench_folder(name: &str, dir: &Path) {
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skip {name}: {e}");
            return;
        }
    };
    let mut engine = match Engine::open(tmp.path()) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("skip {name}: {e}");
            return;
        }
    };
    let started = Instant::now();
    let summary = match engine.ingest(dir, &IngestOptions::default(), &mut |_| {}) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skip {name}: {e}");
            return;
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let qs = queries(&engine, 300);
    let access = AccessContext::default();
    for q in qs.iter().take(20) {
        let _ = engine.search_docs(&SearchRequest::new(q.clone(), 5, access.clone()));
    }
    let mut lat = Vec::with_capacity(qs.len());
    for q in &qs {
        let t = Instant::now();
        let _ = engine.search_docs(&SearchRequest::new(q.clone(), 5, access.clone()));
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    lat.sort_by(f64::total_cmp);
    println!(
        "| {name} | {} docs | {} chunks | ingest {:.2} s ({:.0} chunks/s) | BM25 searchDocs top-5, {} queries: p50 {:.3} ms, p99 {:.3} ms |",
        summary.added.len(),
        summary.chunks,
        secs,
        summary.chunks as f64 / secs,
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
}

fn main() {
    let mut dirs: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("knowledge"));
    }
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        bench_folder(&name, &dir);
    }
}
