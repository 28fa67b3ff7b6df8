//! Calibration on the golden set (`eval/golden.jsonl` over the bundled `knowledge/`): the
//! heading boost of the BM25 leg, the default fusion, and the sufficiency threshold. Each turn's
//! question is searched as one keyword (the analyzer segments it), as a first round would.
//!
//! `cargo run --release --example calibrate [-- SET.jsonl KNOWLEDGE_DIR]`: another question set
//! over its own knowledge folder (e.g. `eval/holdout-laws-zh.jsonl ../shared/data/laws-zh`)
//! measures the same tables on questions the defaults were not tuned on.

use ragtrail::AccessContext;
use ragtrail::Fusion;
use ragtrail::SearchRequest;
use ragtrail::eval::golden::{self, GoldenItem};
use ragtrail::{Engine, IngestOptions};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// (turns, all expected in top 5, any expected in top 5, MRR of the first expected hit)
fn recall(engine: &Engine, items: &[GoldenItem], fusion: Fusion) -> Result<(usize, f64, f64, f64)> {
    let (mut n, mut all, mut any, mut mrr) = (0usize, 0usize, 0usize, 0.0);
    for item in items.iter().filter(|i| i.answerable) {
        // Second turns of conversations omit their topic: not a first-round query.
        let turn = &item.turns[0];
        let mut req = SearchRequest::new(vec![turn.question.clone()], 5, AccessContext::default());
        req.fusion = Some(fusion);
        let hits = engine.search_docs(&req)?.hits;
        n += 1;
        let found = |p: &String| hits.iter().any(|h| &h.title_path == p);
        all += usize::from(turn.expected.iter().all(found));
        any += usize::from(turn.expected.iter().any(found));
        if let Some(r) = hits
            .iter()
            .position(|h| turn.expected.contains(&h.title_path))
        {
            mrr += 1.0 / (r + 1) as f64;
        }
    }
    Ok((
        n,
        all as f64 / n as f64,
        any as f64 / n as f64,
        mrr / n as f64,
    ))
}

fn main() -> Result<()> {
    let root = &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let args: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let (set, knowledge) = match &args[..] {
        [] => (root.join("eval/golden.jsonl"), root.join("knowledge")),
        [set, knowledge] => (set.clone(), knowledge.clone()),
        _ => return Err("usage: calibrate [SET.jsonl KNOWLEDGE_DIR]".into()),
    };
    let tmp = tempfile::tempdir()?;
    // The embedder of RAGTRAIL_EMBED_BASE_URL / _MODEL / _MARKING or _MODEL_DIR when set, else
    // hashing.
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let config = ragtrail::EmbedConfig {
        base_url: var("RAGTRAIL_EMBED_BASE_URL"),
        model: var("RAGTRAIL_EMBED_MODEL"),
        model_dir: var("RAGTRAIL_EMBED_MODEL_DIR").map(std::path::PathBuf::from),
        marking: var("RAGTRAIL_EMBED_MARKING")
            .map(|m| m.parse())
            .transpose()
            .map_err(|e: String| e)?,
        ..ragtrail::EmbedConfig::default()
    };
    let embedder = ragtrail::embedder_from_config(&config)?;
    println!("embedder: {}\n", embedder.info().describe());
    let mut engine = Engine::open_with(tmp.path(), embedder)?;
    engine.ingest(&knowledge, &IngestOptions::default(), &mut |_| {})?;
    let items = golden::load(&set)?;

    println!("## BM25 heading boost (BM25 leg alone)\n");
    println!("| title boost | questions | all expected in top 5 | any expected in top 5 | MRR |");
    println!("|---|---|---|---|---|");
    let default_boost = engine.settings.title_boost;
    for boost in [0.0f32, 0.5, 1.0, 1.5, 2.0] {
        engine.settings.title_boost = boost;
        let (n, all, any, mrr) = recall(&engine, &items, Fusion::Bm25Only)?;
        println!("| {boost} | {n} | {all:.3} | {any:.3} | {mrr:.3} |");
    }
    engine.settings.title_boost = default_boost;

    println!("\n## Fusion\n");
    println!("| fusion | questions | all expected in top 5 | any expected in top 5 | MRR |");
    println!("|---|---|---|---|---|");
    let mut fusions = vec![
        Fusion::Bm25Only,
        Fusion::VectorOnly,
        Fusion::Rrf { k: 60.0 },
        Fusion::MinMax { bm25_weight: 0.3 },
        Fusion::MinMax { bm25_weight: 0.5 },
        Fusion::MinMax { bm25_weight: 0.7 },
        Fusion::MinMax { bm25_weight: 0.9 },
        Fusion::Agreement {
            max_vector_weight: 0.5,
        },
        Fusion::Agreement {
            max_vector_weight: 0.7,
        },
        Fusion::Standout,
        Fusion::StandoutCoverage,
    ];
    if !fusions.contains(&engine.settings.fusion) {
        fusions.push(engine.settings.fusion);
    }
    for fusion in fusions {
        let (n, all, any, mrr) = recall(&engine, &items, fusion)?;
        println!("| {fusion} | {n} | {all:.3} | {any:.3} | {mrr:.3} |");
    }

    println!("\n## Sufficiency: best-hit key-term coverage of first-turn questions\n");
    let mut answerable = Vec::new();
    let mut unanswerable = Vec::new();
    for item in &items {
        let req = SearchRequest::new(
            vec![item.turns[0].question.clone()],
            5,
            AccessContext::default(),
        );
        let resp = engine.search_docs(&req)?;
        let c = resp.sufficiency.coverage;
        if std::env::var_os("VERBOSE").is_some() {
            println!(
                "{} {} best {:.2} union {:.2} missing {:?} | {}",
                item.id,
                item.answerable,
                c,
                resp.sufficiency.union_coverage,
                resp.sufficiency.missing_terms,
                item.turns[0].question
            );
        }
        if item.answerable {
            answerable.push((c, item.id.clone()))
        } else {
            unanswerable.push((c, item.id.clone()))
        }
    }
    answerable.sort_by(|a, b| a.0.total_cmp(&b.0));
    unanswerable.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "lowest answerable: {:?}",
        &answerable[..answerable.len().min(8)]
    );
    println!(
        "highest unanswerable: {:?}\n",
        &unanswerable[..unanswerable.len().min(8)]
    );
    println!("| bar | answerable judged sufficient | unanswerable judged insufficient |");
    println!("|---|---|---|");
    for bar in [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6] {
        let tp = answerable.iter().filter(|(c, _)| *c >= bar).count();
        let tn = unanswerable.iter().filter(|(c, _)| *c < bar).count();
        println!(
            "| {bar} | {tp}/{} | {tn}/{} |",
            answerable.len(),
            unanswerable.len()
        );
    }
    Ok(())
}
