//! The engine: one data directory holding the chunk store (system of record) and the BM25 index
//! derived from it. Ingest updates both; a crash between the two is noticed and repaired on open.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::index::{Bm25Index, Bm25Query, DEFAULT_TITLE_BOOST, IndexError};
use crate::knowledge::{self, Chunk, Document, KnowledgeError, ScanOptions, SkippedFile};
use crate::search::snippet::{DEFAULT_SNIPPET_CHARS, keyword_terms, snippet};
use crate::search::{
    DEFAULT_CANDIDATES, LegStats, MAX_TOP_K, SearchError, SearchHit, SearchRequest, SearchResponse,
};
use crate::store::{ChunkStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Knowledge(#[from] KnowledgeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Search(#[from] SearchError),
}

/// What an ingest changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestSummary {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    pub unchanged: usize,
    pub chunks: usize,
    pub skipped: Vec<SkippedFile>,
    pub generation: u64,
}

/// Ingest options.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    pub scan: ScanOptions,
    /// Re-read and re-index every document, even unchanged ones.
    pub rebuild: bool,
}

/// Progress of a long ingest, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum IngestProgress {
    /// Indexing starts: this many chunks to write.
    Indexing { total: usize },
    /// `done` chunks written so far.
    Indexed { done: usize },
}

pub struct Engine {
    data_dir: PathBuf,
    store: ChunkStore,
    index: Bm25Index,
    /// How much a heading match counts against a body match.
    pub title_boost: f32,
}

impl Engine {
    /// Opens (or creates) the data directory. If the BM25 index does not reflect the store's
    /// current generation (a crash between the two commits), it is rebuilt from the store.
    pub fn open(data_dir: &Path) -> Result<Self, EngineError> {
        let store = ChunkStore::open(&data_dir.join("store"))?;
        let index = Bm25Index::open_or_create(&data_dir.join("index"))?;
        let engine = Self {
            data_dir: data_dir.to_path_buf(),
            store,
            index,
            title_boost: DEFAULT_TITLE_BOOST,
        };
        let indexed = engine.index.committed_generation()?;
        if indexed.unwrap_or(0) != engine.store.generation() {
            tracing::warn!(
                store = engine.store.generation(),
                index = ?indexed,
                "the BM25 index does not match the chunk store (an interrupted ingest?); rebuilding it from the store"
            );
            engine.reindex(&mut |_| {})?;
        }
        Ok(engine)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn store(&self) -> &ChunkStore {
        &self.store
    }

    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    /// Whether anything was ever ingested.
    pub fn is_empty(&self) -> bool {
        self.store.chunks().is_empty()
    }

    /// Rebuilds the BM25 index from the store's current generation.
    pub fn reindex(&self, progress: &mut dyn FnMut(IngestProgress)) -> Result<(), EngineError> {
        let mut update = self.index.update()?;
        update.delete_all()?;
        progress(IngestProgress::Indexing {
            total: self.store.chunks().len(),
        });
        for (i, chunk) in self.store.chunks().iter().enumerate() {
            update.add_chunk(chunk)?;
            if i % 256 == 0 {
                progress(IngestProgress::Indexed { done: i });
            }
        }
        update.commit(self.store.generation())?;
        Ok(())
    }

    /// Brings the store and the index in line with the knowledge folder `root`.
    ///
    /// Unchanged documents are skipped, changed ones have their chunks replaced, deleted files'
    /// chunks are removed. Nothing is visible until the end: a crash leaves the previous state.
    pub fn ingest(
        &mut self,
        root: &Path,
        options: &IngestOptions,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<IngestSummary, EngineError> {
        let scan = knowledge::scan(root, &options.scan)?;
        let old_docs: HashMap<&str, &Document> = self
            .store
            .documents()
            .iter()
            .map(|d| (d.source.as_str(), d))
            .collect();
        let new_sources: HashSet<&str> = scan.documents.iter().map(|d| d.source.as_str()).collect();
        let mut summary = IngestSummary {
            skipped: scan.skipped.clone(),
            ..IngestSummary::default()
        };
        let mut touched: HashSet<String> = HashSet::new();
        for doc in &scan.documents {
            match old_docs.get(doc.source.as_str()) {
                None => {
                    summary.added.push(doc.source.clone());
                    touched.insert(doc.source.clone());
                }
                Some(old)
                    if options.rebuild || old.content_hash != doc.content_hash || **old != *doc =>
                {
                    summary.changed.push(doc.source.clone());
                    touched.insert(doc.source.clone());
                }
                Some(_) => summary.unchanged += 1,
            }
        }
        for old in self.store.documents() {
            // A file that is now skipped (unreadable, too large) keeps its previous chunks
            // rather than silently disappearing; only files that are gone are removed.
            let still_there = root.join(&old.source).exists();
            if !new_sources.contains(old.source.as_str()) && !still_there {
                summary.removed.push(old.source.clone());
                touched.insert(old.source.clone());
            }
        }
        let kept_old: Vec<&Document> = self
            .store
            .documents()
            .iter()
            .filter(|d| !new_sources.contains(d.source.as_str()) && !touched.contains(&d.source))
            .collect();
        let nothing_changed = touched.is_empty() && !options.rebuild;
        if nothing_changed {
            summary.chunks = self.store.chunks().len();
            summary.generation = self.store.generation();
            return Ok(summary);
        }
        // The new generation: unchanged documents keep their stored chunks.
        let mut documents: Vec<Document> = Vec::new();
        let mut chunks: Vec<Chunk> = Vec::new();
        let mut new_chunks_by_source: HashMap<&str, Vec<&Chunk>> = HashMap::new();
        for c in &scan.chunks {
            new_chunks_by_source
                .entry(c.source.as_str())
                .or_default()
                .push(c);
        }
        let mut old_chunks_by_source: HashMap<&str, Vec<&Chunk>> = HashMap::new();
        for c in self.store.chunks() {
            old_chunks_by_source
                .entry(c.source.as_str())
                .or_default()
                .push(c);
        }
        for doc in scan.documents.iter().chain(kept_old.iter().copied()) {
            documents.push(doc.clone());
            let from_scan = touched.contains(&doc.source)
                || !old_chunks_by_source.contains_key(doc.source.as_str());
            let list = if from_scan {
                new_chunks_by_source.get(doc.source.as_str())
            } else {
                old_chunks_by_source.get(doc.source.as_str())
            };
            chunks.extend(list.into_iter().flatten().map(|c| (*c).clone()));
        }
        documents.sort_by(|a, b| a.source.cmp(&b.source));
        let next =
            self.store
                .write_generation(documents, chunks, Some(root.display().to_string()))?;
        let mut update = self.index.update()?;
        let to_index: Vec<&Chunk> = if options.rebuild {
            update.delete_all()?;
            next.chunks().iter().collect()
        } else {
            for source in &touched {
                update.delete_source(source);
            }
            next.chunks()
                .iter()
                .filter(|c| touched.contains(&c.source))
                .collect()
        };
        progress(IngestProgress::Indexing {
            total: to_index.len(),
        });
        for (i, chunk) in to_index.iter().enumerate() {
            update.add_chunk(chunk)?;
            if i % 64 == 0 {
                progress(IngestProgress::Indexed { done: i });
            }
        }
        progress(IngestProgress::Indexed {
            done: to_index.len(),
        });
        update.commit(next.generation())?;
        next.make_current()?;
        self.store = next;
        summary.chunks = self.store.chunks().len();
        summary.generation = self.store.generation();
        Ok(summary)
    }

    /// `searchDocs`: the hits for `keywords`, at most `top_k`, under the request's access context.
    pub fn search_docs(&self, req: &SearchRequest) -> Result<SearchResponse, EngineError> {
        let keywords: Vec<String> = req
            .keywords
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        if keywords.is_empty() {
            return Err(SearchError::NoKeywords.into());
        }
        let top_k = req.top_k.clamp(1, MAX_TOP_K);
        let started = Instant::now();
        let matches = self.index.search(&Bm25Query {
            keywords: &keywords,
            access: &req.access,
            include_superseded: req.include_superseded,
            limit: DEFAULT_CANDIDATES.max(top_k),
            title_boost: self.title_boost,
        })?;
        let bm25_stats = LegStats {
            count: matches.len() as u32,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        };
        let terms = keyword_terms(&keywords);
        let mut hits = Vec::new();
        let mut content_hashes = Vec::new();
        for (rank, m) in matches.iter().enumerate().take(top_k) {
            let Some(chunk) = self
                .store
                .position_of_id64(m.id64)
                .map(|p| &self.store.chunks()[p])
            else {
                continue;
            };
            // Defence in depth: the index filters by access, the store record is the authority.
            if !req.access.allows(&chunk.tenant, &chunk.roles) {
                continue;
            }
            let mut metadata = BTreeMap::new();
            metadata.insert("tenant".to_string(), chunk.tenant.clone());
            metadata.insert("status".to_string(), chunk.status.as_str().to_string());
            if let Some(v) = &chunk.version {
                metadata.insert("version".to_string(), v.clone());
            }
            if let Some(u) = &chunk.updated {
                metadata.insert("updated".to_string(), u.clone());
            }
            metadata.insert("bm25Rank".to_string(), (rank + 1).to_string());
            metadata.insert("bm25Score".to_string(), format!("{:.4}", m.score));
            hits.push(SearchHit {
                chunk_id: chunk.id.clone(),
                title_path: chunk.title_path.clone(),
                snippet: snippet(&chunk.text, &terms, DEFAULT_SNIPPET_CHARS),
                source_uri: chunk.source_uri.clone(),
                score: f64::from(m.score),
                metadata,
            });
            content_hashes.push(chunk.content_hash.clone());
        }
        let mut legs = BTreeMap::new();
        legs.insert("bm25".to_string(), bm25_stats);
        Ok(SearchResponse {
            hits,
            content_hashes,
            legs,
        })
    }
}
