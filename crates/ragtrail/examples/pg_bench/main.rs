//! PostgreSQL + pgvector at corpus scale: ingest rows/s, vector-leg latency (HNSW vs exact
//! scan) with HNSW recall, and fused `searchDocs` latency with Postgres as the system of record.
//!
//! `DATABASE_URL=postgres://…/postgres cargo run --release --example pg_bench -- [OPTIONS]`;
//! `scripts/pg-bench.sh` starts a throwaway durable server and runs this. Creates a database of
//! its own on that server and drops it at the end.
//!
//! Corpus (one of):
//! * `[ROWS] [QUERIES]` (defaults 100000 and 200): synthetic text shaped like policy documents:
//!   20-chunk documents, each on one of 2,000 topics; a chunk is 40 words, half from its
//!   topic's 40 words and half from a 20,000-word vocabulary with Zipf frequencies; each query is
//!   3 words of a random chunk.
//! * `--beir DIR [QUERIES]`: a BEIR corpus (real text, e.g. `../shared/data/scifact`): every
//!   record a document chunked by the project's chunker, queries from `queries.jsonl`.
//!   `--extra DIR[:N]` (repeatable) with `--rows ROWS` adds real-text units until ROWS chunks:
//!   runs of N sentences (default 1) of every record or Markdown file of DIR.
//!
//! Options: `--embedder hashing|local` (default hashing), `--embed-model-dir DIR` (local),
//! `--vector-cache FILE` (vectors computed once, read back by later runs), `--embed-only`
//! (fill the cache and stop; needs no database), `--ef-search 40,100,200`, `--hnsw 24:100,…`
//! (index builds `m:ef_construction` to compare, default the project's; the last one serves
//! the fused search), `--fused-ef-search N` (default the project's), `--candidates 100,50` (each
//! leg's window in the fused search, compared; default the engine's).

mod corpus;
mod vectors;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ragtrail::AccessContext;
use ragtrail::Engine;
use ragtrail::Fusion;
use ragtrail::SearchRequest;
use ragtrail::{
    DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_EF_SEARCH, DEFAULT_HNSW_M, PgSettings, PgStore,
    Space, VectorSearchMode, internals::with_database,
};
use ragtrail::{EmbedConfig, Embedder, EmbedderChoice};
use sqlx::{AssertSqlSafe, Connection, Executor};

use corpus::Docs;
use vectors::CachedEmbedder;

struct Args {
    rows: Option<usize>,
    queries: usize,
    beir: Option<PathBuf>,
    extra: Vec<String>,
    embedder: String,
    model_dir: Option<PathBuf>,
    cache: Option<PathBuf>,
    embed_only: bool,
    ef_search: Vec<u32>,
    builds: Vec<(u32, u32)>,
    fused_ef_search: Option<u32>,
    candidates: Vec<usize>,
}

fn list<T: std::str::FromStr>(v: &str) -> Result<Vec<T>, String> {
    v.split(',')
        .map(|x| x.trim().parse().map_err(|_| format!("bad list item {x:?}")))
        .collect()
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut a = Args {
        rows: None,
        queries: 200,
        beir: None,
        extra: Vec::new(),
        embedder: "hashing".to_string(),
        model_dir: None,
        cache: None,
        embed_only: false,
        ef_search: vec![40, 100, 200],
        builds: vec![(DEFAULT_HNSW_M, DEFAULT_HNSW_EF_CONSTRUCTION)],
        fused_ef_search: None,
        candidates: Vec::new(),
    };
    let mut positional = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--beir" => a.beir = Some(PathBuf::from(value()?)),
            "--extra" => a.extra.push(value()?),
            "--rows" => a.rows = Some(value()?.parse()?),
            "--queries" => a.queries = value()?.parse()?,
            "--embedder" => a.embedder = value()?,
            "--embed-model-dir" => a.model_dir = Some(PathBuf::from(value()?)),
            "--vector-cache" => a.cache = Some(PathBuf::from(value()?)),
            "--embed-only" => a.embed_only = true,
            "--ef-search" => a.ef_search = list(&value()?)?,
            "--fused-ef-search" => a.fused_ef_search = Some(value()?.parse()?),
            "--candidates" => a.candidates = list(&value()?)?,
            "--hnsw" => {
                a.builds = value()?
                    .split(',')
                    .map(|b| {
                        let (m, efc) = b.split_once(':').ok_or("--hnsw takes m:ef_construction")?;
                        Ok::<_, Box<dyn std::error::Error>>((m.parse()?, efc.parse()?))
                    })
                    .collect::<Result<_, _>>()?
            }
            _ if arg.starts_with("--") => return Err(format!("unknown option {arg}").into()),
            _ => positional.push(arg.parse::<usize>()?),
        }
    }
    // The old positional forms: `[ROWS] [QUERIES]` and `--beir DIR [QUERIES]`.
    match (a.beir.is_some(), positional.as_slice()) {
        (true, [q]) => a.queries = *q,
        (false, [r]) => a.rows = Some(*r),
        (false, [r, q]) => {
            a.rows = Some(*r);
            a.queries = *q;
        }
        (_, []) => {}
        _ => return Err("too many positional arguments".into()),
    }
    if a.ef_search.is_empty() || a.builds.is_empty() {
        return Err("--ef-search and --hnsw need at least one value".into());
    }
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default().as_secs_f64() * 1e3
}

fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn admin(url: &str, sql: String) -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let mut conn = sqlx::PgConnection::connect(url).await?;
            conn.execute(AssertSqlSafe(sql)).await?;
            conn.close().await?;
            Ok::<_, sqlx::Error>(())
        })?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let mut rng = corpus::Rng(2026);
    let started = Instant::now();
    let (mut docs, query_words): (Docs, Vec<Vec<String>>) = match &args.beir {
        Some(dir) => corpus::beir(dir, args.queries)?,
        None => {
            let rows = args.rows.unwrap_or(100_000);
            let c = corpus::Corpus::new(&mut rng);
            let docs: Docs = (0..rows.div_ceil(corpus::PER_DOC))
                .map(|d| corpus::document(&c, &mut rng, d))
                .collect();
            let queries = (0..args.queries)
                .map(|_| corpus::query(&docs, &mut rng))
                .collect();
            (docs, queries)
        }
    };
    let base_rows: usize = docs.iter().map(|(_, c)| c.len()).sum();
    let mut extra_rows = Vec::new();
    for spec in &args.extra {
        let have: usize = docs.iter().map(|(_, c)| c.len()).sum();
        let budget = args.rows.map_or(usize::MAX, |r| r.saturating_sub(have));
        let more = corpus::extra_units(spec, docs.len(), budget)?;
        extra_rows.push((
            spec.clone(),
            more.iter().map(|(_, c)| c.len()).sum::<usize>(),
        ));
        docs.extend(more);
    }
    let generated = started.elapsed();
    let total_rows: usize = docs.iter().map(|(_, c)| c.len()).sum();
    println!(
        "corpus: {} documents, {total_rows} chunks ({base_rows} from the main corpus{}); built in {:.1} s",
        docs.len(),
        extra_rows
            .iter()
            .map(|(s, n)| format!(", {n} from {s}"))
            .collect::<String>(),
        generated.as_secs_f64()
    );

    let inner = ragtrail::embedder_from_config(&EmbedConfig {
        choice: match args.embedder.as_str() {
            "hashing" => EmbedderChoice::Hashing,
            "local" => EmbedderChoice::Local,
            other => return Err(format!("--embedder {other}: expected hashing or local").into()),
        },
        model_dir: args.model_dir.clone(),
        ..EmbedConfig::default()
    })?;
    let embedder = Arc::new(CachedEmbedder::new(inner, args.cache.as_deref())?);
    let info = embedder.info();
    println!(
        "embedder: {}:{} ({} dims); {} vectors cached",
        info.kind,
        info.model,
        info.dims,
        embedder.cached()
    );
    // Queries first, then chunks in corpus order: an interrupted run keeps what it embedded.
    let query_texts: Vec<String> = query_words.iter().map(|w| w.join(" ")).collect();
    let chunk_texts: Vec<String> = docs
        .iter()
        .flat_map(|(_, chunks)| {
            chunks
                .iter()
                .map(|c| format!("{}\n{}", c.title_path, c.text))
        })
        .collect();
    let started = Instant::now();
    let all: Vec<&str> = query_texts
        .iter()
        .chain(&chunk_texts)
        .map(String::as_str)
        .collect();
    let todo: Vec<&str> = all
        .iter()
        .copied()
        .filter(|t| embedder.missing(t))
        .collect();
    let mut done = 0usize;
    for batch in todo.chunks(embedder.preferred_batch().max(1) * 4) {
        embedder.embed(batch)?;
        done += batch.len();
        eprintln!(
            "embedded {done} / {} in {:.0} s",
            todo.len(),
            started.elapsed().as_secs_f64()
        );
    }
    let query_vectors =
        embedder.embed(&query_texts.iter().map(String::as_str).collect::<Vec<_>>())?;
    let mut flat = embedder
        .embed(&chunk_texts.iter().map(String::as_str).collect::<Vec<_>>())?
        .into_iter();
    let vectors: Vec<Vec<Vec<f32>>> = docs
        .iter()
        .map(|(_, chunks)| flat.by_ref().take(chunks.len()).collect())
        .collect();
    println!(
        "embedded {} new texts in {:.1} s",
        todo.len(),
        started.elapsed().as_secs_f64()
    );
    if args.embed_only {
        return Ok(());
    }

    let server = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL to a server")?;
    println!("{}", load());
    let name = format!("rt_bench_{}", std::process::id());
    admin(&server, format!("create database {name}"))?;
    let result = run(
        &with_database(&server, &name),
        &args,
        &docs,
        &vectors,
        &query_words,
        &query_vectors,
        embedder,
    );
    admin(
        &server,
        format!("drop database if exists {name} with (force)"),
    )?;
    result
}

/// The machine's load average: other builds share these cores, and latency depends on it.
fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let avg: Vec<&str> = avg.split_whitespace().take(3).collect();
    format!("load average (1 / 5 / 15 min): {}", avg.join(" / "))
}

fn settings(m: u32, efc: u32, ef: u32) -> PgSettings {
    PgSettings {
        hnsw_m: m,
        hnsw_ef_construction: efc,
        hnsw_ef_search: ef,
        ..PgSettings::default()
    }
}

/// (recall@k, recall of the exact top 10 within the first 10 hits) summed over queries.
fn recall(hnsw: &[(String, f32)], exact: &[(String, f32)]) -> (usize, usize, usize, usize) {
    let found = hnsw
        .iter()
        .filter(|x| exact.iter().any(|y| y.0 == x.0))
        .count();
    let e10 = &exact[..exact.len().min(10)];
    let found10 = hnsw
        .iter()
        .take(10)
        .filter(|x| e10.iter().any(|y| y.0 == x.0))
        .count();
    (found, exact.len(), found10, e10.len())
}

#[allow(clippy::too_many_arguments)]
fn run(
    url: &str,
    args: &Args,
    docs: &Docs,
    vectors: &[Vec<Vec<f32>>],
    query_words: &[Vec<String>],
    query_vectors: &[Vec<f32>],
    embedder: Arc<CachedEmbedder>,
) -> Result<(), Box<dyn std::error::Error>> {
    let total_rows: usize = docs.iter().map(|(_, c)| c.len()).sum();
    let queries = query_vectors.len();
    let (m0, efc0) = args.builds[0];
    let store = PgStore::connect(url, settings(m0, efc0, args.ef_search[0]))?;
    let space = store.ensure_space(&embedder.info(), false)?;
    // Load without the graph (as the first ingest does), then build it in one pass.
    let load = docs.len() - docs.len() / 50;
    let lease = store.begin_run(None, &space, false)?;
    let run = lease.id();
    let started = Instant::now();
    for ((doc, chunks), v) in docs.iter().zip(vectors).take(load) {
        store.write_document(Some(run), &space, doc, chunks, v)?;
    }
    let bulk = started.elapsed();
    let bulk_rows: usize = docs.iter().take(load).map(|(_, c)| c.len()).sum();
    let started = Instant::now();
    store.ensure_hnsw_index(&space)?;
    let build = started.elapsed();
    // The last 2% into the live index (what a later ingest pays per row).
    let started = Instant::now();
    for ((doc, chunks), v) in docs.iter().zip(vectors).skip(load) {
        store.write_document(Some(run), &space, doc, chunks, v)?;
    }
    let live = started.elapsed();
    store.finish_run(run, &space, Default::default())?;
    store.end_run(lease);
    let live_rows = total_rows - bulk_rows;
    store.block_on(sqlx::query("analyze").execute(store.pool()))?;
    println!();
    println!("| ingest into Postgres | rows | time | rows/s |");
    println!("|---|---|---|---|");
    let rate = |n: usize, t: Duration| n as f64 / t.as_secs_f64();
    println!(
        "| documents + chunks + vectors, no HNSW index yet (one transaction per document) | {bulk_rows} | {:.1} s | {:.0} |",
        bulk.as_secs_f64(),
        rate(bulk_rows, bulk)
    );
    println!(
        "| HNSW index build (m {m0}, ef_construction {efc0}) | {bulk_rows} | {:.1} s | {:.0} |",
        build.as_secs_f64(),
        rate(bulk_rows, build)
    );
    println!(
        "| documents + chunks + vectors into the live HNSW index | {live_rows} | {:.1} s | {:.0} |",
        live.as_secs_f64(),
        rate(live_rows, live)
    );

    // Exact answers once per tenant: the reference for every index build and ef_search. The
    // exact top 10 is the head of the exact top 100 (the order is total: distance, then row),
    // so one scan per query serves both k (exact latency is that of k = 100).
    let tenants = [
        ("95% of rows", AccessContext::default()),
        (
            "5% of rows",
            AccessContext::new("small", Vec::<String>::new()),
        ),
    ];
    let mut exact = Vec::new();
    for (label, access) in &tenants {
        let mut times = Vec::new();
        let mut hits = Vec::new();
        for q in query_vectors {
            let t = Instant::now();
            let e =
                store.vector_search_with(VectorSearchMode::Exact, &space, q, 100, access, false)?;
            times.push(t.elapsed());
            hits.push(e.hits);
        }
        let median = |rank: usize| {
            let mut v: Vec<f32> = hits
                .iter()
                .filter_map(|h: &Vec<(String, f32)>| h.get(rank).map(|x| x.1))
                .collect();
            v.sort_by(f32::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        println!(
            "{label}: median cosine similarity of the exact 1st / 10th / 100th neighbour {:.3} / {:.3} / {:.3}",
            median(0),
            median(9),
            median(99)
        );
        let timing = summary(times);
        let top10: Vec<Vec<(String, f32)>> = hits
            .iter()
            .map(|h| h.iter().take(10).cloned().collect())
            .collect();
        exact.push((*label, access.clone(), 10usize, timing, top10));
        exact.push((*label, access.clone(), 100usize, timing, hits));
    }
    println!();
    println!(
        "| vector leg ({total_rows} chunks, {queries} queries) | m | ef_construction | hnsw.ef_search | k | HNSW p50 | HNSW p99 | exact p50 (k = 100) | exact p99 (k = 100) | recall@k | recall@10 of the top 10 of k |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (b, &(m, efc)) in args.builds.iter().enumerate() {
        if b > 0 {
            let builder = PgStore::connect(url, settings(m, efc, args.ef_search[0]))?;
            builder.drop_hnsw_index(&space)?;
            let started = Instant::now();
            builder.ensure_hnsw_index(&space)?;
            println!(
                "| (index rebuilt with m {m}, ef_construction {efc}: {:.1} s for {total_rows} rows) |||||||||||",
                started.elapsed().as_secs_f64()
            );
        }
        for &ef in &args.ef_search {
            let searcher = PgStore::connect(url, settings(m, efc, ef))?;
            for (label, access, k, (e50, e99), exact_hits) in &exact {
                for q in query_vectors.iter().take(10) {
                    searcher.vector_search_with(
                        VectorSearchMode::Hnsw,
                        &space,
                        q,
                        *k,
                        access,
                        false,
                    )?;
                }
                let mut times = Vec::new();
                let mut sums = (0, 0, 0, 0);
                for (q, e) in query_vectors.iter().zip(exact_hits) {
                    let t = Instant::now();
                    let h = searcher.vector_search_with(
                        VectorSearchMode::Hnsw,
                        &space,
                        q,
                        *k,
                        access,
                        false,
                    )?;
                    times.push(t.elapsed());
                    let r = recall(&h.hits, e);
                    sums = (sums.0 + r.0, sums.1 + r.1, sums.2 + r.2, sums.3 + r.3);
                }
                let (h50, h99) = summary(times);
                println!(
                    "| {label} | {m} | {efc} | {ef} | {k} | {h50:.2} ms | {h99:.2} ms | {e50:.2} ms | {e99:.2} ms | {:.3} | {:.3} |",
                    sums.0 as f64 / sums.1.max(1) as f64,
                    sums.2 as f64 / sums.3.max(1) as f64
                );
            }
        }
    }
    fused(url, args, &space, query_words, embedder)
}

/// Fused `searchDocs` with Postgres as the system of record, on the last index built.
fn fused(
    url: &str,
    args: &Args,
    space: &Space,
    query_words: &[Vec<String>],
    embedder: Arc<CachedEmbedder>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (m, efc) = args.builds[args.builds.len() - 1];
    let ef = args.fused_ef_search.unwrap_or(DEFAULT_HNSW_EF_SEARCH);
    let data = tempfile::tempdir()?;
    let started = Instant::now();
    let mut engine = Engine::open_with_pg_store(
        data.path(),
        PgStore::connect(url, settings(m, efc, ef))?,
        embedder.clone(),
    )?;
    let opened = started.elapsed();
    println!();
    println!("{}", load());
    println!(
        "open (load {} chunk records, build the BM25 index from Postgres): {:.1} s",
        engine.store().chunks().expect("chunk records").len(),
        opened.as_secs_f64()
    );
    // The cache answers the query embeddings below; what the model itself costs per query:
    let mut embed_times = Vec::new();
    for words in query_words.iter().take(50) {
        let t = Instant::now();
        embedder.inner().embed(&[words.join(" ").as_str()])?;
        embed_times.push(t.elapsed());
    }
    let (e50, e99) = summary(embed_times);
    println!(
        "query embedding by {} itself (not in the figures below): p50 {e50:.2} ms, p99 {e99:.2} ms",
        space.info.model
    );
    let windows = if args.candidates.is_empty() {
        vec![engine.settings.candidates]
    } else {
        args.candidates.clone()
    };
    println!();
    println!(
        "| `searchDocs` top-5 with Postgres ({} chunks; m {m}, ef_construction {efc}, hnsw.ef_search {ef}) | candidates per leg | p50 | p99 | BM25 leg p50 | vector leg p50 | top-5 ids equal to the first window's |",
        engine.store().chunks().expect("chunk records").len(),
    );
    println!("|---|---|---|---|---|---|---|");
    let mut reference: Vec<Vec<String>> = Vec::new();
    for (w, &window) in windows.iter().enumerate() {
        engine.settings.candidates = window;
        for (label, fusion) in [
            ("fused (both legs, side by side)", None),
            ("BM25 leg only", Some(Fusion::Bm25Only)),
            ("vector leg only", Some(Fusion::VectorOnly)),
        ] {
            let mut times = Vec::new();
            let mut bm25 = Vec::new();
            let mut vector = Vec::new();
            let mut same = 0usize;
            for (i, words) in query_words.iter().enumerate() {
                let mut req = SearchRequest::new(words.clone(), 5, AccessContext::default());
                req.fusion = fusion;
                let t = Instant::now();
                let resp = engine.search_docs(&req)?;
                let elapsed = t.elapsed();
                if i >= 10 {
                    times.push(elapsed);
                    let leg = |name: &str| {
                        Duration::from_secs_f64(
                            resp.legs.get(name).map_or(0.0, |l| l.latency_ms) / 1e3,
                        )
                    };
                    bm25.push(leg("bm25"));
                    vector.push(leg("vector"));
                }
                if fusion.is_none() {
                    let ids: Vec<String> = resp.hits.iter().map(|h| h.chunk_id.clone()).collect();
                    if w == 0 {
                        reference.push(ids);
                    } else if reference.get(i) == Some(&ids) {
                        same += 1;
                    }
                }
            }
            let (p50, p99) = summary(times);
            let agreement = if fusion.is_some() {
                String::new()
            } else if w == 0 {
                "(reference)".to_string()
            } else {
                format!("{same} of {}", query_words.len())
            };
            println!(
                "| {label} | {window} | {p50:.2} ms | {p99:.2} ms | {:.2} ms | {:.2} ms | {agreement} |",
                summary(bm25).0,
                summary(vector).0
            );
        }
    }
    Ok(())
}
