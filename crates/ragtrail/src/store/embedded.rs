//! The embedded chunk store under the data directory (used when no database is configured).

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::StoreError;
use super::chunk_table::ChunkTable;
use super::records::Records;
use super::terms::ChunkTerms;
use super::vector_writer::VectorWriter;
use super::vectors::VectorIndex;
use crate::access::{AccessContext, private};
use crate::embed::EmbedderInfo;
use crate::knowledge::{Chunk, DocStatus, Document};

/// Follows [`crate::knowledge::TEXT_FORMAT`]: 2, chunk text, headings and titlePaths are plain
/// text rendered from the Markdown (1 held the Markdown as written). Chunk ids did not change,
/// but what is indexed and embedded did.
const FORMAT: u32 = crate::knowledge::TEXT_FORMAT;
const CURRENT: &str = "CURRENT";
const MANIFEST: &str = "manifest.json";
const CHUNKS: &str = "chunks.jsonl";
/// What finds each record in `chunks.jsonl` without parsing it ([`ChunkTable`]).
const CHUNK_TABLE: &str = "chunks.idx";
const VECTORS: &str = "vectors.bin";
/// The int8 copy of the vectors ([`super::mapped_vectors`]).
const QUANTISED: &str = "vectors.q8";
/// Generations kept besides the current one, so a reader that read `CURRENT` just before an
/// ingest switched it (or two) still finds every file it names. Readers open (or map) every
/// file of a generation at open, and a removed file stays mapped, so only the moments of
/// opening need covering.
pub const KEPT_PREVIOUS: u64 = 2;
/// Times an open starts again when the generation it read was removed under it.
const OPEN_ATTEMPTS: usize = 3;

/// What a generation holds besides its chunks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoreManifest {
    pub format: u32,
    pub generation: u64,
    /// RFC 3339 time the generation was written.
    pub updated_at: String,
    /// The knowledge folder the documents were read from.
    pub knowledge_root: Option<String>,
    /// What produced the vectors (one row per chunk, in chunk order).
    pub embedder: Option<EmbedderInfo>,
    pub documents: Vec<Document>,
}

/// Documents and chunks of the current generation: the manifest in memory, the chunk records
/// and vectors mapped from the generation's files and read as they are asked for (or held in
/// memory, for a generation just written or one of an older layout; see [`Records`]).
pub struct ChunkStore {
    dir: PathBuf,
    manifest: StoreManifest,
    records: Records,
    vectors: VectorIndex,
    /// Each chunk's analysed terms, filled on its first hit (see [`ChunkTerms`]).
    analysed: Vec<OnceLock<Box<ChunkTerms>>>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl ChunkStore {
    /// Opens the store in `dir` (an empty store when nothing was ingested yet).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_as(dir, false)
    }

    /// [`ChunkStore::open`] for `ingest --rebuild`: a store of another format opens empty
    /// (its generation number kept, so the rebuilt generation replaces it) instead of failing.
    pub fn open_for_rebuild(dir: &Path) -> Result<Self, StoreError> {
        Self::open_as(dir, true)
    }

    fn open_as(dir: &Path, discard_other_format: bool) -> Result<Self, StoreError> {
        // An ingest that makes a generation current while this one is read removes only
        // generations older than the ones it keeps: a read that still fails for a file gone
        // found `CURRENT` moved on twice meanwhile, and reads the new one.
        let mut attempt = 0;
        loop {
            let named = read_current(dir)?;
            match Self::open_generation(dir, named.as_deref(), discard_other_format) {
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound
                        && attempt < OPEN_ATTEMPTS
                        && read_current(dir)? != named =>
                {
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// A store at `generation` that holds nothing: nothing ingested yet, or a generation
    /// written in another format that is read as empty (and rebuilt by the next ingest).
    fn empty(dir: &Path, generation: u64) -> Self {
        let manifest = StoreManifest {
            format: FORMAT,
            generation,
            ..StoreManifest::default()
        };
        Self::from_parts(
            dir.to_path_buf(),
            manifest,
            Records::loaded(Vec::new()),
            VectorIndex::new(0),
        )
    }

    /// The store of generation folder `named` (`None`: nothing ingested yet). Reads only.
    fn open_generation(
        dir: &Path,
        named: Option<&str>,
        discard_other_format: bool,
    ) -> Result<Self, StoreError> {
        let Some(name) = named else {
            return Ok(Self::empty(dir, 0));
        };
        let gen_dir = dir.join(name);
        let manifest = match read_manifest(&gen_dir) {
            Err(StoreError::Format { .. }) if discard_other_format => {
                return Ok(Self::empty(dir, read_generation(&gen_dir).unwrap_or(0)));
            }
            other => other?,
        };
        let chunks_path = gen_dir.join(CHUNKS);
        let records = match Records::open_mapped(&chunks_path, &gen_dir.join(CHUNK_TABLE))? {
            Some(records) => records,
            None => Records::loaded(read_chunks(&chunks_path)?),
        };
        let vectors = read_vectors(&gen_dir, &manifest, records.len())?;
        Ok(Self::from_parts(
            dir.to_path_buf(),
            manifest,
            records,
            vectors,
        ))
    }

    /// The generation `CURRENT` in `dir` names now (0 when nothing was ingested): one small
    /// file read, cheap enough to ask before every request of a long-running server.
    pub fn current_generation(dir: &Path) -> Result<u64, StoreError> {
        Ok(read_current(dir)?
            .and_then(|name| name.strip_prefix("gen-")?.parse().ok())
            .unwrap_or(0))
    }

    fn from_parts(
        dir: PathBuf,
        manifest: StoreManifest,
        records: Records,
        vectors: VectorIndex,
    ) -> Self {
        let analysed = (0..records.len()).map(|_| OnceLock::new()).collect();
        Self {
            dir,
            manifest,
            records,
            vectors,
            analysed,
        }
    }

    /// A store held only in memory, without vectors: the Postgres backend's copy of the chunk
    /// records it serves hits from (the database is the system of record, and answers the
    /// vector leg). Nothing is ever written under a directory.
    pub fn in_memory(manifest: StoreManifest, chunks: Vec<Chunk>) -> Self {
        Self::from_parts(
            PathBuf::new(),
            manifest,
            Records::loaded(chunks),
            VectorIndex::new(0),
        )
    }

    /// The folder this store lives in (empty for [`ChunkStore::in_memory`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The vectors, one row per chunk in chunk order.
    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// The script each chunk (by position) is written in.
    pub(super) fn written(&self) -> Result<&[super::scripts::Written], StoreError> {
        self.records.written()
    }

    /// Which chunks (by position) `access` may see: one flag per chunk, decided per group.
    pub fn visibility(&self, access: &AccessContext, include_superseded: bool) -> Visibility<'_> {
        let access_groups = self.records.access();
        let allowed = access_groups
            .groups
            .iter()
            .map(|(tenant, roles, status)| {
                access.allows(tenant, roles)
                    && (include_superseded || *status != DocStatus::Superseded)
            })
            .collect();
        Visibility {
            group_of: &access_groups.group_of,
            allowed,
        }
    }

    /// How many chunks `access` may see (superseded ones included): a count decided per
    /// access group, so it costs nothing like a scan.
    pub fn visible_count(&self, access: &AccessContext) -> usize {
        let access_groups = self.records.access();
        access_groups
            .groups
            .iter()
            .zip(&access_groups.sizes)
            .filter(|((tenant, roles, _), _)| access.allows(tenant, roles))
            .map(|(_, n)| n)
            .sum()
    }

    /// Chunks per tenant, counted per access group (no record is read).
    pub fn chunks_per_tenant(&self) -> std::collections::BTreeMap<&str, usize> {
        let access_groups = self.records.access();
        let mut per = std::collections::BTreeMap::new();
        for ((tenant, _, _), n) in access_groups.groups.iter().zip(&access_groups.sizes) {
            *per.entry(tenant.as_str()).or_default() += n;
        }
        per
    }

    pub fn manifest(&self) -> &StoreManifest {
        &self.manifest
    }

    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    pub fn documents(&self) -> &[Document] {
        &self.manifest.documents
    }

    /// Every chunk record, in chunk order: a store opened from its files decodes them all on
    /// the first call (for a command that walks every chunk: an ingest, a reindex, `status`).
    pub fn chunks(&self) -> Result<&[Chunk], StoreError> {
        self.records.all()
    }

    /// Every chunk record in chunk order, decoded anew for the caller to keep or drop: a store
    /// opened from its files holds none of them (see [`ChunkStore::chunks`]).
    pub fn decode_chunks(&self) -> impl Iterator<Item = Result<Chunk, StoreError>> + '_ {
        self.records.decode_each()
    }

    /// The documents that have a chunk in the store, read without decoding whole chunks.
    pub fn chunk_sources(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        self.records.sources()
    }

    /// How many chunks the store holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chunk at `position` (its row in [`Self::vectors`]); a record that cannot be read is
    /// an error.
    pub fn record(&self, position: usize) -> Result<Option<&Chunk>, StoreError> {
        self.records.at(position)
    }

    pub fn get(&self, id: &str) -> Option<&Chunk> {
        self.position(id).and_then(|i| logged(self.records.at(i)))
    }

    /// Where the chunk `id` is in [`Self::chunks`] (and its row in [`Self::vectors`]).
    pub fn position(&self, id: &str) -> Option<usize> {
        logged(self.records.position(id))
    }

    /// The chunk `id` if `access` may see it. A chunk of another tenant, or restricted to roles
    /// the caller lacks, is `None` exactly as one that never existed, so a lookup by id (replay,
    /// audit) cannot tell the two apart or reveal its content hash.
    pub fn get_visible(&self, id: &str, access: &AccessContext) -> Option<&Chunk> {
        self.get(id).filter(|c| access.allows(&c.tenant, &c.roles))
    }

    /// A chunk and its analysed terms (analysed on the first call for that chunk).
    pub fn get_analysed(&self, id: &str) -> Option<(&Chunk, &ChunkTerms)> {
        self.get_analysed_at(self.position(id)?)
    }

    /// [`Self::get_analysed`] of the chunk at `position` in [`Self::chunks`] (as
    /// [`Self::position_of_id64`] gives it).
    pub fn get_analysed_at(&self, position: usize) -> Option<(&Chunk, &ChunkTerms)> {
        let chunk = logged(self.records.at(position))?;
        let terms = self
            .analysed
            .get(position)?
            .get_or_init(|| Box::new(ChunkTerms::new(chunk)));
        Some((chunk, terms))
    }

    /// Position of a chunk by its numeric id (the BM25 index's fast field).
    pub fn position_of_id64(&self, id64: u64) -> Option<usize> {
        self.records.position_of_id64(id64)
    }

    /// Starts the next generation's folder (not yet current), with a writer for its `rows`
    /// vectors of `dims` floats: an ingest writes each vector to the file as it comes, then
    /// [`ChunkStore::write_generation`] writes the rest.
    pub fn start_generation(
        &self,
        dims: usize,
        rows: usize,
    ) -> Result<(NextGeneration, VectorWriter), StoreError> {
        let generation = self.manifest.generation + 1;
        let gen_dir = self.dir.join(format!("gen-{generation}"));
        if gen_dir.exists() {
            // Left over by a crash before it became current.
            std::fs::remove_dir_all(&gen_dir).map_err(io_err(&gen_dir))?;
        }
        // Every file below holds document text: the owner's alone. The store folder is
        // narrowed here, on the writer's path, since readers write nothing.
        private::own_dir(&self.dir).map_err(io_err(&self.dir))?;
        private::create_dir_all(&gen_dir).map_err(io_err(&gen_dir))?;
        let next = NextGeneration {
            generation,
            dir: gen_dir,
            written: false,
        };
        let vectors_path = next.dir.join(VECTORS);
        // On an error `next` is dropped, and the folder with it.
        let vectors = VectorWriter::create(&vectors_path, &next.dir.join(QUANTISED), dims, rows)
            .map_err(|e| StoreError::Vectors {
                path: vectors_path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok((next, vectors))
    }

    /// Writes the generation `next` (not yet current): its `vectors` (from
    /// [`ChunkStore::start_generation`], one per chunk), then the chunks and the manifest.
    /// Call [`ChunkStore::make_current`] after the derived index has committed, so a crash in
    /// between is noticed (generations differ).
    pub fn write_generation(
        &self,
        mut next: NextGeneration,
        vectors: VectorWriter,
        documents: Vec<Document>,
        chunks: Vec<Chunk>,
        embedder: EmbedderInfo,
        knowledge_root: Option<String>,
    ) -> Result<ChunkStore, StoreError> {
        let (generation, gen_dir) = (next.generation, next.dir.clone());
        let vectors_path = gen_dir.join(VECTORS);
        let vectors_err = |message: String| StoreError::Vectors {
            path: vectors_path.display().to_string(),
            message,
        };
        if vectors.len() != chunks.len() {
            return Err(vectors_err(format!(
                "{} vectors for {} chunks",
                vectors.len(),
                chunks.len()
            )));
        }
        let manifest = StoreManifest {
            format: FORMAT,
            generation,
            updated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            knowledge_root,
            embedder: Some(embedder),
            documents,
        };
        let chunks_path = gen_dir.join(CHUNKS);
        let file = private::open(
            &chunks_path,
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
        .map_err(io_err(&chunks_path))?;
        let mut out = BufWriter::new(file);
        let mut offsets = Vec::with_capacity(chunks.len() + 1);
        let mut at = 0u64;
        for chunk in &chunks {
            let line = serde_json::to_string(chunk).map_err(|e| StoreError::Io {
                path: chunks_path.display().to_string(),
                source: e.into(),
            })?;
            out.write_all(line.as_bytes())
                .and_then(|_| out.write_all(b"\n"))
                .map_err(io_err(&chunks_path))?;
            offsets.push(at);
            at += line.len() as u64 + 1;
        }
        offsets.push(at);
        let file = out
            .into_inner()
            .map_err(|e| io_err(&chunks_path)(e.into_error()))?;
        file.sync_all().map_err(io_err(&chunks_path))?;
        ChunkTable::write(&gen_dir.join(CHUNK_TABLE), &chunks, &offsets, at)?;
        let vectors = vectors.finish().map_err(|e| vectors_err(e.to_string()))?;
        let manifest_path = gen_dir.join(MANIFEST);
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| StoreError::Io {
            path: manifest_path.display().to_string(),
            source: e.into(),
        })?;
        write_synced(&manifest_path, &json)?;
        next.written = true;
        Ok(Self::from_parts(
            self.dir.clone(),
            manifest,
            Records::loaded(chunks),
            vectors,
        ))
    }

    /// Atomically makes this generation the current one. Generations older than the
    /// [`KEPT_PREVIOUS`] before it are removed; those stay readable for readers opening now.
    pub fn make_current(&self) -> Result<(), StoreError> {
        let generation = self.manifest.generation;
        let name = format!("gen-{generation}");
        let tmp = self.dir.join(format!("{CURRENT}.tmp"));
        write_synced(&tmp, name.as_bytes())?;
        let current = self.dir.join(CURRENT);
        std::fs::rename(&tmp, &current).map_err(io_err(&current))?;
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let file_name = entry.file_name().to_string_lossy().to_string();
                let old = file_name
                    .strip_prefix("gen-")
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n + KEPT_PREVIOUS < generation);
                if old {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(())
    }
}

/// The next generation's folder, being written (see [`ChunkStore::start_generation`]). Dropped
/// before [`ChunkStore::write_generation`] wrote it (a failed ingest), the folder is removed.
pub struct NextGeneration {
    generation: u64,
    dir: PathBuf,
    written: bool,
}

impl Drop for NextGeneration {
    fn drop(&mut self) {
        if !self.written {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The generation folder `CURRENT` in `dir` names, `None` when there is none (a store never
/// written, or no store folder at all).
fn read_current(dir: &Path) -> Result<Option<String>, StoreError> {
    let current = dir.join(CURRENT);
    match std::fs::read_to_string(&current) {
        Ok(name) => Ok(Some(name.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&current)(e)),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = private::open(
        path,
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
    )
    .map_err(io_err(path))?;
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .map_err(io_err(path))
}

fn read_manifest(gen_dir: &Path) -> Result<StoreManifest, StoreError> {
    let path = gen_dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    let manifest: StoreManifest =
        serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            path: path.display().to_string(),
            line: e.line(),
            message: e.to_string(),
        })?;
    if manifest.format != FORMAT {
        return Err(StoreError::Format {
            path: path.display().to_string(),
            found: manifest.format,
            supported: FORMAT,
        });
    }
    Ok(manifest)
}

/// The generation number of a manifest of any format.
fn read_generation(gen_dir: &Path) -> Option<u64> {
    let bytes = std::fs::read(gen_dir.join(MANIFEST)).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value.get("generation")?.as_u64()
}

/// The vectors of the generation in `gen_dir`: mapped with their int8 copy, or read whole
/// from a generation written before the copy was stored.
fn read_vectors(
    gen_dir: &Path,
    manifest: &StoreManifest,
    rows: usize,
) -> Result<VectorIndex, StoreError> {
    let Some(embedder) = &manifest.embedder else {
        return Ok(VectorIndex::new(0));
    };
    let path = gen_dir.join(VECTORS);
    let vectors = VectorIndex::open(&path, &gen_dir.join(QUANTISED), embedder.dims as usize)
        .map_err(|e| StoreError::Vectors {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    if vectors.len() != rows {
        return Err(StoreError::Vectors {
            path: path.display().to_string(),
            message: format!("{} vectors for {rows} chunks", vectors.len()),
        });
    }
    Ok(vectors)
}

/// Per-chunk visibility under one access context.
pub struct Visibility<'a> {
    group_of: &'a [u32],
    allowed: Vec<bool>,
}

impl Visibility<'_> {
    pub fn allows(&self, position: usize) -> bool {
        self.group_of
            .get(position)
            .is_some_and(|g| self.allowed[*g as usize])
    }
}

fn read_chunks(path: &Path) -> Result<Vec<Chunk>, StoreError> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut chunks = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_err(path))?;
        if line.is_empty() {
            continue;
        }
        chunks.push(
            serde_json::from_str(&line).map_err(|e| StoreError::Corrupt {
                path: path.display().to_string(),
                line: i + 1,
                message: e.to_string(),
            })?,
        );
    }
    Ok(chunks)
}

/// The value of a read that cannot report its error to its caller (a lookup answering
/// `Option`): a record that cannot be read is logged and treated as absent.
fn logged<T>(read: Result<Option<T>, StoreError>) -> Option<T> {
    read.unwrap_or_else(|e| {
        tracing::error!("{e}");
        None
    })
}
