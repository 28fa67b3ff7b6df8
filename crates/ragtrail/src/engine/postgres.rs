//! The engine over PostgreSQL + pgvector (when `DATABASE_URL` is set).
//!
//! PostgreSQL holds documents, chunks and vectors; the local tantivy index is derived from them
//! and records, in its commit payload, which database (`kb_state.kb_id`) and which data version
//! it reflects. Whenever the two disagree (a crash between the database commit and the index
//! commit, or another process ingested), the index is rebuilt from the database before it is
//! used. The chunk records are also held in memory (the engine's `store`), at the same version
//! as the index, so hits are assembled without a round trip; the vector leg runs in SQL.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::{
    Backend, Engine, EngineError, IngestOptions, IngestProgress, IngestSummary, Reindex,
    embedding_text,
};
use crate::embed::Embedder;
use crate::index::Bm25Index;
use crate::knowledge::{self, Chunk, Document};
use crate::search::{self, SearchSettings};
use crate::store::embedded::StoreManifest;
use crate::store::postgres::{PgSettings, PgStore, PgVectorLeg, RunCounts, Snapshot, Space};
use crate::store::{ChunkStore, VectorLeg};

/// The BM25 index of a Postgres-backed engine, beside (not instead of) the embedded one's.
const INDEX_DIR: &str = "pg-index";
/// Documents are embedded in groups of about this many chunks, then written one by one.
const GROUP_CHUNKS: usize = 256;

impl Backend {
    fn pg(&self) -> Option<&PgBackend> {
        match self {
            Backend::Postgres(pg) => Some(pg),
            Backend::Embedded => None,
        }
    }

    fn pg_mut(&mut self) -> Option<&mut PgBackend> {
        match self {
            Backend::Postgres(pg) => Some(pg),
            Backend::Embedded => None,
        }
    }
}

pub(super) struct PgBackend {
    store: PgStore,
    /// The space the vector leg searches, as of the snapshot in `Engine::store`.
    space: Option<Space>,
    last_run: Option<i64>,
}

/// The tantivy commit payload: which database and data version the index reflects.
fn payload(kb_id: &str, version: u64, run: Option<i64>) -> String {
    let run = run.map_or_else(|| "-".to_string(), |r| r.to_string());
    format!("ragtrail-pg kb={kb_id} version={version} run={run}")
}

/// (kb id, data version) of a payload written by [`payload`].
fn parse_payload(p: &str) -> Option<(String, u64)> {
    let mut kb = None;
    let mut version = None;
    let mut words = p.split_whitespace();
    if words.next()? != "ragtrail-pg" {
        return None;
    }
    for word in words {
        match word.split_once('=') {
            Some(("kb", v)) => kb = Some(v.to_string()),
            Some(("version", v)) => version = v.parse().ok(),
            _ => {}
        }
    }
    Some((kb?, version?))
}

impl Engine {
    /// Opens an engine whose system of record is PostgreSQL at `url` (settings from the
    /// `RAGTRAIL_PG_*` environment; `hnsw.ef_search` by embedder unless set, see
    /// [`PgSettings::from_env_for`]), with the BM25 index under `data_dir`.
    pub fn open_postgres(
        data_dir: &Path,
        url: &str,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, EngineError> {
        let settings = PgSettings::from_env_for(&embedder.info().kind)?;
        let store = PgStore::connect(url, settings)?;
        Self::open_with_pg_store(data_dir, store, embedder)
    }

    /// Opens an engine over an already connected store. The BM25 index is rebuilt from the
    /// database if it does not reflect the database's current data version.
    pub fn open_with_pg_store(
        data_dir: &Path,
        store: PgStore,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, EngineError> {
        let index = Bm25Index::open_or_create(&data_dir.join(INDEX_DIR))?;
        // The default fusion depends on whether the vector leg is lexical or semantic.
        let settings = SearchSettings::for_embedder(&embedder.info());
        let kb_id = store.kb_id().to_string();
        let mut engine = Self {
            data_dir: data_dir.to_path_buf(),
            store: ChunkStore::in_memory(StoreManifest::default(), Vec::new()),
            index,
            embedder,
            settings,
            backend: Backend::Postgres(Box::new(PgBackend {
                store,
                space: None,
                last_run: None,
            })),
            kb_id,
            glossary: None,
        };
        engine.catch_up(&mut |_| {})?;
        Ok(engine)
    }

    /// The PostgreSQL store, when it is the system of record.
    pub fn postgres(&self) -> Option<&PgStore> {
        self.backend.pg().map(|pg| &pg.store)
    }

    /// Whether another process has written the database since this engine last read it (its
    /// searches would be refused with `StaleIndex` until [`Engine::catch_up`]). One small query;
    /// always `false` for the embedded store (see [`Engine::behind`], which covers both).
    pub fn behind_database(&self) -> Result<bool, EngineError> {
        match self.backend.pg() {
            Some(pg) => Ok(pg.store.data_version()? != self.store.generation()),
            None => Ok(false),
        }
    }

    /// Brings the in-memory chunk records and the BM25 index up to the database's current
    /// state (rebuilding the index if its recorded version differs). Returns whether the index
    /// was rebuilt. Nothing to do for the embedded store.
    pub fn catch_up(
        &mut self,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<bool, EngineError> {
        let Some(pg) = self.backend.pg() else {
            return Ok(false);
        };
        let snapshot = pg.store.snapshot()?;
        let kb_id = pg.store.kb_id().to_string();
        let indexed = self
            .index
            .committed_payload()?
            .as_deref()
            .and_then(parse_payload);
        let fresh = indexed.as_ref() == Some(&(kb_id, snapshot.data_version))
            || (indexed.is_none() && snapshot.chunks.is_empty() && self.index.num_chunks() == 0);
        if !fresh {
            tracing::warn!(
                database = snapshot.data_version,
                index = ?indexed.map(|i| i.1),
                "the BM25 index does not match the database (an interrupted ingest, another process ingested, or the index was started afresh); rebuilding it from PostgreSQL"
            );
        }
        self.install_snapshot(snapshot);
        if !fresh {
            self.rebuild_pg_index(progress)?;
        }
        Ok(!fresh)
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) {
        let (records, space, last_run) = records_of(snapshot);
        self.store = records;
        if let Some(pg) = self.backend.pg_mut() {
            pg.space = space;
            pg.last_run = last_run;
        }
    }

    /// Rebuilds the BM25 index from the in-memory chunk records (already at the version the
    /// payload names).
    fn rebuild_pg_index(
        &self,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<(), EngineError> {
        let Some(pg) = self.backend.pg() else {
            return Ok(());
        };
        let mut update = self.index.update()?;
        update.delete_all()?;
        let chunks = self.store.chunks()?;
        super::index_chunks(&mut update, chunks.iter(), progress)?;
        progress(IngestProgress::Indexed { done: chunks.len() });
        update.commit_with_payload(&payload(
            pg.store.kb_id(),
            self.store.generation(),
            pg.last_run,
        ))?;
        Ok(())
    }

    /// `ragtrail reindex` with Postgres: re-read everything from the database and rebuild the
    /// BM25 index from it.
    pub(super) fn pg_reindex(
        &mut self,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<(), EngineError> {
        let Some(pg) = self.backend.pg() else {
            return Ok(());
        };
        let snapshot = pg.store.snapshot()?;
        self.install_snapshot(snapshot);
        self.rebuild_pg_index(progress)
    }

    /// The vector leg over pgvector; it checks that the database is still at the version of the
    /// in-memory chunks and the BM25 index (carried by the vector query, or asked for when no
    /// vector query runs: [`VectorLeg::check_current`]).
    pub(super) fn pg_vector_leg<'a>(&'a self, pg: &'a PgBackend) -> Box<dyn VectorLeg + 'a> {
        Box::new(PgVectorLeg {
            store: &pg.store,
            space: pg.space.as_ref(),
            expected: self.store.generation(),
        })
    }

    /// Ingest into PostgreSQL: one transaction per changed document (its row, chunks and
    /// vectors), documents whose content hash is unchanged untouched, then the BM25 index
    /// updated from the same chunks and stamped with the data version.
    pub(super) fn pg_ingest(
        &mut self,
        root: &Path,
        options: &IngestOptions,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<IngestSummary, EngineError> {
        // Repair first: a crash between the last database commit and the index commit left
        // the index behind (or another process ingested since this one loaded).
        self.pg_repair_if_stale(progress)?;
        // Runs of processes that died mid-way would otherwise stay `running` forever.
        if let Some(pg) = self.backend.pg() {
            let abandoned = pg.store.mark_abandoned_runs()?;
            if !abandoned.is_empty() {
                tracing::warn!(
                    runs = ?abandoned,
                    "earlier ingest runs stopped before committing (killed or crashed); marked abandoned, this run redoes their work"
                );
            }
        }
        let info = self.embedder.info();
        let (space, active, start_version, other_format) = {
            let Some(pg) = self.backend.pg() else {
                return Err(EngineError::Postgres(
                    crate::store::postgres::PgError::Invalid("no database".to_string()),
                ));
            };
            // First, so that a changed dimension of the same embedder gets its own error.
            let space = pg.store.ensure_space(&info, options.rebuild)?;
            // Chunks written by an engine of another text format are re-read, unchanged
            // files included.
            let other_format = !self.store.documents().is_empty()
                && pg.store.text_format()? != knowledge::TEXT_FORMAT;
            (
                space,
                pg.space.clone(),
                self.store.generation(),
                other_format,
            )
        };
        if !options.rebuild && !self.store.is_empty() {
            search::check_embedder(&self.store, self.embedder.as_ref())?;
        }
        if other_format {
            tracing::warn!(
                "the chunks in PostgreSQL were written in another text format (Markdown as written, before plain text); re-reading every document"
            );
        }
        let rebuild =
            options.rebuild || other_format || active.as_ref().is_some_and(|a| a.id != space.id);
        let scan = knowledge::scan_with_progress(root, &options.scan, &mut |file, done, pages| {
            progress(IngestProgress::Reading {
                file: file.to_string(),
                done,
                pages,
            })
        })?;
        let plan = plan_ingest(self.store.documents(), &scan, root, rebuild);
        let mut summary = IngestSummary {
            skipped: scan.skipped.clone(),
            formats: scan.formats.clone(),
            added: plan.added.clone(),
            changed: plan.changed.clone(),
            removed: plan.removed.clone(),
            unchanged: plan.unchanged,
            ..IngestSummary::default()
        };
        let pg = match self.backend.pg() {
            Some(pg) => pg,
            None => return Ok(summary),
        };
        let space_switch = active.as_ref().map(|a| a.id) != Some(space.id);
        if plan.touched.is_empty() && !rebuild {
            if !self.store.is_empty() {
                // An earlier run may have stopped before building the index or recording
                // its space: finish that now (no-ops when done).
                pg.store.ensure_hnsw_index(&space)?;
                if space_switch {
                    let lease =
                        pg.store
                            .begin_run(Some(&root.display().to_string()), &space, false)?;
                    let counts = RunCounts {
                        unchanged: plan.unchanged,
                        chunks: self.store.len(),
                        ..RunCounts::default()
                    };
                    pg.store.finish_run(lease.id(), &space, counts)?;
                    pg.store.end_run(lease);
                    self.catch_up(progress)?;
                }
            }
            summary.chunks = self.store.len();
            summary.generation = self.store.generation();
            summary.versions_pruned = self.prune_versions(options.keep_versions)?;
            return Ok(summary);
        }
        if rebuild {
            // Bulk-load without the graph, then build it in one pass.
            pg.store.drop_hnsw_index(&space)?;
        }
        let lease = pg
            .store
            .begin_run(Some(&root.display().to_string()), &space, rebuild)?;
        let run = lease.id();
        let mut new_chunks: HashMap<&str, Vec<&Chunk>> = HashMap::new();
        for c in &scan.chunks {
            new_chunks.entry(c.source.as_str()).or_default().push(c);
        }
        let to_write: Vec<&Document> = scan
            .documents
            .iter()
            .filter(|d| plan.touched.contains(&d.source))
            .collect();
        let total: usize = to_write
            .iter()
            .map(|d| new_chunks.get(d.source.as_str()).map_or(0, Vec::len))
            .sum();
        progress(IngestProgress::Embedding { total });
        let mut versions: Vec<u64> = Vec::new();
        let mut done = 0usize;
        let mut group: Vec<&Document> = Vec::new();
        let mut group_chunks = 0usize;
        for (i, doc) in to_write.iter().enumerate() {
            group.push(doc);
            group_chunks += new_chunks.get(doc.source.as_str()).map_or(0, Vec::len);
            if group_chunks < GROUP_CHUNKS && i + 1 < to_write.len() {
                continue;
            }
            let chunks: Vec<&Chunk> = group
                .iter()
                .flat_map(|d| new_chunks.get(d.source.as_str()).into_iter().flatten())
                .copied()
                .collect();
            let vectors = self.pg_vectors_for(&pg.store, &space, &chunks, rebuild)?;
            let mut offset = 0;
            for d in &group {
                let own: Vec<Chunk> = new_chunks
                    .get(d.source.as_str())
                    .into_iter()
                    .flatten()
                    .map(|c| (*c).clone())
                    .collect();
                let own_vectors = &vectors[offset..offset + own.len()];
                offset += own.len();
                versions.push(
                    pg.store
                        .write_document(Some(run), &space, d, &own, own_vectors)?,
                );
            }
            done += chunks.len();
            progress(IngestProgress::Embedded { done });
            group.clear();
            group_chunks = 0;
        }
        for source in &plan.removed {
            versions.push(pg.store.remove_document(source)?);
        }
        pg.store.ensure_hnsw_index(&space)?;
        let counts = RunCounts {
            added: plan.added.len(),
            changed: plan.changed.len(),
            removed: plan.removed.len(),
            unchanged: plan.unchanged,
            chunks: self
                .store
                .chunks()?
                .iter()
                .filter(|c| !plan.touched.contains(&c.source))
                .count()
                + total,
        };
        let end_version = pg.store.finish_run(run, &space, counts)?;
        pg.store.end_run(lease);
        let contiguous = versions
            .iter()
            .enumerate()
            .all(|(i, &v)| v == start_version + 1 + i as u64)
            && end_version == start_version + versions.len() as u64;
        if contiguous {
            // Only this run wrote since the index was built: update it incrementally, through
            // the same commit of a generation as the embedded store's.
            let kb_id = pg.store.kb_id().to_string();
            let update = self.index.update()?;
            let (records, space, last_run) =
                records_of(self.snapshot_after(&scan, &plan, end_version, &space, run, root)?);
            let reindex = match rebuild {
                true => Reindex::All,
                false => Reindex::Documents(&plan.touched),
            };
            let payload = payload(&kb_id, end_version, Some(run));
            self.commit_generation(update, records, reindex, &payload, progress)?;
            if let Some(pg) = self.backend.pg_mut() {
                pg.space = space;
                pg.last_run = last_run;
            }
        } else {
            // Another process wrote while this one ingested: take everything from the database.
            self.catch_up(progress)?;
        }
        summary.chunks = self.store.len();
        summary.generation = self.store.generation();
        summary.versions_pruned = self.prune_versions(options.keep_versions)?;
        Ok(summary)
    }

    fn pg_repair_if_stale(
        &mut self,
        progress: &mut dyn FnMut(IngestProgress),
    ) -> Result<(), EngineError> {
        let Some(pg) = self.backend.pg() else {
            return Ok(());
        };
        let database = pg.store.data_version()?;
        let indexed = self
            .index
            .committed_payload()?
            .as_deref()
            .and_then(parse_payload);
        let kb_id = pg.store.kb_id().to_string();
        if indexed != Some((kb_id, database)) || self.store.generation() != database {
            self.catch_up(progress)?;
        }
        Ok(())
    }

    /// The in-memory records after a run that only this process wrote: unchanged documents
    /// keep theirs, touched ones take the scan's.
    fn snapshot_after(
        &self,
        scan: &knowledge::scan::ScanReport,
        plan: &IngestPlan,
        version: u64,
        space: &Space,
        run: i64,
        root: &Path,
    ) -> Result<Snapshot, EngineError> {
        let mut documents: Vec<Document> = self
            .store
            .documents()
            .iter()
            .filter(|d| !plan.touched.contains(&d.source))
            .cloned()
            .chain(
                scan.documents
                    .iter()
                    .filter(|d| plan.touched.contains(&d.source))
                    .cloned(),
            )
            .collect();
        documents.sort_by(|a, b| a.source.cmp(&b.source));
        let mut by_source: HashMap<&str, Vec<Chunk>> = HashMap::new();
        for c in self.store.chunks()? {
            if !plan.touched.contains(&c.source) {
                by_source
                    .entry(c.source.as_str())
                    .or_default()
                    .push(c.clone());
            }
        }
        for c in &scan.chunks {
            if plan.touched.contains(&c.source) {
                by_source
                    .entry(c.source.as_str())
                    .or_default()
                    .push(c.clone());
            }
        }
        let mut chunks = Vec::new();
        for d in &documents {
            if let Some(list) = by_source.remove(d.source.as_str()) {
                chunks.extend(list);
            }
        }
        Ok(Snapshot {
            data_version: version,
            documents,
            chunks,
            space: Some(space.clone()),
            knowledge_root: Some(root.display().to_string()),
            last_run: Some(run),
        })
    }

    /// One vector per chunk: stored vectors of unchanged text are reused (same space), the
    /// rest embedded.
    fn pg_vectors_for(
        &self,
        store: &PgStore,
        space: &Space,
        chunks: &[&Chunk],
        rebuild: bool,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        let dims = space.info.dims as usize;
        let reuse = if rebuild {
            HashMap::new()
        } else {
            let keys: Vec<(String, String)> = chunks
                .iter()
                .map(|c| (c.content_hash.clone(), c.title_path.clone()))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            store.vectors_by_text(space, &keys)?
        };
        let key = |c: &Chunk| (c.content_hash.clone(), c.title_path.clone());
        let missing: Vec<usize> = (0..chunks.len())
            .filter(|&i| !reuse.contains_key(&key(chunks[i])))
            .collect();
        let mut fresh = HashMap::with_capacity(missing.len());
        self.embed_missing(
            &missing,
            &|i| embedding_text(chunks[i]),
            dims,
            // Each group of documents is committed as it goes: nothing to resume.
            None,
            &mut |_| {},
            &mut |i, v| {
                fresh.insert(i, v);
                Ok(())
            },
        )?;
        Ok((0..chunks.len())
            .map(|i| match fresh.remove(&i) {
                Some(v) => v,
                None => reuse
                    .get(&key(chunks[i]))
                    .cloned()
                    .unwrap_or_else(|| vec![0.0; dims]),
            })
            .collect())
    }
}

/// The in-memory chunk records of a database snapshot, with its space and last run.
fn records_of(snapshot: Snapshot) -> (ChunkStore, Option<Space>, Option<i64>) {
    let manifest = StoreManifest {
        format: knowledge::TEXT_FORMAT,
        generation: snapshot.data_version,
        updated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        knowledge_root: snapshot.knowledge_root,
        embedder: snapshot.space.as_ref().map(|s| s.info.clone()),
        documents: snapshot.documents,
    };
    (
        ChunkStore::in_memory(manifest, snapshot.chunks),
        snapshot.space,
        snapshot.last_run,
    )
}

/// Which documents an ingest adds, changes, removes or leaves alone (same rules as the
/// embedded store: a file that is now skipped keeps its chunks; only files that are gone are
/// removed).
struct IngestPlan {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
    unchanged: usize,
    touched: HashSet<String>,
}

fn plan_ingest(
    old: &[Document],
    scan: &knowledge::scan::ScanReport,
    root: &Path,
    rebuild: bool,
) -> IngestPlan {
    let old_docs: HashMap<&str, &Document> = old.iter().map(|d| (d.source.as_str(), d)).collect();
    let new_sources: HashSet<&str> = scan.documents.iter().map(|d| d.source.as_str()).collect();
    let mut plan = IngestPlan {
        added: Vec::new(),
        changed: Vec::new(),
        removed: Vec::new(),
        unchanged: 0,
        touched: HashSet::new(),
    };
    for doc in &scan.documents {
        match old_docs.get(doc.source.as_str()) {
            None => {
                plan.added.push(doc.source.clone());
                plan.touched.insert(doc.source.clone());
            }
            Some(old) if rebuild || old.content_hash != doc.content_hash || **old != *doc => {
                plan.changed.push(doc.source.clone());
                plan.touched.insert(doc.source.clone());
            }
            Some(_) => plan.unchanged += 1,
        }
    }
    for old in old {
        if !new_sources.contains(old.source.as_str()) && !root.join(&old.source).exists() {
            plan.removed.push(old.source.clone());
            plan.touched.insert(old.source.clone());
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_rejects_other_formats() {
        let p = payload("abc123", 42, Some(7));
        assert_eq!(p, "ragtrail-pg kb=abc123 version=42 run=7");
        assert_eq!(parse_payload(&p), Some(("abc123".to_string(), 42)));
        assert_eq!(
            parse_payload(&payload("k", 0, None)),
            Some(("k".to_string(), 0))
        );
        assert_eq!(parse_payload("17"), None); // the embedded store's generation
        assert_eq!(parse_payload("ragtrail-pg kb=x"), None);
    }
}
