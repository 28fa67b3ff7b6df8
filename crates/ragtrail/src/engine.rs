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
use crate::index::{Bm25Index, IndexError, IndexUpdate};
use crate::knowledge::{
    self, Chunk, Document, FolderStamps, FormatCount, KnowledgeChanges, KnowledgeError,
    ScanOptions, SkippedFile,
};
use crate::search::fusion::FusedHit;
use crate::search::{
    self, RankedRequest, SearchError, SearchRequest, SearchResponse, SearchSettings, Searcher,
};
use crate::store::embed_journal::{EmbedJournal, text_key};
use crate::store::vectors::VectorError;
use crate::store::{ChunkStore, EmbeddedVectorLeg, StoreError, VectorLeg, VectorWriter};
use crate::text::Glossary;

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

/// The embedded knowledge base's id in `data_dir`, created by the first ingest. A data
/// directory that cannot be written (a read-only copy) gets no id rather than failing: replay
/// of such a copy only loses the "another knowledge base" check.
fn load_or_create_kb_id(data_dir: &Path) -> String {
    let path = data_dir.join(KB_ID_FILE);
    if let Some(id) = read_kb_id(data_dir) {
        return id;
    }
    let id = format!("kb-{}", uuid::Uuid::new_v4());
    match crate::access::private::write(&path, format!("{id}\n").as_bytes()) {
        Ok(()) => id,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot record the knowledge base id");
            String::new()
        }
    }
}

/// The id an ingest recorded in `data_dir`, if any: what a reader uses (readers write nothing,
/// so two opening at once cannot each make an id of their own).
fn read_kb_id(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data_dir.join(KB_ID_FILE)).ok()?;
    let id = text.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// The embedded store's folder and its BM25 index's, under the data directory.
const STORE_DIR: &str = "store";
const INDEX_DIR: &str = "index";

/// The store's current generation and a BM25 index at that generation, read without writing
/// anything: the index on disk when it holds that generation, otherwise (an ingest between its
/// index commit and its `CURRENT` switch, or one that stopped there) an index built in memory
/// from the store. The next ingest repairs the one on disk, under its writer lock.
fn read_state(data_dir: &Path, for_rebuild: bool) -> Result<(ChunkStore, Bm25Index), EngineError> {
    let store_dir = data_dir.join(STORE_DIR);
    let mut attempts = 0;
    loop {
        let store = match for_rebuild {
            true => ChunkStore::open_for_rebuild(&store_dir)?,
            false => ChunkStore::open(&store_dir)?,
        };
        let generation = store.generation();
        let on_disk = Bm25Index::open_read_only(&data_dir.join(INDEX_DIR))?;
        let indexed = on_disk
            .as_ref()
            .and_then(|(_, payload)| payload.as_deref()?.parse::<u64>().ok());
        match on_disk {
            Some((index, _)) if indexed == Some(generation) => return Ok((store, index)),
            // Nothing ingested yet, nothing indexed: the empty index is the store's.
            Some((index, None)) if generation == 0 && index.num_chunks() == 0 => {
                return Ok((store, index));
            }
            _ => {}
        }
        // An ingest that switched `CURRENT` meanwhile: read the store again.
        attempts += 1;
        if attempts < 3 && ChunkStore::current_generation(&store_dir)? != generation {
            continue;
        }
        if indexed.is_some() {
            tracing::info!(
                store = generation,
                index = ?indexed,
                "the BM25 index on disk is not at the store's generation (an ingest under way, or one interrupted); searching an index built in memory from the store"
            );
        }
        let index = Bm25Index::in_memory()?;
        let mut update = index.update()?;
        index_chunks(&mut update, store.chunks()?.iter(), &mut |_| {})?;
        update.commit(generation)?;
        return Ok((store, index));
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
    /// The Chinese–English glossary the offline planner carries a question's missing words
    /// across with, when one is installed ([`Engine::use_glossary`]).
    glossary: Option<Arc<Glossary>>,
}

/// What an embedded ingest holds while it writes ([`Engine::start_writing`]).
struct Writing {
    /// The index on disk; the engine searches it once the ingest commits.
    index: Bm25Index,
    /// Its writer lock and the changes made so far.
    update: IndexUpdate,
    /// Whether the index on disk was at the store's generation when the lock was taken.
    in_step: bool,
}

/// Which chunks of the next generation the index takes anew ([`Engine::commit_generation`]).
pub(crate) enum Reindex<'a> {
    /// Every chunk: a rebuild, content from elsewhere, or an index found out of step.
    All,
    /// The chunks of these documents, whose earlier chunks are removed first.
    Documents(&'a HashSet<String>),
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
    /// Opens the data directory to search it, writing nothing there: the store's current
    /// generation, and the BM25 index at that generation (built in memory when the one on disk
    /// is not, see [`Engine::ingest`] for the repair). Nothing ingested yet: an empty engine.
    pub fn open(data_dir: &Path) -> Result<Self, EngineError> {
        Self::open_with(data_dir, Arc::new(HashingEmbedder::default()))
    }

    /// Opens the data directory with a chosen embedder.
    pub fn open_with(data_dir: &Path, embedder: Arc<dyn Embedder>) -> Result<Self, EngineError> {
        Self::open_embedded(data_dir, embedder, false)
    }

    /// [`Engine::open_with`] for `ingest --rebuild`: a chunk store written in another format
    /// (by an older ragtrail) opens empty, to be rebuilt, instead of failing.
    pub fn open_for_rebuild(
        data_dir: &Path,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, EngineError> {
        Self::open_embedded(data_dir, embedder, true)
    }

    fn open_embedded(
        data_dir: &Path,
        embedder: Arc<dyn Embedder>,
        for_rebuild: bool,
    ) -> Result<Self, EngineError> {
        let (store, index) = read_state(data_dir, for_rebuild)?;
        // The default fusion depends on whether the vector leg is lexical or semantic.
        let settings = SearchSettings::for_embedder(&embedder.info());
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            store,
            index,
            embedder,
            settings,
            backend: Backend::Embedded,
            kb_id: read_kb_id(data_dir).unwrap_or_default(),
            glossary: None,
        })
    }

    /// Whether the knowledge base moved on since this engine read it: an ingest (by this or
    /// another process) made a later generation current, or another process wrote the
    /// PostgreSQL database. One small read (the `CURRENT` file, or one query): cheap enough
    /// before every request of a long-running server.
    pub fn behind(&self) -> Result<bool, EngineError> {
        match &self.backend {
            Backend::Embedded => Ok(ChunkStore::current_generation(
                &self.data_dir.join(STORE_DIR),
            )? != self.store.generation()),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => self.behind_database(),
        }
    }

    /// Reads the knowledge base again at its current generation, so the next search answers
    /// from what the last ingest wrote (access changes included): the embedded store and its
    /// index reopened as [`Engine::open`] does, or the database caught up with.
    pub fn refresh(&mut self) -> Result<(), EngineError> {
        match &self.backend {
            Backend::Embedded => {
                let (store, index) = read_state(&self.data_dir, false)?;
                self.store = store;
                self.index = index;
                if self.kb_id.is_empty() {
                    self.kb_id = read_kb_id(&self.data_dir).unwrap_or_default();
                }
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => {
                self.catch_up(&mut |_| {})?;
            }
        }
        Ok(())
    }

    /// What an embedded ingest holds from its start: the index on disk (opened to write),
    /// tantivy's writer lock on it, and the store as the last ingest left it. Everything an
    /// ingest repairs is repaired under this lock, so no reader ever writes.
    fn start_writing(&mut self, for_rebuild: bool) -> Result<Writing, EngineError> {
        let index = Bm25Index::open_or_create(&self.data_dir.join(INDEX_DIR))?;
        // A second ingest running at the same time stops here with `IndexError::Busy`, before
        // it writes a store generation of its own from what is by then an old view.
        let update = index.update()?;
        // An ingest that finished since this engine opened: start from what it wrote.
        let store_dir = self.data_dir.join(STORE_DIR);
        if ChunkStore::current_generation(&store_dir)? != self.store.generation() {
            self.store = match for_rebuild {
                true => ChunkStore::open_for_rebuild(&store_dir)?,
                false => ChunkStore::open(&store_dir)?,
            };
        }
        let generation = self.store.generation();
        let indexed = index.committed_generation()?;
        let in_step = indexed == Some(generation)
            || (indexed.is_none() && generation == 0 && index.num_chunks() == 0);
        if !in_step {
            tracing::warn!(
                store = generation,
                index = ?indexed,
                "the BM25 index does not match the chunk store (an interrupted ingest?); this ingest indexes every chunk anew"
            );
        }
        if self.kb_id.is_empty() {
            self.kb_id = load_or_create_kb_id(&self.data_dir);
        }
        Ok(Writing {
            index,
            update,
            in_step,
        })
    }

    /// The crash-safe order every change of the knowledge base follows, whatever the store:
    /// the index takes the next generation's chunks, their texts are kept as versions, the
    /// index commits with `payload` naming the generation, and only then does the generation
    /// become what readers open (`CURRENT`; for PostgreSQL, whose database committed first,
    /// the in-memory records). A crash on the way leaves readers the previous generation and
    /// an index the next ingest finds out of step and repairs.
    pub(crate) fn commit_generation(
        &mut self,
        mut update: IndexUpdate,
        next: ChunkStore,
        reindex: Reindex<'_>,
        payload: &str,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<(), EngineError> {
        let chunks: Vec<&Chunk> = match reindex {
            Reindex::All => {
                update.delete_all()?;
                next.chunks()?.iter().collect()
            }
            Reindex::Documents(sources) => {
                for source in sources {
                    update.delete_source(source);
                }
                next.chunks()?
                    .iter()
                    .filter(|c| sources.contains(&c.source))
                    .collect()
            }
        };
        index_chunks(&mut update, chunks.into_iter(), progress)?;
        // Before the generation is current: no text is ever current without its version kept.
        self.record_versions(&next)?;
        update.commit_with_payload(payload)?;
        // PostgreSQL switches its version in the database; only the embedded store has a
        // `CURRENT` to move.
        if matches!(self.backend, Backend::Embedded) {
            next.make_current()?;
            EmbedJournal::discard(&self.data_dir.join(EMBED_JOURNAL_FILE));
        }
        self.store = next;
        Ok(())
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
    /// and the count of chunks `access` may see, as traces record it: `gen-N:COUNT`. Only the
    /// caller's scope is counted, so a trace says nothing of other tenants' volume.
    pub fn knowledge_version(&self, access: &crate::access::AccessContext) -> String {
        format!(
            "gen-{}:{}",
            self.store.generation(),
            self.store.visible_count(access)
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

    /// Searches and ingests with `embedder` from now on, with its default fusion (settings
    /// chosen since opening are reset). For a caller that must read which embedder built the
    /// index before choosing one: open with the hashing embedder, which costs nothing, look at
    /// the store's manifest, then swap. The vectors already stored stay as they are: searching
    /// them with another embedder is refused, an ingest re-embeds them. PostgreSQL tunes its
    /// connections to the embedder they open with (`hnsw.ef_search`): reopen there instead.
    pub fn use_embedder(&mut self, embedder: Arc<dyn Embedder>) {
        self.settings = SearchSettings::for_embedder(&embedder.info());
        self.embedder = embedder;
    }

    /// Lets the offline planner look up a question's words that no passage uses in the other
    /// language's words (`ragtrail model install cc-cedict`): an English question about a
    /// section written only in Chinese, and the reverse. Read on first use.
    pub fn use_glossary(&mut self, glossary: Arc<Glossary>) {
        self.glossary = Some(glossary);
    }

    /// The glossary given by [`Engine::use_glossary`], if any.
    pub fn glossary(&self) -> Option<&Glossary> {
        self.glossary.as_deref()
    }

    /// Whether anything was ever ingested.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Rebuilds the BM25 index from the store's current generation (from PostgreSQL when it
    /// is the system of record).
    pub fn reindex(&mut self, progress: &mut dyn FnMut(IngestProgress)) -> Result<(), EngineError> {
        #[cfg(feature = "postgres")]
        if let Backend::Postgres(_) = self.backend {
            return self.pg_reindex(progress);
        }
        let Writing {
            index, mut update, ..
        } = self.start_writing(false)?;
        update.delete_all()?;
        index_chunks(&mut update, self.store.chunks()?.iter(), progress)?;
        update.commit(self.store.generation())?;
        self.index = index;
        Ok(())
    }

    /// Brings the store and the index in line with the knowledge folder `root`.
    ///
    /// Unchanged documents are skipped, changed ones have their chunks replaced, deleted files'
    /// chunks are removed. Nothing is visible until the end: a crash leaves the previous state.
    /// An index on disk out of step with the store (an earlier ingest interrupted between its
    /// two commits) is repaired on the way: every chunk is indexed anew.
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
        // The writer lock first, held to the end (see `start_writing`).
        let Writing {
            index,
            update,
            in_step,
        } = self.start_writing(options.rebuild)?;
        if !options.rebuild && !self.store.is_empty() {
            search::check_embedder(&self.store, self.embedder.as_ref())?;
        }
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
            if !in_step {
                let mut update = update;
                update.delete_all()?;
                index_chunks(&mut update, self.store.chunks()?.iter(), progress)?;
                update.commit(self.store.generation())?;
            } else {
                drop(update);
            }
            self.index = index;
            summary.chunks = self.store.len();
            summary.generation = self.store.generation();
            summary.versions_pruned = self.prune_versions(options.keep_versions)?;
            self.save_stamps(stamps);
            return Ok(summary);
        }
        // The new generation: unchanged documents keep their stored chunks.
        let mut documents: Vec<Document> = Vec::new();
        let mut chunks: Vec<Chunk> = Vec::new();
        // The scanned chunks are moved into the new generation, not copied (100k chunks are
        // about 100 MB).
        let mut new_chunks_by_source: HashMap<String, Vec<Chunk>> = HashMap::new();
        for c in scan.chunks {
            new_chunks_by_source
                .entry(c.source.clone())
                .or_default()
                .push(c);
        }
        // The scanned chunks of unchanged documents, which keep their stored ones, are let go
        // before the stored ones are read (at 100k chunks, about 100 MB each).
        let stored_sources = self.store.chunk_sources()?;
        new_chunks_by_source
            .retain(|source, _| touched.contains(source) || !stored_sources.contains(source));
        // The stored chunks of untouched documents are taken over, not copied.
        let Stored {
            reuse,
            mut kept_by_source,
        } = self.read_stored(options.rebuild, |source| !touched.contains(source))?;
        for doc in scan.documents.iter().chain(kept_old.iter().copied()) {
            documents.push(doc.clone());
            let from_scan = touched.contains(&doc.source) || !stored_sources.contains(&doc.source);
            let list = match from_scan {
                true => new_chunks_by_source.remove(doc.source.as_str()),
                false => kept_by_source.remove(doc.source.as_str()),
            };
            chunks.extend(list.into_iter().flatten());
        }
        documents.sort_by(|a, b| a.source.cmp(&b.source));
        let next = self.next_generation(
            documents,
            chunks,
            &reuse,
            Some(root.display().to_string()),
            progress,
        )?;
        let generation = next.generation();
        let reindex = match options.rebuild || !in_step {
            true => Reindex::All,
            false => Reindex::Documents(&touched),
        };
        self.commit_generation(update, next, reindex, &generation.to_string(), progress)?;
        self.index = index;
        summary.chunks = self.store.len();
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

    /// The store's next generation (written, not yet current) holding `documents` and
    /// `chunks`, each chunk's vector written to its file as it is embedded (or reused).
    fn next_generation(
        &self,
        documents: Vec<Document>,
        chunks: Vec<Chunk>,
        reuse: &ReuseRows,
        origin: Option<String>,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<ChunkStore, EngineError> {
        let info = self.embedder.info();
        let (next, mut vectors) = self
            .store
            .start_generation(info.dims as usize, chunks.len())?;
        self.embed_chunks(&chunks, reuse, &mut vectors, progress)?;
        Ok(self
            .store
            .write_generation(next, vectors, documents, chunks, info, origin)?)
    }

    /// Whether the stored vectors may stand for unchanged chunks: not a rebuild, and the store
    /// was embedded by this engine's embedder.
    fn vectors_reusable(&self, rebuild: bool) -> bool {
        !rebuild && self.store.manifest().embedder.as_ref() == Some(&self.embedder.info())
    }

    /// One pass over the stored records (each decoded once, none kept by the store): the
    /// stored row of each chunk's [`reuse_key`] when the stored vectors can be reused (not a
    /// rebuild, the same embedder), and the chunks of the documents `keep` names, by document.
    fn read_stored(
        &self,
        rebuild: bool,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Stored, EngineError> {
        let reusable = self.vectors_reusable(rebuild);
        let mut stored = Stored::default();
        for (row, chunk) in self.store.decode_chunks().enumerate() {
            let chunk = chunk?;
            if reusable {
                // The last of equal keys, as a map built in chunk order keeps.
                stored.reuse.insert(reuse_key(&chunk), row);
            }
            if keep(&chunk.source) {
                stored
                    .kept_by_source
                    .entry(chunk.source.clone())
                    .or_default()
                    .push(chunk);
            }
        }
        Ok(stored)
    }

    /// Writes the vectors of `chunks` into `vectors` (row `i` for chunk `i`), reusing the
    /// stored vector of any chunk whose text and heading path are unchanged (`reuse`, empty
    /// when none may be), so re-ingesting never re-embeds unchanged text.
    fn embed_chunks(
        &self,
        chunks: &[Chunk],
        reuse: &ReuseRows,
        vectors: &mut VectorWriter,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<(), EngineError> {
        let info = self.embedder.info();
        let dims = info.dims as usize;
        // Each old row reused, with the new rows it becomes: read in ascending order, so a
        // mapped store's rows are copied out in runs rather than mapped whole.
        let mut reused: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut missing: Vec<usize> = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            match reuse.get(&reuse_key(chunk)) {
                Some(&row) => reused.entry(row).or_default().push(i),
                None => missing.push(i),
            }
        }
        let failed = |e: VectorError| -> EngineError {
            match e {
                // Reading the stored rows or writing the new ones, not the model.
                VectorError::Io { path, source } => StoreError::Io {
                    path: path.display().to_string(),
                    source,
                }
                .into(),
                e => EmbedError::Failed {
                    model: info.model.clone(),
                    message: e.to_string(),
                }
                .into(),
            }
        };
        let old_rows: Vec<usize> = reused.keys().copied().collect();
        let mut result = Ok(());
        self.store
            .vectors()
            .visit_rows(&old_rows, |row, v| {
                for &i in reused.get(&row).into_iter().flatten() {
                    if result.is_ok() {
                        result = vectors.set_row(i, v);
                    }
                }
            })
            .and(result)
            .map_err(failed)?;
        // What an ingest that stopped before committing had embedded already.
        let journal_path = self.data_dir.join(EMBED_JOURNAL_FILE);
        let mut journal = match self.embedder.is_costly() && !missing.is_empty() {
            true => Some(EmbedJournal::open(&journal_path, &info)?),
            false => None,
        };
        if let Some(j) = journal.as_ref().filter(|j| !j.is_empty()) {
            let mut kept = 0;
            let mut result = Ok(());
            missing.retain(|&i| match j.get(&text_key(&embedding_text(&chunks[i]))) {
                Some(v) => {
                    kept += 1;
                    if result.is_ok() {
                        result = vectors.set_row(i, v);
                    }
                    false
                }
                None => true,
            });
            result.map_err(failed)?;
            progress(IngestProgress::Resumed { kept });
        }
        progress(IngestProgress::Embedding {
            total: missing.len(),
        });
        self.embed_missing(
            &missing,
            &|i| embedding_text(&chunks[i]),
            dims,
            journal.as_mut(),
            &mut |done| progress(IngestProgress::Embedded { done }),
            &mut |i, v| vectors.set_row(i, &v).map_err(failed),
        )
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
    update: &mut IndexUpdate,
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
        keep: &mut dyn FnMut(usize, Vec<f32>) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
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
                keep(i, v)?;
            }
            done(((n + 1) * per_call).min(missing.len()));
        }
        Ok(())
    }
}

/// What a chunk's vector is computed from: its heading path and its text.
fn embedding_text(chunk: &Chunk) -> String {
    format!("{}\n{}", chunk.title_path, chunk.text)
}

/// Chunks with equal keys embed the same text ([`embedding_text`]), so share a vector.
fn reuse_key(chunk: &Chunk) -> (String, String) {
    (chunk.content_hash.clone(), chunk.title_path.clone())
}

/// The stored row of each [`reuse_key`], the last of equal ones.
type ReuseRows = HashMap<(String, String), usize>;

/// What [`Engine::read_stored`] read of the stored records.
#[derive(Default)]
struct Stored {
    reuse: ReuseRows,
    kept_by_source: HashMap<String, Vec<Chunk>>,
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
        let Writing { index, update, .. } = self.start_writing(false)?;
        let added = documents.iter().map(|d| d.source.clone()).collect();
        // Nothing is kept of the stored chunks: they are read only for their vectors' rows.
        let reuse = match self.vectors_reusable(false) {
            true => self.read_stored(false, |_| false)?.reuse,
            false => ReuseRows::new(),
        };
        let next = self.next_generation(documents, chunks, &reuse, origin, progress)?;
        let generation = next.generation();
        self.commit_generation(
            update,
            next,
            Reindex::All,
            &generation.to_string(),
            progress,
        )?;
        self.index = index;
        // The content no longer comes from a knowledge folder: nothing to compare it with.
        let _ = std::fs::remove_file(self.stamps_path());
        Ok(IngestSummary {
            added,
            chunks: self.store.len(),
            generation: self.store.generation(),
            ..IngestSummary::default()
        })
    }
}
