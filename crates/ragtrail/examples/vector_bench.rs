//! Search latency of the vector index at corpus scale: the two-step int8 scan
//! (`VectorIndex::search`) against the f32 exact scan (`search_exact`), interleaved in one run.
//!
//! `cargo run --release --example vector_bench [rows] [queries]` (defaults 100000, 200):
//! builds `rows` 384-dim rows and reports p50/p99 latency of k=100 and k=10 searches,
//! unfiltered and with filters that allow half the rows (in blocks, and alternating), the
//! ratio of the medians, how often the second integer pass ran, and the recall@k of the
//! shortlist step alone (what the completeness proof protects) against the exact scan.
//! Three data sets: uniform random rows and queries (scores spread thinly); clustered rows
//! with queries near a cluster (many close scores around the cut-off); and clustered rows that
//! also share one direction, as a model's embeddings do (multilingual-e5's unrelated passages
//! score about 0.8), searched in memory and as a store maps them (the int8 copy saved relative
//! to the rows' mean, the re-scored rows copied out of the file).

use std::time::{Duration, Instant};

use ragtrail::internals::SplitMix64;
use ragtrail::{internals::VectorError, internals::VectorIndex};

const DIMS: usize = 384;

/// `centre` plus uniform noise of amplitude `noise`.
fn near(rng: &mut SplitMix64, centre: &[f32], noise: f32) -> Vec<f32> {
    centre.iter().map(|&c| c + noise * rng.next_f32()).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// Latencies (sorted) of one way of searching.
type Search<'a> = dyn Fn(&[f32]) -> Result<Vec<(usize, f32)>, VectorError> + 'a;

/// Times `a` and `b` on every query, alternating which goes first, so both see the same load.
fn measure_pair(
    a: &Search<'_>,
    b: &Search<'_>,
    queries: &[Vec<f32>],
) -> Result<(Vec<Duration>, Vec<Duration>), VectorError> {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let mut checksum = 0.0f32;
    for (i, q) in queries.iter().enumerate() {
        let mut time = |f: &Search<'_>, out: &mut Vec<Duration>| -> Result<(), VectorError> {
            let start = Instant::now();
            let hits = f(q)?;
            out.push(start.elapsed());
            checksum += hits.first().map_or(0.0, |h| h.1);
            Ok(())
        };
        if i % 2 == 0 {
            time(a, &mut ta)?;
            time(b, &mut tb)?;
        } else {
            time(b, &mut tb)?;
            time(a, &mut ta)?;
        }
    }
    std::hint::black_box(checksum);
    ta.sort();
    tb.sort();
    Ok((ta, tb))
}

fn recall(exact: &[(usize, f32)], got: &[(usize, f32)]) -> (usize, usize) {
    let found = exact
        .iter()
        .filter(|(row, _)| got.iter().any(|(r, _)| r == row))
        .count();
    (found, exact.len())
}

fn run(
    label: &str,
    index: &VectorIndex,
    queries: &[Vec<f32>],
    k: usize,
    allow: impl Fn(usize) -> bool + Copy,
) -> Result<(), VectorError> {
    let quantised = |q: &[f32]| index.search(q, k, allow);
    let exact = |q: &[f32]| index.search_exact(q, k, allow);
    measure_pair(&quantised, &exact, &queries[..queries.len().min(5)])?; // warm up
    let (tq, te) = measure_pair(&quantised, &exact, queries)?;
    let (mut same, mut second, mut rescored) = (0, 0, 0);
    let (mut found, mut wanted) = (0, 0);
    for q in queries {
        let reference = index.search_exact(q, k, allow)?;
        let (hits, stats) = index.search_with_stats(q, k, allow)?;
        same += usize::from(hits == reference);
        second += usize::from(stats.second_pass);
        rescored += stats.rescored;
        let (f, w) = recall(&reference, &index.search_shortlist_only(q, k, allow)?);
        found += f;
        wanted += w;
    }
    let n = queries.len().max(1);
    let (pq, pe) = (percentile(&tq, 0.5), percentile(&te, 0.5));
    println!(
        "| {label} | {k} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {same}/{n} | {second}/{n} | {} | {:.4} |",
        pq.as_secs_f64() * 1e3,
        percentile(&tq, 0.99).as_secs_f64() * 1e3,
        pe.as_secs_f64() * 1e3,
        percentile(&te, 0.99).as_secs_f64() * 1e3,
        pq.as_secs_f64() / pe.as_secs_f64().max(1e-12),
        rescored / n,
        found as f64 / wanted.max(1) as f64,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let queries: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(200);

    let mut rng = SplitMix64(42);
    let build = Instant::now();
    let mut uniform = VectorIndex::with_capacity(DIMS, rows);
    for _ in 0..rows {
        uniform.push(&rng.vector(DIMS))?;
    }
    println!(
        "built {rows} x {DIMS} rows ({:.1} MiB f32 + {:.1} MiB int8 copy) in {:.2?}",
        (rows * DIMS * 4) as f64 / (1024.0 * 1024.0),
        uniform.quantised_bytes() as f64 / (1024.0 * 1024.0),
        build.elapsed()
    );
    let uniform_qs: Vec<Vec<f32>> = (0..queries).map(|_| rng.vector(DIMS)).collect();

    // 1,000 clusters of 100 rows; queries near a cluster centre, so the top 100 and the rows
    // just below the cut-off score alike.
    let centres: Vec<Vec<f32>> = (0..1000).map(|_| rng.vector(DIMS)).collect();
    let mut clustered = VectorIndex::with_capacity(DIMS, rows);
    for i in 0..rows {
        let v = near(&mut rng, &centres[i % centres.len()], 1.0);
        clustered.push(&v)?;
    }
    let clustered_qs: Vec<Vec<f32>> = (0..queries)
        .map(|i| near(&mut rng, &centres[(i * 7) % centres.len()], 1.0))
        .collect();

    // The same clusters around one shared direction, three times their spread.
    let shared: Vec<f32> = rng.vector(DIMS).iter().map(|x| 3.0 * x).collect();
    let around = |rng: &mut SplitMix64, centre: &[f32]| -> Vec<f32> {
        let v = near(rng, centre, 1.0);
        v.iter().zip(&shared).map(|(x, s)| x + s).collect()
    };
    let mut sharing = VectorIndex::with_capacity(DIMS, rows);
    for i in 0..rows {
        sharing.push(&around(&mut rng, &centres[i % centres.len()]))?;
    }
    let sharing_qs: Vec<Vec<f32>> = (0..queries)
        .map(|i| around(&mut rng, &centres[(i * 7) % centres.len()]))
        .collect();

    let dir = tempfile::tempdir()?;
    let (shared_rows, shared_q8) = (dir.path().join("s.bin"), dir.path().join("s.q8"));
    sharing.save_with_quantised(&shared_rows, &shared_q8)?;
    let sharing_mapped = VectorIndex::open(&shared_rows, &shared_q8, DIMS)?;
    let path = dir.path().join("v.bin");
    uniform.save(&path)?;
    let load = Instant::now();
    let loaded = VectorIndex::load(&path)?;
    println!(
        "load of the saved uniform index (checksum, parse, quantise): {:.2?}",
        load.elapsed()
    );
    drop(loaded);

    println!(
        "| data, filter | k | int8 + re-score p50 / p99 ms | exact f32 p50 / p99 ms | p50 new ÷ old | same result | second pass | rows re-scored (mean) | shortlist-only recall@k |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, index, qs) in [
        ("uniform", &uniform, &uniform_qs),
        ("clustered", &clustered, &clustered_qs),
        ("shared direction, in memory", &sharing, &sharing_qs),
        (
            "shared direction, as a store maps it",
            &sharing_mapped,
            &sharing_qs,
        ),
    ] {
        for k in [100, 10] {
            run(&format!("{name}, all rows"), index, qs, k, |_| true)?;
        }
        // Per-document filters allow runs of rows (a document's chunks are pushed together);
        // a row-by-row alternating filter defeats hardware prefetching and is the worst case.
        run(&format!("{name}, half in blocks"), index, qs, 100, |i| {
            (i / 64) % 2 == 0
        })?;
        run(&format!("{name}, every 2nd row"), index, qs, 100, |i| {
            i % 2 == 0
        })?;
    }
    Ok(())
}
