//! PostgreSQL + pgvector at corpus scale: ingest rows/s, vector-leg latency (HNSW vs exact
//! scan) with HNSW recall, and fused `searchDocs` latency with Postgres as the system of record.
//!
//! `DATABASE_URL=postgres://…/postgres cargo run --release --example pg_bench [rows] [queries]`
//! (defaults 100000 and 200), or `… pg_bench --beir DIR [queries]` to use a BEIR corpus (real
//! text, e.g. `../shared/data/scifact`: every abstract a document, chunked by the project's
//! chunker, queries from `queries.jsonl`). Creates a database of its own on that server and drops it at the
//! end. `scripts/pg-bench.sh` starts a throwaway durable server and runs this.
//!
//! The corpus is synthetic but shaped like policy text: 20-chunk documents, each on one of
//! 2,000 topics; a chunk is 40 words, half from its topic's 40 words and half from a
//! 20,000-word vocabulary with Zipf frequencies. Vectors come from the hashing embedder (384
//! dims) over the chunk text; each query is 3 words taken from a random chunk, as a question
//! about that passage would be.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ragtrail::access::AccessContext;
use ragtrail::embed::{Embedder, HashingEmbedder};
use ragtrail::engine::Engine;
use ragtrail::knowledge::{Chunk, DocStatus, Document, sha256_hex};
use ragtrail::search::SearchRequest;
use ragtrail::search::fusion::Fusion;
use ragtrail::store::postgres::{PgSettings, PgStore, VectorSearchMode};
use sqlx::{AssertSqlSafe, Connection, Executor};

const PER_DOC: usize = 20;
const TOPICS: usize = 2000;
const WORDS_PER_TOPIC: usize = 40;
const VOCABULARY: usize = 20_000;

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Pronounceable pseudo-words, distinct by construction.
fn word(i: usize) -> String {
    const C: &[u8] = b"bcdfghjklmnprstvz";
    const V: &[u8] = b"aeiou";
    let mut n = i;
    let mut w = String::new();
    for _ in 0..3 {
        w.push(C[n % C.len()] as char);
        n /= C.len();
        w.push(V[n % V.len()] as char);
        n /= V.len();
    }
    w
}

struct Corpus {
    vocabulary: Vec<String>,
    topics: Vec<Vec<usize>>,
    /// Cumulative Zipf weights (s = 1) over the vocabulary.
    zipf: Vec<f64>,
}

impl Corpus {
    fn new(rng: &mut Rng) -> Self {
        let vocabulary: Vec<String> = (0..VOCABULARY).map(word).collect();
        let topics = (0..TOPICS)
            .map(|_| {
                (0..WORDS_PER_TOPIC)
                    .map(|_| rng.below(VOCABULARY))
                    .collect()
            })
            .collect();
        let mut zipf = Vec::with_capacity(VOCABULARY);
        let mut total = 0.0;
        for r in 1..=VOCABULARY {
            total += 1.0 / r as f64;
            zipf.push(total);
        }
        Self {
            vocabulary,
            topics,
            zipf,
        }
    }
    fn common_word(&self, rng: &mut Rng) -> usize {
        let total = self.zipf.last().copied().unwrap_or(1.0);
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        self.zipf.partition_point(|&c| c < x).min(VOCABULARY - 1)
    }
    fn text(&self, rng: &mut Rng, topic: usize, words: usize) -> String {
        (0..words)
            .map(|_| {
                if rng.below(2) == 0 {
                    let t = &self.topics[topic];
                    self.vocabulary[t[rng.below(t.len())]].as_str()
                } else {
                    self.vocabulary[self.common_word(rng)].as_str()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Three words of a random chunk.
fn query(docs: &[(Document, Vec<Chunk>)], rng: &mut Rng) -> Vec<String> {
    let (_, chunks) = &docs[rng.below(docs.len())];
    let words: Vec<&str> = chunks[rng.below(chunks.len())].text.split(' ').collect();
    (0..3)
        .map(|_| words[rng.below(words.len())].to_string())
        .collect()
}

fn document(corpus: &Corpus, rng: &mut Rng, d: usize) -> (Document, Vec<Chunk>) {
    let topic = rng.below(TOPICS);
    // Every 20th document belongs to a small tenant (5% of the rows).
    let tenant = if d.is_multiple_of(20) {
        "small"
    } else {
        "default"
    };
    let source = format!("bench/doc{d:06}.md");
    let title = format!("Policy {d}");
    let chunks: Vec<Chunk> = (0..PER_DOC)
        .map(|i| {
            let heading = format!("Section {i}");
            let text = corpus.text(rng, topic, 40);
            Chunk {
                id: ragtrail::knowledge::chunk_id(&source, std::slice::from_ref(&heading), 0),
                source: source.clone(),
                title_path: format!("{title} / {heading}"),
                headings: vec![heading],
                source_uri: format!("{source}#section-{i}"),
                ordinal: 0,
                content_hash: sha256_hex(text.as_bytes()),
                text,
                tenant: tenant.to_string(),
                roles: Vec::new(),
                version: None,
                updated: None,
                status: DocStatus::Active,
            }
        })
        .collect();
    let doc = Document {
        source: source.clone(),
        title,
        tenant: tenant.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
        content_hash: sha256_hex(source.as_bytes()),
    };
    (doc, chunks)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default().as_secs_f64() * 1e3
}

fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{name}{query}", &base[..path_start])
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
    let args: Vec<String> = std::env::args().collect();
    let server = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL to a server")?;
    let mut rng = Rng(2026);
    let started = Instant::now();
    let (corpus_docs, query_words) = if args.get(1).map(String::as_str) == Some("--beir") {
        let dir = args.get(2).ok_or("--beir needs a folder")?;
        let queries: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(200);
        beir(Path::new(dir), queries)?
    } else {
        let rows: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
        let queries: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
        let corpus = Corpus::new(&mut rng);
        let docs: Vec<(Document, Vec<Chunk>)> = (0..rows.div_ceil(PER_DOC))
            .map(|d| document(&corpus, &mut rng, d))
            .collect();
        let queries = (0..queries).map(|_| query(&docs, &mut rng)).collect();
        (docs, queries)
    };
    let generated = started.elapsed();
    let name = format!("rt_bench_{}", std::process::id());
    admin(&server, format!("create database {name}"))?;
    let result = run(
        &with_database(&server, &name),
        corpus_docs,
        query_words,
        generated,
    );
    admin(
        &server,
        format!("drop database if exists {name} with (force)"),
    )?;
    result
}

#[derive(serde::Deserialize)]
struct BeirDoc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    text: String,
}

/// A BEIR corpus as documents (every 20th in the small tenant) and its first queries.
#[allow(clippy::type_complexity)]
fn beir(
    dir: &Path,
    queries: usize,
) -> Result<(Vec<(Document, Vec<Chunk>)>, Vec<Vec<String>>), Box<dyn std::error::Error>> {
    let mut docs = Vec::new();
    for (d, line) in std::fs::read_to_string(dir.join("corpus.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
    {
        let b: BeirDoc = serde_json::from_str(line)?;
        let tenant = if d.is_multiple_of(20) {
            "small"
        } else {
            "default"
        };
        let doc = Document {
            source: format!("beir/{}.txt", b.id),
            title: if b.title.is_empty() {
                b.id.clone()
            } else {
                b.title.clone()
            },
            tenant: tenant.to_string(),
            roles: Vec::new(),
            version: None,
            updated: None,
            status: DocStatus::Active,
            content_hash: sha256_hex(line.as_bytes()),
        };
        let chunks = ragtrail::knowledge::chunk_document(&doc, &b.text, false, Default::default());
        docs.push((doc, chunks));
    }
    let mut words = Vec::new();
    for line in std::fs::read_to_string(dir.join("queries.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(queries)
    {
        let q: serde_json::Value = serde_json::from_str(line)?;
        words.push(vec![q["text"].as_str().unwrap_or_default().to_string()]);
    }
    Ok((docs, words))
}

fn run(
    url: &str,
    corpus_docs: Vec<(Document, Vec<Chunk>)>,
    query_words: Vec<Vec<String>>,
    generated: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let docs = corpus_docs.len();
    let queries = query_words.len();
    let embedder = HashingEmbedder::default();
    let started = Instant::now();
    let vectors: Vec<Vec<Vec<f32>>> = corpus_docs
        .iter()
        .map(|(_, chunks)| {
            let texts: Vec<String> = chunks
                .iter()
                .map(|c| format!("{}\n{}", c.title_path, c.text))
                .collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed_batch(&refs)
        })
        .collect();
    let embedded = started.elapsed();
    let total_rows: usize = corpus_docs.iter().map(|(_, c)| c.len()).sum();
    println!(
        "corpus: {docs} documents, {total_rows} chunks; generated in {:.1} s, embedded in {:.1} s",
        generated.as_secs_f64(),
        embedded.as_secs_f64()
    );

    let store = PgStore::connect(url, PgSettings::default())?;
    let space = store.ensure_space(&Embedder::info(&embedder), false)?;
    // Load without the graph (as the first ingest does), then build it in one pass.
    let load = docs - docs / 50;
    let run = store.begin_run(None, &space, false)?;
    let started = Instant::now();
    for ((doc, chunks), v) in corpus_docs.iter().zip(&vectors).take(load) {
        store.write_document(Some(run), &space, doc, chunks, v)?;
    }
    let bulk = started.elapsed();
    let bulk_rows: usize = corpus_docs.iter().take(load).map(|(_, c)| c.len()).sum();
    let started = Instant::now();
    store.ensure_hnsw_index(&space)?;
    let build = started.elapsed();
    // The last 2% into the live index (what a later ingest pays per row).
    let started = Instant::now();
    for ((doc, chunks), v) in corpus_docs.iter().zip(&vectors).skip(load) {
        store.write_document(Some(run), &space, doc, chunks, v)?;
    }
    let live = started.elapsed();
    store.finish_run(run, &space, Default::default())?;
    let live_rows = total_rows - bulk_rows;
    store.block_on(sqlx::query("analyze").execute(store.pool()))?;
    println!();
    println!("| ingest into Postgres | rows | time | rows/s |");
    println!("|---|---|---|---|");
    println!(
        "| documents + chunks + vectors, no HNSW index yet (one transaction per document) | {bulk_rows} | {:.1} s | {:.0} |",
        bulk.as_secs_f64(),
        bulk_rows as f64 / bulk.as_secs_f64()
    );
    println!(
        "| HNSW index build (m 16, ef_construction 64) | {bulk_rows} | {:.1} s | {:.0} |",
        build.as_secs_f64(),
        bulk_rows as f64 / build.as_secs_f64()
    );
    println!(
        "| documents + chunks + vectors into the live HNSW index | {live_rows} | {:.1} s | {:.0} |",
        live.as_secs_f64(),
        live_rows as f64 / live.as_secs_f64()
    );

    // Vector leg: HNSW against exact, unfiltered and with the 5% tenant.
    let query_vectors: Vec<Vec<f32>> = query_words
        .iter()
        .map(|w| embedder.embed(&w.join(" ")))
        .collect();
    println!();
    println!(
        "| vector leg ({total_rows} chunks, {queries} queries) | hnsw.ef_search | k | HNSW p50 | HNSW p99 | exact p50 | exact p99 | recall@k HNSW vs exact | recall@10 of the top 10 of k |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let wide = PgStore::connect(
        url,
        PgSettings {
            hnsw_ef_search: 100,
            ..PgSettings::default()
        },
    )?;
    let widest = PgStore::connect(
        url,
        PgSettings {
            hnsw_ef_search: 200,
            ..PgSettings::default()
        },
    )?;
    let mut spreads = Vec::new();
    for (label, access) in [
        ("tenant with 95% of rows", AccessContext::default()),
        (
            "tenant with 5% of rows",
            AccessContext::new("small", Vec::<String>::new()),
        ),
    ] {
        for k in [10usize, 100] {
            let mut exact_t = Vec::new();
            let mut exact = Vec::new();
            for q in &query_vectors {
                let t = Instant::now();
                let e = store.vector_search_with(
                    VectorSearchMode::Exact,
                    &space,
                    q,
                    k,
                    &access,
                    false,
                )?;
                exact_t.push(t.elapsed());
                exact.push(e.hits);
            }
            let (e50, e99) = summary(exact_t);
            if k == 100 {
                let median = |rank: usize| {
                    let mut v: Vec<f32> = exact
                        .iter()
                        .filter_map(|h| h.get(rank).map(|x| x.1))
                        .collect();
                    v.sort_by(f32::total_cmp);
                    v.get(v.len() / 2).copied().unwrap_or(0.0)
                };
                spreads.push(format!(
                    "{label}: median cosine similarity of the exact 1st / 10th / 100th neighbour {:.3} / {:.3} / {:.3}",
                    median(0),
                    median(9),
                    median(99)
                ));
            }
            for (ef, searcher) in [(40, &store), (100, &wide), (200, &widest)] {
                for q in query_vectors.iter().take(10) {
                    searcher.vector_search(&space, q, k, &access, false)?;
                }
                let mut hnsw_t = Vec::new();
                let mut found = 0usize;
                let mut wanted = 0usize;
                let mut found10 = 0usize;
                let mut wanted10 = 0usize;
                for (q, e) in query_vectors.iter().zip(&exact) {
                    let t = Instant::now();
                    let h = searcher.vector_search_with(
                        VectorSearchMode::Hnsw,
                        &space,
                        q,
                        k,
                        &access,
                        false,
                    )?;
                    hnsw_t.push(t.elapsed());
                    wanted += e.len();
                    found += h
                        .hits
                        .iter()
                        .filter(|x| e.iter().any(|y| y.0 == x.0))
                        .count();
                    // The leg re-sorts what the index returned by distance: how good is the
                    // top 10 of a k-row answer (what fusion mostly sees)?
                    let e10 = &e[..e.len().min(10)];
                    wanted10 += e10.len();
                    found10 += h
                        .hits
                        .iter()
                        .take(10)
                        .filter(|x| e10.iter().any(|y| y.0 == x.0))
                        .count();
                }
                let (h50, h99) = summary(hnsw_t);
                println!(
                    "| {label} | {ef} | {k} | {h50:.2} ms | {h99:.2} ms | {e50:.2} ms | {e99:.2} ms | {:.3} | {:.3} |",
                    found as f64 / wanted.max(1) as f64,
                    found10 as f64 / wanted10.max(1) as f64
                );
            }
        }
    }

    println!();
    for line in &spreads {
        println!("{line}");
    }

    // Fused searchDocs with Postgres as the system of record.
    let data = tempfile::tempdir()?;
    let started = Instant::now();
    let engine = Engine::open_with_pg_store(
        data.path(),
        PgStore::connect(url, PgSettings::default())?,
        Arc::new(HashingEmbedder::default()),
    )?;
    let opened = started.elapsed();
    println!();
    println!(
        "open (load {} chunk records, build the BM25 index from Postgres): {:.1} s",
        engine.store().chunks().len(),
        opened.as_secs_f64()
    );
    println!();
    println!("| `searchDocs` top-5 with Postgres ({total_rows} chunks) | p50 | p99 |");
    println!("|---|---|---|");
    for (label, fusion) in [
        (
            "fused (min-max, both legs; vector leg k = 100 on HNSW)",
            None,
        ),
        ("BM25 leg only", Some(Fusion::Bm25Only)),
    ] {
        let mut times = Vec::new();
        for (i, words) in query_words.iter().enumerate() {
            let mut req = SearchRequest::new(words.clone(), 5, AccessContext::default());
            req.fusion = fusion;
            let t = Instant::now();
            let resp = engine.search_docs(&req)?;
            if i >= 10 {
                times.push(t.elapsed());
            }
            std::hint::black_box(resp);
        }
        let (p50, p99) = summary(times);
        println!("| {label} | {p50:.2} ms | {p99:.2} ms |");
    }
    Ok(())
}
