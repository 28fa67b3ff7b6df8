//! The embedded chunk store under the data directory (used when no database is configured).

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::index::chunk_id_to_u64;
use crate::knowledge::{Chunk, Document};

const FORMAT: u32 = 1;
const CURRENT: &str = "CURRENT";
const MANIFEST: &str = "manifest.json";
const CHUNKS: &str = "chunks.jsonl";

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
    pub documents: Vec<Document>,
}

/// Documents and chunks of the current generation, held in memory.
pub struct ChunkStore {
    dir: PathBuf,
    manifest: StoreManifest,
    chunks: Vec<Chunk>,
    by_id: HashMap<String, usize>,
    by_id64: HashMap<u64, usize>,
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
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let current = dir.join(CURRENT);
        let (manifest, chunks) = match std::fs::read_to_string(&current) {
            Ok(name) => {
                let gen_dir = dir.join(name.trim());
                (
                    read_manifest(&gen_dir)?,
                    read_chunks(&gen_dir.join(CHUNKS))?,
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                StoreManifest {
                    format: FORMAT,
                    ..StoreManifest::default()
                },
                Vec::new(),
            ),
            Err(e) => return Err(io_err(&current)(e)),
        };
        Ok(Self::from_parts(dir.to_path_buf(), manifest, chunks))
    }

    fn from_parts(dir: PathBuf, manifest: StoreManifest, chunks: Vec<Chunk>) -> Self {
        let by_id = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.clone(), i))
            .collect();
        let by_id64 = chunks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((chunk_id_to_u64(&c.id)?, i)))
            .collect();
        Self {
            dir,
            manifest,
            chunks,
            by_id,
            by_id64,
        }
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

    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    pub fn get(&self, id: &str) -> Option<&Chunk> {
        self.by_id.get(id).map(|&i| &self.chunks[i])
    }

    /// Position of a chunk by its numeric id (the BM25 index's fast field).
    pub fn position_of_id64(&self, id64: u64) -> Option<usize> {
        self.by_id64.get(&id64).copied()
    }

    /// Writes a new generation (not yet current). Call [`ChunkStore::make_current`] after the
    /// derived index has committed, so a crash in between is noticed (generations differ).
    pub fn write_generation(
        &self,
        documents: Vec<Document>,
        chunks: Vec<Chunk>,
        knowledge_root: Option<String>,
    ) -> Result<ChunkStore, StoreError> {
        let generation = self.manifest.generation + 1;
        let gen_dir = self.dir.join(format!("gen-{generation}"));
        if gen_dir.exists() {
            // Left over by a crash before it became current.
            std::fs::remove_dir_all(&gen_dir).map_err(io_err(&gen_dir))?;
        }
        std::fs::create_dir_all(&gen_dir).map_err(io_err(&gen_dir))?;
        let manifest = StoreManifest {
            format: FORMAT,
            generation,
            updated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            knowledge_root,
            documents,
        };
        let chunks_path = gen_dir.join(CHUNKS);
        let file = std::fs::File::create(&chunks_path).map_err(io_err(&chunks_path))?;
        let mut out = BufWriter::new(file);
        for chunk in &chunks {
            let line = serde_json::to_string(chunk).map_err(|e| StoreError::Io {
                path: chunks_path.display().to_string(),
                source: e.into(),
            })?;
            out.write_all(line.as_bytes())
                .and_then(|_| out.write_all(b"\n"))
                .map_err(io_err(&chunks_path))?;
        }
        let file = out
            .into_inner()
            .map_err(|e| io_err(&chunks_path)(e.into_error()))?;
        file.sync_all().map_err(io_err(&chunks_path))?;
        let manifest_path = gen_dir.join(MANIFEST);
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| StoreError::Io {
            path: manifest_path.display().to_string(),
            source: e.into(),
        })?;
        write_synced(&manifest_path, &json)?;
        Ok(Self::from_parts(self.dir.clone(), manifest, chunks))
    }

    /// Atomically makes this generation the current one and removes older generations.
    pub fn make_current(&self) -> Result<(), StoreError> {
        let name = format!("gen-{}", self.manifest.generation);
        let tmp = self.dir.join(format!("{CURRENT}.tmp"));
        write_synced(&tmp, name.as_bytes())?;
        let current = self.dir.join(CURRENT);
        std::fs::rename(&tmp, &current).map_err(io_err(&current))?;
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let file_name = entry.file_name().to_string_lossy().to_string();
                if file_name.starts_with("gen-") && file_name != name {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(())
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = std::fs::File::create(path).map_err(io_err(path))?;
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
