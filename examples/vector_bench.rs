//! Search latency of the exact vector index at corpus scale.
//!
//! `cargo run --release --example vector_bench [rows] [queries]` (defaults 100000, 200):
//! builds `rows` random 384-dim rows and reports p50/p99 latency of k=100 searches, unfiltered
//! and with filters that allow half the rows (in blocks, and alternating).

use std::time::{Duration, Instant};

use ragtrail::store::vectors::{VectorError, VectorIndex};

const DIMS: usize = 384;
const K: usize = 100;

/// SplitMix64: a tiny seeded generator, so runs are comparable without a `rand` dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vector(&mut self) -> Vec<f32> {
        (0..DIMS).map(|_| self.next_f32()).collect()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn measure(
    index: &VectorIndex,
    queries: &[Vec<f32>],
    allow: impl Fn(usize) -> bool + Copy,
) -> Result<Vec<Duration>, VectorError> {
    let mut times = Vec::with_capacity(queries.len());
    let mut checksum = 0.0f32;
    for q in queries {
        let start = Instant::now();
        let hits = index.search(q, K, allow)?;
        times.push(start.elapsed());
        checksum += hits.first().map_or(0.0, |h| h.1);
    }
    std::hint::black_box(checksum);
    times.sort();
    Ok(times)
}

fn report(label: &str, times: &[Duration]) {
    let mean = times.iter().sum::<Duration>() / u32::try_from(times.len().max(1)).unwrap_or(1);
    println!(
        "{label:<22} p50 {:>8.2?}  p99 {:>8.2?}  mean {:>8.2?}  max {:>8.2?}",
        percentile(times, 0.50),
        percentile(times, 0.99),
        mean,
        times.last().copied().unwrap_or_default(),
    );
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
    let mut index = VectorIndex::with_capacity(DIMS, rows);
    for _ in 0..rows {
        index.push(&rng.vector())?;
    }
    println!(
        "built {rows} x {DIMS} rows ({:.0} MiB) in {:.2?}",
        (rows * DIMS * 4) as f64 / (1024.0 * 1024.0),
        build.elapsed()
    );
    let qs: Vec<Vec<f32>> = (0..queries).map(|_| rng.vector()).collect();

    measure(&index, &qs[..qs.len().min(5)], |_| true)?; // warm caches and page in the data
    report(
        &format!("k={K}, all rows"),
        &measure(&index, &qs, |_| true)?,
    );
    // Per-document filters allow runs of rows (a document's chunks are pushed together);
    // a row-by-row alternating filter defeats hardware prefetching and is the worst case.
    report(
        &format!("k={K}, half in blocks"),
        &measure(&index, &qs, |i| (i / 64) % 2 == 0)?,
    );
    report(
        &format!("k={K}, every 2nd row"),
        &measure(&index, &qs, |i| i % 2 == 0)?,
    );
    Ok(())
}
