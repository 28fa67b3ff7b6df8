//! Retrieval quality on a BEIR-format set (`corpus.jsonl`, `queries.jsonl`, `qrels/SPLIT.tsv`):
//! nDCG@10 and recall@100 of `searchDocs` with each fusion, in one run over one index.
//!
//! ```sh
//! cargo run --release --example beir_eval -- DATASET_DIR [--split train] \
//!     [--embedder hashing|local] [--model MODEL_DIR] [--index DIR] [--fusions bm25,vector,rrf,minmax0.5,minmax0.3]
//! ```
//!
//! Every corpus document becomes one chunk (titlePath = its title, text = its body: no
//! splitting), ingested through the engine as a knowledge folder of `.txt` files with front
//! matter. Each query's text is one keyword (the BM25 analyzer segments it; the vector leg embeds
//! it whole), top-100. `vector_only_floor` is 0 here so the ranking alone is measured.
//! `--index DIR` keeps the ingested index between runs (ingest re-embeds nothing unchanged).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ragtrail::AccessContext;
use ragtrail::Fusion;
use ragtrail::SearchRequest;
use ragtrail::{Embedder, HashingEmbedder, LocalEmbedder, LocalOptions};
use ragtrail::{Engine, IngestOptions, IngestProgress};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            out.push(serde_json::from_str(&line)?);
        }
    }
    Ok(out)
}

fn field<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v.get(name).and_then(|x| x.as_str()).unwrap_or_default()
}

/// A file name for a document id (ids are short ASCII in BEIR sets; anything else is escaped).
fn file_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_string()
            } else {
                format!("~{:x}", c as u32)
            }
        })
        .collect();
    format!("{safe}.txt")
}

/// Writes the corpus as a knowledge folder: one `.txt` file per document. Returns file → id.
fn write_corpus(corpus: &[serde_json::Value], dir: &Path) -> Result<HashMap<String, String>> {
    std::fs::create_dir_all(dir)?;
    let mut by_file = HashMap::new();
    for doc in corpus {
        let id = field(doc, "_id");
        let title = field(doc, "title").trim();
        let title = if title.is_empty() { id } else { title };
        let name = file_name(id);
        // A JSON string is a valid YAML double-quoted scalar.
        let text = format!(
            "---\ntitle: {}\n---\n{}\n",
            serde_json::to_string(title)?,
            field(doc, "text")
        );
        let path = dir.join(&name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text)?;
        }
        by_file.insert(name, id.to_string());
    }
    Ok(by_file)
}

fn read_qrels(path: &Path) -> Result<HashMap<String, HashMap<String, f64>>> {
    let mut qrels: HashMap<String, HashMap<String, f64>> = HashMap::new();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, line) in text.lines().enumerate() {
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() < 3 || (i == 0 && parts[2].parse::<f64>().is_err()) {
            continue;
        }
        let score: f64 = parts[2].trim().parse()?;
        if score > 0.0 {
            qrels
                .entry(parts[0].to_string())
                .or_default()
                .insert(parts[1].to_string(), score);
        }
    }
    Ok(qrels)
}

/// nDCG@k with linear gains (as pytrec_eval computes it for BEIR).
fn ndcg_at(ranked: &[String], rels: &HashMap<String, f64>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| rels.get(id).copied().unwrap_or(0.0) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<f64> = rels.values().copied().collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, r)| r / ((i + 2) as f64).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

fn recall_at(ranked: &[String], rels: &HashMap<String, f64>, k: usize) -> f64 {
    let top: HashSet<&String> = ranked.iter().take(k).collect();
    rels.keys().filter(|id| top.contains(id)).count() as f64 / rels.len().max(1) as f64
}

fn parse_fusion(name: &str) -> Result<Fusion> {
    Ok(match name {
        "bm25" => Fusion::Bm25Only,
        "vector" => Fusion::VectorOnly,
        "rrf" => Fusion::rrf(60.0)?,
        n if n.starts_with("minmax") => {
            let w = n.trim_start_matches("minmax");
            Fusion::min_max(if w.is_empty() { 0.5 } else { w.parse()? })?
        }
        other => return Err(format!("unknown fusion {other}").into()),
    })
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut dataset: Option<PathBuf> = None;
    let mut split = "train".to_string();
    let mut embedder_kind = "hashing".to_string();
    let mut model: Option<PathBuf> = None;
    let mut index: Option<PathBuf> = None;
    let mut fusions = "bm25,vector,rrf,minmax0.5,minmax0.3".to_string();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--split" => split = args.next().ok_or("--split NAME")?,
            "--embedder" => embedder_kind = args.next().ok_or("--embedder KIND")?,
            "--model" => model = args.next().map(PathBuf::from),
            "--index" => index = args.next().map(PathBuf::from),
            "--fusions" => fusions = args.next().ok_or("--fusions LIST")?,
            "--bench" => {}
            _ => dataset = Some(PathBuf::from(a)),
        }
    }
    let dataset = dataset.ok_or("usage: beir_eval DATASET_DIR [options]")?;
    let embedder: Arc<dyn Embedder> = match embedder_kind.as_str() {
        "hashing" => Arc::new(HashingEmbedder::default()),
        "local" => {
            let dir = model
                .or_else(|| std::env::var_os("RAGTRAIL_EMBED_MODEL_DIR").map(PathBuf::from))
                .or_else(|| std::env::var_os("RAGTRAIL_TEST_MODEL_DIR").map(PathBuf::from))
                .ok_or("--embedder local needs --model DIR")?;
            Arc::new(LocalEmbedder::load(&dir, LocalOptions::default())?)
        }
        other => return Err(format!("unknown embedder {other}").into()),
    };
    let tmp = tempfile::tempdir()?;
    let root = index.unwrap_or_else(|| tmp.path().to_path_buf());
    let corpus = read_jsonl(&dataset.join("corpus.jsonl"))?;
    let queries: HashMap<String, String> = read_jsonl(&dataset.join("queries.jsonl"))?
        .iter()
        .map(|q| (field(q, "_id").to_string(), field(q, "text").to_string()))
        .collect();
    let qrels = read_qrels(&dataset.join("qrels").join(format!("{split}.tsv")))?;
    let by_file = write_corpus(&corpus, &root.join("knowledge"))?;

    let mut engine = Engine::open_with(&root.join("data"), embedder.clone())?;
    engine.settings.max_top_k = 100;
    engine.settings.vector_only_floor = 0.0;
    let mut options = IngestOptions::default();
    options.scan.limits.max_chars = 1_000_000;
    options.scan.max_file_bytes = 64 * 1024 * 1024;
    let started = Instant::now();
    let mut embedded = 0usize;
    let mut last_report = Instant::now();
    let summary = engine.ingest(&root.join("knowledge"), &options, &mut |p| match p {
        IngestProgress::Embedding { total } => {
            embedded = total;
            eprintln!("embedding {total} chunks");
        }
        IngestProgress::Embedded { done } if last_report.elapsed().as_secs() >= 30 => {
            last_report = Instant::now();
            eprintln!(
                "  {done}/{embedded} embedded, {:.1} chunks/s",
                done as f64 / started.elapsed().as_secs_f64()
            );
        }
        _ => {}
    })?;
    let ingest_secs = started.elapsed().as_secs_f64();
    let info = embedder.info();
    println!(
        "dataset {} ({split}): {} docs, {} chunks, {} judged queries; embedder {}:{} ({} dims); ingest {ingest_secs:.1} s ({embedded} chunks embedded)",
        dataset.display(),
        corpus.len(),
        summary.chunks,
        qrels.len(),
        info.kind,
        info.model,
        info.dims
    );
    if summary.chunks != corpus.len() {
        eprintln!(
            "warning: {} chunks for {} documents",
            summary.chunks,
            corpus.len()
        );
    }
    let mut ids: Vec<&String> = qrels.keys().collect();
    ids.sort();
    println!("| fusion | nDCG@10 | recall@100 | queries | ms/query |");
    println!("|---|---|---|---|---|");
    for name in fusions.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let fusion = parse_fusion(name)?;
        let (mut ndcg, mut recall, mut n) = (0.0, 0.0, 0usize);
        let t = Instant::now();
        for qid in &ids {
            let Some(text) = queries.get(*qid) else {
                continue;
            };
            let mut req = SearchRequest::new(vec![text.clone()], 100, AccessContext::default());
            req.fusion = Some(fusion);
            let hits = match engine.search_docs(&req) {
                Ok(r) => r.hits,
                Err(ragtrail::EngineError::Search(ragtrail::SearchError::NoKeywords)) => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            let ranked: Vec<String> = hits
                .iter()
                .filter_map(|h| engine.store().get(&h.chunk_id))
                .filter_map(|c| by_file.get(&c.source).cloned())
                .collect();
            let rels = &qrels[*qid];
            ndcg += ndcg_at(&ranked, rels, 10);
            recall += recall_at(&ranked, rels, 100);
            n += 1;
        }
        let n_f = n.max(1) as f64;
        println!(
            "| {name} | {:.4} | {:.4} | {n} | {:.2} |",
            ndcg / n_f,
            recall / n_f,
            t.elapsed().as_secs_f64() * 1e3 / n_f
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_a_hand_computed_case() {
        let rels: HashMap<String, f64> = [("a".to_string(), 1.0), ("b".to_string(), 1.0)].into();
        let ranked: Vec<String> = ["x", "a", "b"].iter().map(|s| s.to_string()).collect();
        let ideal = 1.0 + 1.0 / 3f64.log2();
        let got = (1.0 / 3f64.log2() + 1.0 / 4f64.log2()) / ideal;
        assert!((ndcg_at(&ranked, &rels, 10) - got).abs() < 1e-12);
        assert_eq!(recall_at(&ranked, &rels, 2), 0.5);
        assert_eq!(recall_at(&ranked, &rels, 100), 1.0);
    }
}
