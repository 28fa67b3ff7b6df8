//! The engine: one data directory holding the chunk store (system of record) and the BM25 index
//! derived from it. Ingest updates both; a crash between the two is noticed and repaired on open.
//! With `DATABASE_URL`, PostgreSQL is the system of record instead (see `engine/postgres.rs`).

#[cfg(feature = "postgres")]
mod postgres;
pub mod status;
mod versions;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::access::AccessContext;
use crate::embed::{EmbedError, Embedder, HashingEmbedder};
use crate::index::{Bm25Index, IndexError};
use crate::knowledge::{
    self, Chunk, Document, FolderStamps, FormatCount, KnowledgeChanges, KnowledgeError,
    ScanOptions, SkippedFile,
};
use crate::search::fusion::FusedHit;
use crate::search::{
    self, RankedRequest, SearchError, SearchRequest, SearchResponse, SearchSettings, Searcher,
};
use crate::store::embed_journal::{EmbedJournal, text_key};
use crate::store::vectors::VectorIndex;
use crate::store::{ChunkStore, EmbeddedVectorLeg, StoreError, VectorLeg};

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
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("embedding produced {found} dimensions, the embedder declares {declared}")]
    Dimensions { found: usize, declared: usize },
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] crate::store::postgres::PgError),
}

/// The file under the data directory holding the knowledge folder's stamps at the last ingest.
const STAMPS_FILE: &str = "knowledge-stamps.json";

/// The file under the data directory holding the embedded knowledge base's id (a UUID written
/// on first open), which traces record so replay can tell another knowledge base from an
/// edited one.
const KB_ID_FILE: &str = "knowledge-base-id";
/// The vectors an ingest has computed but not committed yet (`store::embed_journal`).
const EMBED_JOURNAL_FILE: &str = "embed-journal.bin";

/// The embedded knowledge base's id in `data_dir`, created on first use. A data directory that
/// cannot be written (a read-only copy) gets no id rather than failing to open: replay of such
/// a copy only loses the "another knowledge base" check.
fn load_or_create_kb_id(data_dir: &Path) -> String {
    let path = data_dir.join(KB_ID_FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if !id.is_empty() {
            return id.to_string();
        }
    }
    let id = format!("kb-{}", uuid::Uuid::new_v4());
    match std::fs::write(&path, format!("{id}\n")) {
        Ok(()) => id,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot record the knowledge base id");
            String::new()
        }
    }
}

/// [`Engine::knowledge_changes`] of the embedded store in `data_dir`, without opening it.
pub fn knowledge_changes_in(data_dir: &Path) -> Option<KnowledgeChanges> {
    FolderStamps::load(&data_dir.join(STAMPS_FILE)).map(|s| s.changes())
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
    /// Files read and skipped, by format name (`markdown`, `html`, `docx`, `pdf`, `text`,
    /// `other`).
    pub formats: BTreeMap<String, FormatCount>,
    pub generation: u64,
    /// Past chunk texts dropped by [`IngestOptions::keep_versions`].
    pub versions_pruned: usize,
}

/// Ingest options.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    pub scan: ScanOptions,
    /// Re-read and re-index every document, even unchanged ones.
    pub rebuild: bool,
    /// How many past texts of each chunk to keep (default: every one, forever). Applied at
    /// the end of the ingest; audits of runs that saw a pruned text say it was pruned.
    pub keep_versions: crate::store::KeepVersions,
}

/// Progress of a long ingest, for a progress bar.
#[derive(Debug, Clone)]
pub enum IngestProgress {
    /// `done` of the `pages` pages of `file` (a PDF) read so far.
    Reading {
        file: String,
        done: usize,
        pages: usize,
    },
    /// Indexing starts: this many chunks to write.
    Indexing { total: usize },
    /// `done` chunks written so far.
    Indexed { done: usize },
    /// This many vectors were kept from an ingest that stopped before it committed (the
    /// embeddings journal), so they are not asked for again.
    Resumed { kept: usize },
    /// Embedding starts: this many chunks need new vectors (the others reuse theirs).
    Embedding { total: usize },
    /// `done` chunks embedded so far.
    Embedded { done: usize },
}

pub struct Engine {
    data_dir: PathBuf,
    store: ChunkStore,
    index: Bm25Index,
    embedder: Arc<dyn Embedder>,
    /// Fusion, candidate window, boosts and thresholds of `searchDocs`.
    pub settings: SearchSettings,
    backend: Backend,
    /// Which knowledge base this is (see [`Engine::knowledge_base_id`]).
    kb_id: String,
}

/// Where the system of record lives.
enum Backend {
    /// The embedded store under the data directory: `Engine::store` is it.
    Embedded,
    /// PostgreSQL; `Engine::store` holds its chunk records, at the BM25 index's version.
    #[cfg(feature = "postgres")]
    Postgres(Box<postgres::PgBackend>),
}

impl Engine {
    /// Opens (or creates) the data directory. If the BM25 index does not reflect the store's
    /// current generation (a crash between the two commits), it is rebuilt from the store.
    pub fn open(data_dir: &Path) -> Result<Self, EngineError> {
        Self::open_with(data_dir, Arc::new(HashingEmbedder::default()))
    }

    /// Opens the data directory with a chosen embedder.
    pub fn open_with(data_dir: &Path, embedder: Arc<dyn Embedder>) -> Result<Self, EngineError> {
        Self::open_store(
            data_dir,
            embedder,
            ChunkStore::open(&data_dir.join("store"))?,
        )
    }

    /// [`Engine::open_with`] for `ingest --rebuild`: a chunk store written in another format
    /// (by an older ragtrail) opens empty, to be rebuilt, instead of failing.
    pub fn open_for_rebuild(
        data_dir: &Path,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, EngineError> {
        let store = ChunkStore::open_for_rebuild(&data_dir.join("store"))?;
        Self::open_store(data_dir, embedder, store)
    }

    fn open_store(
        data_dir: &Path,
        embedder: Arc<dyn Embedder>,
        store: ChunkStore,
    ) -> Result<Self, EngineError> {
        let index = Bm25Index::open_or_create(&data_dir.join("index"))?;
        // The default fusion depends on whether the vector leg is lexical or semantic.
        let settings = SearchSettings::for_embedder(&embedder.info().kind);
        let mut engine = Self {
            data_dir: data_dir.to_path_buf(),
            store,
            index,
            embedder,
            settings,
            backend: Backend::Embedded,
            kb_id: load_or_create_kb_id(data_dir),
        };
        let indexed = engine.index.committed_generation()?;
        if indexed.unwrap_or(0) != engine.store.generation() {
            // An index with no generation was deleted, or started afresh by
            // `Bm25Index::open_or_create` (which says why): no interrupted ingest to report.
            if indexed.is_some() {
                tracing::warn!(
                    store = engine.store.generation(),
                    index = ?indexed,
                    "the BM25 index does not match the chunk store (an interrupted ingest?); rebuilding it from the store"
                );
            }
            engine.reindex(&mut |_| {})?;
        }
        Ok(engine)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Which knowledge base this engine serves: a UUID kept in the embedded data directory, or
    /// the database's `kb_state.kb_id`. Traces record it, so a replay against another knowledge
    /// base (another data directory, another database) is told apart from drift in this one.
    pub fn knowledge_base_id(&self) -> &str {
        &self.kb_id
    }

    /// This knowledge base's data version (store generation, or the database's data version)
    /// and chunk count, as traces record it: `gen-N:COUNT`.
    pub fn knowledge_version(&self) -> String {
        format!(
            "gen-{}:{}",
            self.store.generation(),
            self.store.chunks().len()
        )
    }

    pub fn store(&self) -> &ChunkStore {
        &self.store
    }

    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// Whether anything was ever ingested.
    pub fn is_empty(&self) -> bool {
        self.store.chunks().is_empty()
    }

    /// Rebuilds the BM25 index from the store's current generation (from PostgreSQL when it
    /// is the system of record).
    pub fn reindex(&mut self, progress: &mut dyn FnMut(IngestProgress)) -> Result<(), EngineError> {
        #[cfg(feature = "postgres")]
        if let Backend::Postgres(_) = self.backend {
            return self.pg_reindex(progress);
        }
        let mut update = self.index.update()?;
        update.delete_all()?;
        index_chunks(&mut update, self.store.chunks().iter(), progress)?;
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
        #[cfg(feature = "postgres")]
        if let Backend::Postgres(_) = self.backend {
            return self.pg_ingest(root, options, progress);
        }
        if !options.rebuild && !self.store.chunks().is_empty() {
            search::check_embedder(&self.store, self.embedder.as_ref())?;
        }
        // The index's writer lock first, held to the end: a second ingest running at the same
        // time stops here with `IndexError::Busy`, before it writes a store generation of its
        // own from what is by then an old view of the store.
        let mut update = self.index.update()?;
        // Stamped before reading: a file edited during the scan then looks changed next time.
        let stamps = FolderStamps::of(root);
        let scan = knowledge::scan_with_progress(root, &options.scan, &mut |file, done, pages| {
            progress(IngestProgress::Reading {
                file: file.to_string(),
                done,
                pages,
            })
        })?;
        let old_docs: HashMap<&str, &Document> = self
            .store
            .documents()
            .iter()
            .map(|d| (d.source.as_str(), d))
            .collect();
        let new_sources: HashSet<&str> = scan.documents.iter().map(|d| d.source.as_str()).collect();
        let mut summary = IngestSummary {
            skipped: scan.skipped.clone(),
            formats: scan.formats.clone(),
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
            summary.versions_pruned = self.prune_versions(options.keep_versions)?;
            self.save_stamps(stamps);
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
        let vectors = self.embed_chunks(&chunks, options.rebuild, progress)?;
        let next = self.store.write_generation(
            documents,
            chunks,
            vectors,
            self.embedder.info(),
            Some(root.display().to_string()),
        )?;
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
        index_chunks(&mut update, to_index.iter().copied(), progress)?;
        // Before the generation is current: no text is ever current without its version kept.
        self.record_versions(&next)?;
        update.commit(next.generation())?;
        next.make_current()?;
        EmbedJournal::discard(&self.data_dir.join(EMBED_JOURNAL_FILE));
        self.store = next;
        summary.chunks = self.store.chunks().len();
        summary.generation = self.store.generation();
        summary.versions_pruned = self.prune_versions(options.keep_versions)?;
        self.save_stamps(stamps);
        Ok(summary)
    }

    fn stamps_path(&self) -> PathBuf {
        self.data_dir.join(STAMPS_FILE)
    }

    /// Records the folder's stamps after a successful ingest. A failure costs only the stale
    /// check (reported as "not tracked"), never the ingest.
    fn save_stamps(&self, stamps: Result<FolderStamps, KnowledgeError>) {
        let saved = stamps.and_then(|s| s.save(&self.stamps_path()));
        if let Err(e) = saved {
            tracing::warn!("could not record the knowledge folder's file stamps: {e}");
            let _ = std::fs::remove_file(self.stamps_path());
        }
    }

    /// What changed in the knowledge folder since the last ingest (files edited, added or
    /// removed, judged by size and modification time without reading them), or `None` when
    /// nothing was recorded: no ingest by this version yet, content that came from elsewhere
    /// ([`Engine::replace_all`]), or PostgreSQL, which other processes may ingest into.
    pub fn knowledge_changes(&self) -> Option<KnowledgeChanges> {
        match self.backend {
            Backend::Embedded => knowledge_changes_in(&self.data_dir),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => None,
        }
    }

    /// Vectors for `chunks`, reusing the stored vector of any chunk whose content hash is
    /// unchanged (same embedder), so re-ingesting never re-embeds unchanged text.
    fn embed_chunks(
        &self,
        chunks: &[Chunk],
        rebuild: bool,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<VectorIndex, EngineError> {
        let info = self.embedder.info();
        let dims = info.dims as usize;
        let reusable = !rebuild && self.store.manifest().embedder.as_ref() == Some(&info);
        // A vector embeds the heading path with the text: a renamed heading over the same
        // text needs a new one.
        let old: HashMap<(&str, &str), usize> = if reusable {
            self.store
                .chunks()
                .iter()
                .enumerate()
                .map(|(i, c)| (reuse_key(c), i))
                .collect()
        } else {
            HashMap::new()
        };
        let mut missing: Vec<usize> = (0..chunks.len())
            .filter(|&i| !old.contains_key(&reuse_key(&chunks[i])))
            .collect();
        // What an ingest that stopped before committing had embedded already.
        let journal_path = self.data_dir.join(EMBED_JOURNAL_FILE);
        let mut journal = match self.embedder.is_costly() && !missing.is_empty() {
            true => Some(EmbedJournal::open(&journal_path, &info)?),
            false => None,
        };
        let mut fresh: HashMap<usize, Vec<f32>> = HashMap::new();
        if let Some(j) = journal.as_ref().filter(|j| !j.is_empty()) {
            missing.retain(|&i| match j.get(&text_key(&embedding_text(&chunks[i]))) {
                Some(v) => {
                    fresh.insert(i, v.to_vec());
                    false
                }
                None => true,
            });
            progress(IngestProgress::Resumed { kept: fresh.len() });
        }
        progress(IngestProgress::Embedding {
            total: missing.len(),
        });
        fresh.extend(self.embed_missing(
            &missing,
            &|i| embedding_text(&chunks[i]),
            dims,
            journal.as_mut(),
            &mut |done| progress(IngestProgress::Embedded { done }),
        )?);
        let mut index = VectorIndex::with_capacity(dims, chunks.len());
        for (i, chunk) in chunks.iter().enumerate() {
            let pushed = match fresh.get(&i) {
                Some(v) => index.push(v),
                None => match old.get(&reuse_key(chunk)) {
                    Some(&row) => index.push(self.store.vectors().row(row)),
                    None => index.push(&vec![0.0; dims]),
                },
            };
            pushed.map_err(|e| EmbedError::Failed {
                model: info.model.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(index)
    }

    /// A [`Searcher`] for one caller: `searchDocs`, rankings and the agent's evidence lookups
    /// under `access`, over this engine's store, index, vector leg and settings.
    pub fn searcher(&self, access: &AccessContext) -> Searcher<'_> {
        Searcher::new(
            &self.store,
            &self.index,
            self.embedder.as_ref(),
            self.vector_leg(),
            &self.settings,
            access,
        )
    }

    /// `searchDocs`: the hits for `keywords`, at most `top_k`, under the request's access context.
    pub fn search_docs(&self, req: &SearchRequest) -> Result<SearchResponse, EngineError> {
        Ok(self.searcher(&req.access).search(req)?.into_response())
    }

    /// The fused ranking alone, `depth` long, for evaluations and benchmarks: the same legs and
    /// fusion as [`Engine::search_docs`], without its top-k cap, snippets, weak-hit filter or
    /// sufficiency decision (see [`Searcher::ranked`]).
    pub fn search_ranked(&self, req: &RankedRequest<'_>) -> Result<Vec<FusedHit>, EngineError> {
        Ok(self.searcher(req.access).ranked(req)?)
    }

    /// The vector leg of this engine's backend.
    fn vector_leg(&self) -> Box<dyn VectorLeg + '_> {
        match &self.backend {
            Backend::Embedded => Box::new(EmbeddedVectorLeg::new(&self.store)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(pg) => self.pg_vector_leg(pg),
        }
    }
}

/// Adds `chunks` to an index update, reporting progress (the update is not committed). They
/// hold every chunk of each of their documents (a changed document is indexed anew), so a
/// document with a single chunk among them is a whole-document chunk.
pub(crate) fn index_chunks<'a>(
    update: &mut crate::index::IndexUpdate<'_>,
    chunks: impl ExactSizeIterator<Item = &'a Chunk>,
    progress: &mut dyn FnMut(IngestProgress),
) -> Result<(), EngineError> {
    let chunks: Vec<&Chunk> = chunks.collect();
    let total = chunks.len();
    let mut per_source: HashMap<&str, usize> = HashMap::new();
    for chunk in &chunks {
        *per_source.entry(chunk.source.as_str()).or_default() += 1;
    }
    progress(IngestProgress::Indexing { total });
    for (i, chunk) in chunks.into_iter().enumerate() {
        update.add_chunk(chunk, per_source.get(chunk.source.as_str()) == Some(&1))?;
        if i % 64 == 0 {
            progress(IngestProgress::Indexed { done: i });
        }
    }
    progress(IngestProgress::Indexed { done: total });
    Ok(())
}

impl Engine {
    /// Embeds the chunks at positions `missing` (text from `text_of`) in the embedder's
    /// preferred batches, checking every answer's count and dimension; `done` hears how many
    /// are embedded after each batch.
    /// Embeds the texts of `missing`, batch by batch; each batch is appended to `journal`
    /// (when given) before the next is asked for.
    fn embed_missing(
        &self,
        missing: &[usize],
        text_of: &dyn Fn(usize) -> String,
        dims: usize,
        mut journal: Option<&mut EmbedJournal>,
        done: &mut dyn FnMut(usize),
    ) -> Result<HashMap<usize, Vec<f32>>, EngineError> {
        let mut fresh: HashMap<usize, Vec<f32>> = HashMap::with_capacity(missing.len());
        // Chunks per embedder call: the embedder's choice (it batches within a call).
        let per_call = self.embedder.preferred_batch().max(1);
        for (n, batch) in missing.chunks(per_call).enumerate() {
            let texts: Vec<String> = batch.iter().map(|&i| text_of(i)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = self.embedder.embed(&refs)?;
            if vectors.len() != batch.len() {
                return Err(EmbedError::Failed {
                    model: self.embedder.info().model,
                    message: format!("{} vectors for {} texts", vectors.len(), batch.len()),
                }
                .into());
            }
            if let Some(v) = vectors.iter().find(|v| v.len() != dims) {
                return Err(EngineError::Dimensions {
                    found: v.len(),
                    declared: dims,
                });
            }
            if let Some(j) = journal.as_deref_mut() {
                let kept: Vec<_> = texts
                    .iter()
                    .zip(&vectors)
                    .map(|(t, v)| (text_key(t), v.as_slice()))
                    .collect();
                j.append(&kept)?;
            }
            for (&i, v) in batch.iter().zip(vectors) {
                fresh.insert(i, v);
            }
            done(((n + 1) * per_call).min(missing.len()));
        }
        Ok(fresh)
    }
}

/// What a chunk's vector is computed from: its heading path and its text.
fn embedding_text(chunk: &Chunk) -> String {
    format!("{}\n{}", chunk.title_path, chunk.text)
}

/// Chunks with equal keys embed the same text ([`embedding_text`]), so share a vector.
fn reuse_key(chunk: &Chunk) -> (&str, &str) {
    (chunk.content_hash.as_str(), chunk.title_path.as_str())
}

/// Content that does not come from a knowledge folder (an evaluation corpus, another system's
/// export): the caller builds the documents and chunks.
impl Engine {
    /// Replaces everything the engine holds with `documents` and their `chunks`, as one new
    /// generation: embedded (reusing the vector of any unchanged chunk text), indexed, then made
    /// current. Chunk ids must be [`knowledge::chunk_id`]s (others are not searchable by BM25).
    pub fn replace_all(
        &mut self,
        documents: Vec<Document>,
        chunks: Vec<Chunk>,
        origin: Option<String>,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<IngestSummary, EngineError> {
        let vectors = self.embed_chunks(&chunks, false, progress)?;
        let added = documents.iter().map(|d| d.source.clone()).collect();
        let next = self.store.write_generation(
            documents,
            chunks,
            vectors,
            self.embedder.info(),
            origin,
        )?;
        let mut update = self.index.update()?;
        update.delete_all()?;
        index_chunks(&mut update, next.chunks().iter(), progress)?;
        self.record_versions(&next)?;
        update.commit(next.generation())?;
        next.make_current()?;
        EmbedJournal::discard(&self.data_dir.join(EMBED_JOURNAL_FILE));
        self.store = next;
        // The content no longer comes from a knowledge folder: nothing to compare it with.
        let _ = std::fs::remove_file(self.stamps_path());
        Ok(IngestSummary {
            added,
            chunks: self.store.chunks().len(),
            generation: self.store.generation(),
            ..IngestSummary::default()
        })
    }
}
