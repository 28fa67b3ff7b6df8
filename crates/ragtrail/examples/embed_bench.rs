//! Local embedding throughput: tokens/s and chunks/s of the candle embedder, batch 32.
//!
//! ```sh
//! cargo run --release --example embed_bench -- --model MODEL_DIR [--batch 32] [--limit 2000] INPUT...
//! ```
//!
//! INPUT is a knowledge folder (its chunks, embedded as ingest embeds them: titlePath, newline,
//! text) or a BEIR `corpus.jsonl` (title, newline, text). MODEL_DIR defaults to
//! `RAGTRAIL_EMBED_MODEL_DIR`, then `RAGTRAIL_TEST_MODEL_DIR`. Tokens are the model's tokens
//! after truncation (the embedder pads nothing).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ragtrail::internals::ScanOptions;
use ragtrail::{Embedder, LocalEmbedder, LocalOptions};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn texts_of(input: &Path) -> Result<Vec<String>> {
    if input.is_dir() {
        let scan = ragtrail::internals::scan(input, &ScanOptions::default())?;
        return Ok(scan
            .chunks
            .iter()
            .map(|c| format!("{}\n{}", c.title_path, c.text))
            .collect());
    }
    let file = std::fs::File::open(input)?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let title = v.get("title").and_then(|t| t.as_str()).unwrap_or_default();
        let text = v.get("text").and_then(|t| t.as_str()).unwrap_or_default();
        out.push(format!("{title}\n{text}"));
    }
    Ok(out)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut model: Option<PathBuf> = None;
    let mut batch = 32usize;
    let mut limit = 2000usize;
    let mut inputs = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = args.next().map(PathBuf::from),
            "--batch" => batch = args.next().ok_or("--batch N")?.parse()?,
            "--limit" => limit = args.next().ok_or("--limit N")?.parse()?,
            "--bench" => {}
            _ => inputs.push(PathBuf::from(a)),
        }
    }
    let model = model
        .or_else(|| std::env::var_os("RAGTRAIL_EMBED_MODEL_DIR").map(PathBuf::from))
        .or_else(|| std::env::var_os("RAGTRAIL_TEST_MODEL_DIR").map(PathBuf::from))
        .ok_or("pass --model DIR (or set RAGTRAIL_EMBED_MODEL_DIR)")?;
    if inputs.is_empty() {
        inputs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../knowledge"));
    }
    let started = Instant::now();
    let embedder = LocalEmbedder::load(
        &model,
        LocalOptions {
            batch_size: batch,
            ..LocalOptions::default()
        },
    )?;
    println!(
        "model {} loaded in {:.2} s; {} threads (RAYON_NUM_THREADS or cores); batch {batch}; cap {} tokens",
        embedder.info().model,
        started.elapsed().as_secs_f64(),
        rayon::current_num_threads(),
        embedder.max_tokens()
    );
    println!(
        "| input | chunks | tokens (mean) | time | CPU time | tokens/s | chunks/s | tokens per CPU-second |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for input in &inputs {
        let mut texts = texts_of(input)?;
        texts.truncate(limit);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens: Vec<usize> = embedder.tokenize(&refs)?.iter().map(Vec::len).collect();
        let real: usize = tokens.iter().sum();
        let per_call = embedder.preferred_batch();
        // Warm-up (allocations, page faults of the weights).
        embedder.embed(&refs[..refs.len().min(batch)])?;
        let cpu = cpu_seconds();
        let t = Instant::now();
        for call in refs.chunks(per_call) {
            embedder.embed(call)?;
        }
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds().zip(cpu).map(|(after, before)| after - before);
        let name = input
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        println!(
            "| {name} | {} | {real} ({:.0}) | {secs:.1} s | {} | {:.0} | {:.1} | {} |",
            texts.len(),
            real as f64 / texts.len().max(1) as f64,
            cpu.map(|c| format!("{c:.1} s")).unwrap_or_default(),
            real as f64 / secs,
            texts.len() as f64 / secs,
            cpu.map(|c| format!("{:.0}", real as f64 / c))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// CPU time of the whole process (all threads), from /proc (Linux; `None` elsewhere). On a
/// machine shared with other work, tokens per CPU-second × cores estimates an idle machine.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(ticks / 100.0)
}
