//! Times the 4-bit kernel on the encoder's product shapes (multilingual-e5-small: 384 hidden,
//! 1536 intermediate) for a batch of tokens: `cargo run --release -p ragtrail-q4 --example
//! q4_bench -- [TOKENS]`. Prints GMAC/s per shape, one thread, by CPU time.

/// This thread's CPU time in seconds (Linux), so a loaded machine's waits do not count.
fn cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

use ragtrail_q4::{Kernel, Q8, Sample};

fn main() {
    let tokens: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2048);
    let mut sample = Sample::new();
    let kernel = Kernel::detect();
    println!("{kernel:?}, {tokens} tokens");
    for (rows, k) in [(1152usize, 384usize), (384, 384), (1536, 384), (384, 1536)] {
        let w = sample.weights(rows, k);
        let x = sample.activations(tokens, k);
        let q = Q8::quantize(&x, tokens, k);
        let mut out = vec![0.0f32; rows * tokens];
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = cpu();
            kernel.rows(&w, rows, k, &q, &mut out, rows);
            best = best.min(cpu() - t);
        }
        let mut q8 = Q8::default();
        let t = cpu();
        for _ in 0..10 {
            q8.quantize_into(&x, tokens, k);
        }
        let quant = (cpu() - t) / 10.0;
        std::hint::black_box(&q8);
        println!(
            "{rows}×{k}: {:.2} ms, {:.1} GMAC/s; quantize {:.2} ms",
            best * 1e3,
            (rows * k * tokens) as f64 / best / 1e9,
            quant * 1e3
        );
    }
}
