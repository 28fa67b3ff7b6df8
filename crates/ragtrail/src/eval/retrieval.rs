//! Retrieval evaluation on a BEIR-format set: load it, ingest it into an engine (one chunk per
//! document, the title as the titlePath), rank every judged query with each fusion mode, and
//! score the rankings with [`super::metrics`].
//!
//! The BEIR layout: `corpus.jsonl` (`{"_id","title","text"}`), `queries.jsonl`
//! (`{"_id","text",…}`), `qrels/<split>.tsv` (`query-id<TAB>corpus-id<TAB>score`, header line).
//!
//! Each query's text is passed to the engine as its keywords ([`query_keywords`]: one keyword
//! when short), which the BM25 leg analyses into terms and the vector leg embeds as is. The ranking scored is the engine's own order (ties as
//! `searchDocs` breaks them), `depth` long, without `searchDocs`' top-k cap, snippets or
//! weak-hit filter: see [`Engine::search_ranked`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use super::metrics::{DEEP_K, Judgments, NDCG_K, Qrels, Scores};
use crate::access::{AccessContext, DEFAULT_TENANT};
use crate::embed::{EmbedError, Embedder, EmbedderInfo};
use crate::engine::{Engine, EngineError, IngestProgress, IngestSummary};
use crate::knowledge::{Chunk, DocStatus, Document, chunk_id, sha256_hex};
use crate::search::fusion::Fusion;
use crate::search::{self, RankedRequest, SearchError, SearchRequest};

/// Errors of loading or evaluating a data set.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: document id {id:?} appears twice")]
    DuplicateDocument { path: String, id: String },
    #[error("{dir} has no qrels/*.tsv file: not a BEIR-format folder")]
    NoQrels { dir: String },
    #[error("no split {split:?} in {dir}/qrels; available: {}", available.join(", "))]
    UnknownSplit {
        dir: String,
        split: String,
        available: Vec<String>,
    },
    #[error(
        "{dir}/qrels has several splits ({}) and none is called test: choose one with --split",
        available.join(", ")
    )]
    AmbiguousSplit { dir: String, available: Vec<String> },
    #[error("the corpus in {path} is empty")]
    EmptyCorpus { path: String },
    #[error("cannot build a single-thread pool for timing: {0}")]
    Threads(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
}

/// One corpus document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeirDoc {
    pub id: String,
    pub title: String,
    pub text: String,
}

/// One query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeirQuery {
    pub id: String,
    pub text: String,
}

/// A BEIR-format data set with the judgments of one split.
#[derive(Debug, Clone)]
pub struct BeirSet {
    /// The folder's name (`scifact`).
    pub name: String,
    pub split: String,
    pub corpus: Vec<BeirDoc>,
    /// Every query of `queries.jsonl`, in file order.
    pub queries: Vec<BeirQuery>,
    pub qrels: Qrels,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
    move |source| EvalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A JSON string or number as a string (some exports write numeric ids).
fn json_id(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn json_lines(path: &Path) -> Result<Vec<(usize, serde_json::Value)>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| (i + 1, v))
                .map_err(|e| EvalError::Parse {
                    path: path.display().to_string(),
                    line: i + 1,
                    message: e.to_string(),
                })
        })
        .collect()
}

fn parse_err(path: &Path, line: usize, message: impl Into<String>) -> EvalError {
    EvalError::Parse {
        path: path.display().to_string(),
        line,
        message: message.into(),
    }
}

/// The splits a BEIR folder has judgments for (`qrels/<split>.tsv`), sorted.
pub fn splits(dir: &Path) -> Result<Vec<String>, EvalError> {
    let qrels = dir.join("qrels");
    let entries = std::fs::read_dir(&qrels).map_err(io_err(&qrels))?;
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".tsv").map(str::to_string)
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Reads a BEIR folder. `split` defaults to `test`, or to the only split there is.
pub fn load(dir: &Path, split: Option<&str>) -> Result<BeirSet, EvalError> {
    let available = splits(dir)?;
    let display = dir.display().to_string();
    let split = match split {
        Some(s) if available.iter().any(|a| a == s) => s.to_string(),
        Some(s) => {
            return Err(EvalError::UnknownSplit {
                dir: display,
                split: s.to_string(),
                available,
            });
        }
        None if available.iter().any(|a| a == "test") => "test".to_string(),
        None => match available.as_slice() {
            [] => return Err(EvalError::NoQrels { dir: display }),
            [only] => only.clone(),
            _ => {
                return Err(EvalError::AmbiguousSplit {
                    dir: display,
                    available,
                });
            }
        },
    };
    let corpus_path = dir.join("corpus.jsonl");
    let mut seen = HashSet::new();
    let mut corpus = Vec::new();
    for (line, v) in json_lines(&corpus_path)? {
        let id = json_id(v.get("_id"))
            .ok_or_else(|| parse_err(&corpus_path, line, "a document needs an \"_id\""))?;
        if !seen.insert(id.clone()) {
            return Err(EvalError::DuplicateDocument {
                path: corpus_path.display().to_string(),
                id,
            });
        }
        let field = |name: &str| {
            v.get(name)
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_string()
        };
        corpus.push(BeirDoc {
            id,
            title: field("title"),
            text: field("text"),
        });
    }
    if corpus.is_empty() {
        return Err(EvalError::EmptyCorpus {
            path: corpus_path.display().to_string(),
        });
    }
    let queries_path = dir.join("queries.jsonl");
    let mut queries = Vec::new();
    for (line, v) in json_lines(&queries_path)? {
        let id = json_id(v.get("_id"))
            .ok_or_else(|| parse_err(&queries_path, line, "a query needs an \"_id\""))?;
        let text = v
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or_else(|| parse_err(&queries_path, line, "a query needs a \"text\""))?;
        queries.push(BeirQuery {
            id,
            text: text.to_string(),
        });
    }
    let qrels_path = dir.join("qrels").join(format!("{split}.tsv"));
    let qrels = load_qrels(&qrels_path)?;
    Ok(BeirSet {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| display.clone()),
        split,
        corpus,
        queries,
        qrels,
    })
}

/// Reads `query-id<TAB>corpus-id<TAB>score` lines; a first line whose score is not a number is
/// the header. A pair judged twice keeps its last grade.
pub fn load_qrels(path: &Path) -> Result<Qrels, EvalError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let mut qrels = Qrels::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [query, doc, score] = cols.as_slice() else {
            return Err(parse_err(
                path,
                i + 1,
                format!("expected 3 tab-separated columns, found {}", cols.len()),
            ));
        };
        let grade = match score.parse::<i32>() {
            Ok(g) => g,
            Err(_) if i == 0 => continue, // header
            Err(_) => {
                return Err(parse_err(
                    path,
                    i + 1,
                    format!("score {score:?} is not an integer"),
                ));
            }
        };
        qrels
            .entry(query.to_string())
            .or_default()
            .insert(doc.to_string(), grade);
    }
    Ok(qrels)
}

/// How BEIR documents become chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkShape {
    /// Also put the title on the first line of the chunk text, which the embedder sees and
    /// snippets show. (BM25 already scores a one-chunk document's title with its text.)
    pub title_in_text: bool,
}

/// The document and chunk one BEIR document becomes: the source is its id, the titlePath its
/// title, the chunk its text, visible to the default tenant.
pub fn document_chunk(doc: &BeirDoc, shape: ChunkShape) -> (Document, Chunk) {
    let text = if shape.title_in_text && !doc.title.is_empty() {
        format!("{}\n{}", doc.title, doc.text)
    } else {
        doc.text.clone()
    };
    let source = doc.id.clone();
    let document = Document {
        source: source.clone(),
        title: doc.title.clone(),
        tenant: DEFAULT_TENANT.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
        content_hash: sha256_hex(format!("{}\n{}", doc.title, doc.text).as_bytes()),
    };
    let chunk = Chunk {
        id: chunk_id(&source, &[], 0),
        source: source.clone(),
        title_path: doc.title.clone(),
        headings: Vec::new(),
        source_uri: source,
        ordinal: 0,
        content_hash: sha256_hex(text.as_bytes()),
        text,
        tenant: DEFAULT_TENANT.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
    };
    (document, chunk)
}

/// Chunk id → BEIR document id.
pub type ChunkMap = HashMap<String, String>;

/// Replaces the engine's content with the corpus (one chunk per document).
pub fn ingest(
    engine: &mut Engine,
    set: &BeirSet,
    shape: ChunkShape,
    progress: &mut dyn FnMut(IngestProgress),
) -> Result<(IngestSummary, ChunkMap), EvalError> {
    let mut documents = Vec::with_capacity(set.corpus.len());
    let mut chunks = Vec::with_capacity(set.corpus.len());
    let mut map = ChunkMap::with_capacity(set.corpus.len());
    for doc in &set.corpus {
        let (d, c) = document_chunk(doc, shape);
        map.insert(c.id.clone(), doc.id.clone());
        documents.push(d);
        chunks.push(c);
    }
    let summary = engine.replace_all(
        documents,
        chunks,
        Some(format!("beir:{}", set.name)),
        progress,
    )?;
    Ok((summary, map))
}

/// The queries that can be scored: judged in the split, with at least one relevant document,
/// and present in `queries.jsonl`. The rest are counted, not scored (see [`super::metrics`]).
pub struct JudgedQueries<'a> {
    pub queries: Vec<(&'a BeirQuery, &'a Judgments)>,
    /// Judged queries whose judgments are all grade ≤ 0.
    pub no_relevant: usize,
    /// Judged query ids that `queries.jsonl` lacks.
    pub missing_text: usize,
}

/// See [`JudgedQueries`]; queries keep their `queries.jsonl` order.
pub fn judged_queries(set: &BeirSet) -> JudgedQueries<'_> {
    let mut out = JudgedQueries {
        queries: Vec::new(),
        no_relevant: 0,
        missing_text: 0,
    };
    let known: HashSet<&str> = set.queries.iter().map(|q| q.id.as_str()).collect();
    out.missing_text = set
        .qrels
        .keys()
        .filter(|q| !known.contains(q.as_str()))
        .count();
    let mut done = HashSet::new();
    for q in &set.queries {
        let Some(j) = set.qrels.get(&q.id) else {
            continue;
        };
        if !done.insert(q.id.as_str()) {
            continue;
        }
        if super::metrics::has_relevant(j) {
            out.queries.push((q, j));
        } else {
            out.no_relevant += 1;
        }
    }
    out
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct RetrievalOptions {
    /// Fusion modes, each scored on every query.
    pub modes: Vec<Fusion>,
    /// Length of each ranking (≥ 100 for recall@100).
    pub depth: usize,
    /// Also measure single-thread queries per second of each mode (a second, timed pass).
    pub timing: bool,
}

impl Default for RetrievalOptions {
    fn default() -> Self {
        Self {
            modes: default_modes(),
            depth: DEEP_K,
            timing: false,
        }
    }
}

/// BM25 alone, vector alone, RRF (k = 60) and min-max with the hashing embedder's default
/// weight (0.3; with a semantic embedder the engine defaults to `standout`: add it).
pub fn default_modes() -> Vec<Fusion> {
    vec![
        Fusion::Bm25Only,
        Fusion::VectorOnly,
        Fusion::Rrf {
            k: search::fusion::DEFAULT_RRF_K,
        },
        Fusion::MinMax {
            bm25_weight: search::fusion::DEFAULT_BM25_WEIGHT,
        },
    ]
}

/// Single-thread throughput of one mode, over every judged query.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    /// The ranking alone ([`Engine::search_ranked`], `depth` long): the legs and the fusion.
    pub ranked_qps: f64,
    /// The full `searchDocs` call, top 10: legs, fusion, snippets, sufficiency.
    pub search_docs_qps: f64,
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeReport {
    /// `bm25`, `vector`, `rrf:60`, `minmax:0.3`.
    pub mode: String,
    #[serde(flatten)]
    pub scores: Scores,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
}

/// One query under one mode, for inspection.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryResult {
    pub mode: String,
    pub query_id: String,
    pub query: String,
    #[serde(flatten)]
    pub scores: Scores,
    /// Document ids of the first 10 results.
    pub top10: Vec<String>,
    /// Relevant document ids and their 1-based rank in the ranking (None: not in it).
    pub relevant: Vec<(String, Option<usize>)>,
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrievalReport {
    pub dataset: String,
    pub split: String,
    pub documents: usize,
    /// Queries scored (judged, with a relevant document, with a text).
    pub queries: usize,
    /// Judged queries left out because none of their documents is relevant.
    pub skipped_no_relevant: usize,
    /// Judged queries left out because `queries.jsonl` lacks their text.
    pub skipped_missing_text: usize,
    pub depth: usize,
    /// `kind:model (dims)` of the vector leg.
    pub embedder: String,
    pub title_boost: f32,
    pub modes: Vec<ModeReport>,
    #[serde(skip)]
    pub per_query: Vec<QueryResult>,
}

/// A query's text as `searchDocs` keywords: whole words packed, in order, into keywords within
/// `search::MAX_KEYWORD_CHARS_PER_SEARCH` characters (a short query is one keyword), at most
/// `search::MAX_KEYWORDS_PER_SEARCH` of them. The BM25 leg analyses each keyword into terms
/// and the vector leg embeds them joined by spaces, so packing changes neither.
pub fn query_keywords(text: &str) -> Vec<String> {
    let max = search::MAX_KEYWORD_CHARS_PER_SEARCH;
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in text.split_whitespace() {
        let mut word = word;
        // A word longer than a keyword (a long CJK run) is cut at character boundaries.
        while crate::text::char_len(word) > max {
            let head = crate::text::truncate_chars(word, max);
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            out.push(head.to_string());
            word = &word[head.len()..];
        }
        let needed = crate::text::char_len(&current) + usize::from(!current.is_empty());
        if needed + crate::text::char_len(word) > max {
            out.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.truncate(search::MAX_KEYWORDS_PER_SEARCH);
    out
}

/// An embedder that remembers its query embeddings: an evaluation ranks every query once per
/// mode, and without it a model embedder would embed the same question again for each mode
/// that has a vector leg (minutes per mode on 2 cores). Documents pass through unchanged; the
/// info is the inner embedder's, so the index sees the same embedder.
pub struct QueryMemo {
    inner: Arc<dyn Embedder>,
    seen: Mutex<HashMap<String, Vec<f32>>>,
}

impl QueryMemo {
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            inner,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Adds the query embeddings a previous evaluation saved with [`QueryMemo::save`] (a
    /// model embedder takes minutes to embed thousands of questions again); returns how many.
    /// A missing file adds none; a file written by another embedder (model, dimension or
    /// marking) is an error naming both.
    pub fn load(&self, path: &Path) -> Result<usize, EvalError> {
        if !path.exists() {
            return Ok(0);
        }
        let lines = json_lines(path)?;
        let expected = self.inner.info().describe();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut added = 0;
        for (line, v) in lines {
            if line == 1 {
                let written = v.get("embedder").and_then(|e| e.as_str()).unwrap_or("");
                if written != expected {
                    return Err(parse_err(
                        path,
                        line,
                        format!(
                            "query embeddings of {written:?}, but the configured embedder is {expected:?}: remove the file or configure that embedder"
                        ),
                    ));
                }
                continue;
            }
            let entry: CachedQuery = serde_json::from_value(v)
                .map_err(|e| parse_err(path, line, format!("not a cached query: {e}")))?;
            seen.insert(entry.text, entry.vector);
            added += 1;
        }
        Ok(added)
    }

    /// Writes every query embedding seen so far to `path` (JSON lines: the embedder first).
    pub fn save(&self, path: &Path) -> Result<(), EvalError> {
        use std::io::Write;
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let file = std::fs::File::create(path).map_err(io_err(path))?;
        let mut out = std::io::BufWriter::new(file);
        let header = serde_json::json!({ "embedder": self.inner.info().describe() });
        writeln!(out, "{header}").map_err(io_err(path))?;
        let mut texts: Vec<&String> = seen.keys().collect();
        texts.sort();
        for text in texts {
            let line = serde_json::json!({ "text": text, "vector": seen[text] });
            writeln!(out, "{line}").map_err(io_err(path))?;
        }
        out.flush().map_err(io_err(path))
    }
}

/// One line of a [`QueryMemo::save`] file.
#[derive(serde::Deserialize)]
struct CachedQuery {
    text: String,
    vector: Vec<f32>,
}

impl Embedder for QueryMemo {
    fn info(&self) -> EmbedderInfo {
        self.inner.info()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let known: Option<Vec<Vec<f32>>> = {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            texts.iter().map(|t| seen.get(*t).cloned()).collect()
        };
        if let Some(vectors) = known {
            return Ok(vectors);
        }
        let vectors = self.inner.embed_query(texts)?;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for (t, v) in texts.iter().zip(&vectors) {
            seen.insert((*t).to_string(), v.clone());
        }
        Ok(vectors)
    }

    fn truncated_inputs(&self) -> u64 {
        self.inner.truncated_inputs()
    }

    fn preferred_batch(&self) -> usize {
        self.inner.preferred_batch()
    }

    fn is_costly(&self) -> bool {
        self.inner.is_costly()
    }
}

/// Ranks one query under one mode: BEIR document ids, best first.
pub fn rank(
    engine: &Engine,
    map: &ChunkMap,
    query: &str,
    fusion: Fusion,
    depth: usize,
) -> Result<Vec<String>, EvalError> {
    let keywords = query_keywords(query);
    let access = AccessContext::default();
    let hits = match engine.search_ranked(&RankedRequest {
        keywords: &keywords,
        access: &access,
        fusion,
        depth,
    }) {
        Ok(h) => h,
        // A query made only of punctuation or stop words ranks nothing.
        Err(EngineError::Search(SearchError::NoKeywords)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(hits
        .into_iter()
        .filter_map(|h| map.get(&h.id).cloned())
        .collect())
}

/// Scores every judged query under every mode of `options` (the engine holds the corpus, see
/// [`ingest`]).
pub fn evaluate(
    engine: &Engine,
    map: &ChunkMap,
    set: &BeirSet,
    options: &RetrievalOptions,
) -> Result<RetrievalReport, EvalError> {
    let judged = judged_queries(set);
    let depth = options.depth.max(DEEP_K);
    let mut modes = Vec::new();
    let mut per_query = Vec::new();
    for &fusion in &options.modes {
        let mode = fusion.to_string();
        let mut scores = Vec::with_capacity(judged.queries.len());
        for (q, j) in &judged.queries {
            let ranked = rank(engine, map, &q.text, fusion, depth)?;
            let s = Scores::of(&ranked, j).unwrap_or_default();
            let position: HashMap<&str, usize> = ranked
                .iter()
                .enumerate()
                .rev()
                .map(|(i, d)| (d.as_str(), i + 1))
                .collect();
            let mut relevant: Vec<(String, Option<usize>)> = j
                .iter()
                .filter(|(_, g)| **g >= 1)
                .map(|(d, _)| (d.clone(), position.get(d.as_str()).copied()))
                .collect();
            relevant.sort();
            scores.push(s);
            per_query.push(QueryResult {
                mode: mode.clone(),
                query_id: q.id.clone(),
                query: q.text.clone(),
                scores: s,
                top10: ranked.into_iter().take(NDCG_K).collect(),
                relevant,
            });
        }
        let timing = if options.timing {
            Some(time_mode(engine, &judged, fusion, depth)?)
        } else {
            None
        };
        modes.push(ModeReport {
            mode,
            scores: Scores::mean(&scores),
            timing,
        });
    }
    let info = engine.embedder().info();
    Ok(RetrievalReport {
        dataset: set.name.clone(),
        split: set.split.clone(),
        documents: set.corpus.len(),
        queries: judged.queries.len(),
        skipped_no_relevant: judged.no_relevant,
        skipped_missing_text: judged.missing_text,
        depth,
        embedder: format!("{}:{} ({} dims)", info.kind, info.model, info.dims),
        title_boost: engine.settings.title_boost,
        modes,
        per_query,
    })
}

/// Timed passes per measurement; the best pass is kept (the machines are shared and noisy).
const TIMED_PASSES: usize = 3;

/// Queries per second of one mode, on one thread (both legs included: the pool has one
/// worker), over every judged query; the best of [`TIMED_PASSES`] passes, each after the
/// warm-up that the scoring pass already was.
fn time_mode(
    engine: &Engine,
    judged: &JudgedQueries<'_>,
    fusion: Fusion,
    depth: usize,
) -> Result<Timing, EvalError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| EvalError::Threads(e.to_string()))?;
    let access = AccessContext::default();
    let keywords: Vec<Vec<String>> = judged
        .queries
        .iter()
        .map(|(q, _)| query_keywords(&q.text))
        .collect();
    let n = keywords.len().max(1) as f64;
    pool.install(|| -> Result<Timing, EvalError> {
        let mut best_ranked = f64::INFINITY;
        let mut best_docs = f64::INFINITY;
        for _ in 0..TIMED_PASSES {
            let started = Instant::now();
            for k in &keywords {
                let req = RankedRequest {
                    keywords: k,
                    access: &access,
                    fusion,
                    depth,
                };
                match engine.search_ranked(&req) {
                    Ok(hits) => {
                        std::hint::black_box(hits);
                    }
                    Err(EngineError::Search(SearchError::NoKeywords)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            best_ranked = best_ranked.min(started.elapsed().as_secs_f64());
            let started = Instant::now();
            for k in &keywords {
                let mut req = SearchRequest::new(k.clone(), NDCG_K, access.clone());
                req.fusion = Some(fusion);
                match engine.search_docs(&req) {
                    Ok(resp) => {
                        std::hint::black_box(resp);
                    }
                    Err(EngineError::Search(SearchError::NoKeywords)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            best_docs = best_docs.min(started.elapsed().as_secs_f64());
        }
        Ok(Timing {
            ranked_qps: n / best_ranked.max(f64::MIN_POSITIVE),
            search_docs_qps: n / best_docs.max(f64::MIN_POSITIVE),
        })
    })
}

/// Writes each judged query's two legs as JSON lines, to study fusions offline: the query,
/// its relevant documents (id → grade), and each leg's hits as `[document id, raw score]`,
/// best first, `depth` long (the lists `searchDocs` fuses).
pub fn write_legs(
    engine: &Engine,
    map: &ChunkMap,
    set: &BeirSet,
    depth: usize,
    path: &Path,
) -> Result<(), EvalError> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(io_err(path))?;
    let mut out = std::io::BufWriter::new(file);
    let access = AccessContext::default();
    for (q, j) in &judged_queries(set).queries {
        let keywords = query_keywords(&q.text);
        let leg = |fusion: Fusion| -> Result<Vec<(String, f32)>, EvalError> {
            match engine.search_ranked(&RankedRequest {
                keywords: &keywords,
                access: &access,
                fusion,
                depth,
            }) {
                Ok(hits) => Ok(hits
                    .into_iter()
                    .filter_map(|h| {
                        let score = match fusion {
                            Fusion::Bm25Only => h.bm25?.score,
                            _ => h.vector?.score,
                        };
                        Some((map.get(&h.id)?.clone(), score))
                    })
                    .collect()),
                Err(EngineError::Search(SearchError::NoKeywords)) => Ok(Vec::new()),
                Err(e) => Err(e.into()),
            }
        };
        let line = serde_json::json!({
            "queryId": q.id,
            "query": q.text,
            "relevant": j,
            "bm25": leg(Fusion::Bm25Only)?,
            "vector": leg(Fusion::VectorOnly)?,
        });
        writeln!(out, "{line}").map_err(io_err(path))?;
    }
    out.flush().map_err(io_err(path))
}

/// Writes the per-query results as JSON lines.
pub fn write_per_query(path: &PathBuf, results: &[QueryResult]) -> Result<(), EvalError> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(io_err(path))?;
    let mut out = std::io::BufWriter::new(file);
    for r in results {
        let line = serde_json::to_string(r).map_err(|e| EvalError::Io {
            path: path.display().to_string(),
            source: e.into(),
        })?;
        writeln!(out, "{line}").map_err(io_err(path))?;
    }
    out.flush().map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the query texts it is asked to embed.
    struct Counting {
        inner: crate::embed::HashingEmbedder,
        queries: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for Counting {
        fn info(&self) -> EmbedderInfo {
            self.inner.info()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.inner.embed_batch(texts))
        }
        fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.queries
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            self.embed(texts)
        }
    }

    #[test]
    fn the_query_memo_embeds_each_query_once() {
        let counting = Arc::new(Counting {
            inner: crate::embed::HashingEmbedder::default(),
            queries: Default::default(),
        });
        let memo = QueryMemo::new(counting.clone());
        let first = memo.embed_query(&["annual leave"]).expect("embed");
        let again = memo.embed_query(&["annual leave"]).expect("embed");
        assert_eq!(first, again);
        assert_eq!(
            counting.queries.load(std::sync::atomic::Ordering::SeqCst),
            1
        );
        memo.embed_query(&["sick leave"]).expect("embed");
        assert_eq!(
            counting.queries.load(std::sync::atomic::Ordering::SeqCst),
            2
        );
        // Documents are never remembered: each passage call reaches the embedder.
        assert_eq!(
            memo.embed(&["annual leave"]).expect("embed")[0].len(),
            first[0].len()
        );
        assert_eq!(memo.info(), counting.info());
    }

    #[test]
    fn qrels_skip_the_header_and_reject_bad_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("test.tsv");
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n\nq2\td1\t1\n",
        )
        .expect("write");
        let q = load_qrels(&p).expect("qrels");
        assert_eq!(q["q1"]["d1"], 2);
        assert_eq!(q["q1"]["d2"], 0);
        assert_eq!(q["q2"].len(), 1);
        std::fs::write(&p, "q1\td1\t1\nq1\td2\tx\n").expect("write");
        let err = load_qrels(&p).expect_err("bad score");
        assert!(err.to_string().contains(":2:"), "{err}");
        std::fs::write(&p, "q1 d1 1\n").expect("write");
        assert!(load_qrels(&p).is_err());
    }

    #[test]
    fn beir_documents_become_one_chunk_titled_by_the_title() {
        let doc = BeirDoc {
            id: "4983".into(),
            title: "White matter".into(),
            text: "Alterations of the architecture.".into(),
        };
        let (d, c) = document_chunk(&doc, ChunkShape::default());
        assert_eq!(d.source, "4983");
        assert_eq!(c.title_path, "White matter");
        assert_eq!(c.text, "Alterations of the architecture.");
        assert_eq!(c.id, chunk_id("4983", &[], 0));
        assert!(crate::index::chunk_id_to_u64(&c.id).is_some());
        let (_, c) = document_chunk(
            &doc,
            ChunkShape {
                title_in_text: true,
            },
        );
        assert_eq!(c.text, "White matter\nAlterations of the architecture.");
        assert_eq!(c.title_path, "White matter");
    }

    #[test]
    fn long_queries_are_packed_into_keywords_within_the_limits() {
        assert_eq!(query_keywords("  short query\n"), ["short query"]);
        assert!(query_keywords(" \t").is_empty());
        let max = search::MAX_KEYWORD_CHARS_PER_SEARCH;
        let long = vec!["word"; 100].join(" ");
        let k = query_keywords(&long);
        assert!(k.len() > 1 && k.iter().all(|x| x.chars().count() <= max));
        assert_eq!(k.join(" "), long);
        let run = "报".repeat(max + 5);
        let k = query_keywords(&format!("a {run} b"));
        assert_eq!(
            k,
            [
                "a".to_string(),
                "报".repeat(max),
                "报报报报报 b".to_string()
            ]
        );
        let many = vec!["x".repeat(max); 40].join(" ");
        assert_eq!(query_keywords(&many).len(), search::MAX_KEYWORDS_PER_SEARCH);
    }
}
