//! A generation's chunk records: all in memory, or read one at a time from the mapped
//! `chunks.jsonl` through its [`ChunkTable`], each record decoded the first time it is asked
//! for. A CLI question over 100k chunks decodes the few dozen records of its hits; a command
//! that walks every chunk (an ingest, a reindex, `status`) decodes them all once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;

use super::StoreError;
use super::chunk_table::{AccessGroups, ChunkTable, IdKeys, id_key};
use super::scripts::Written;
use crate::knowledge::Chunk;

/// The chunk records of one generation, with what finds and filters them.
pub(super) struct Records {
    source: Source,
    keys: IdKeys,
    access: AccessGroups,
    /// The script each chunk (by position) is written in: from the table, or from the texts on
    /// first use.
    written: OnceLock<Vec<Written>>,
}

enum Source {
    /// Every record in memory: written by this process, the Postgres backend's copy, or a
    /// generation written before the chunk table.
    Loaded(Vec<Chunk>),
    Mapped(Mapped),
}

/// Records read from the mapped `chunks.jsonl`, each decoded on first use.
struct Mapped {
    path: PathBuf,
    text: Mmap,
    offsets: Vec<u64>,
    /// Each record once decoded.
    decoded: Vec<OnceLock<Box<Chunk>>>,
    /// Every record, for a caller that walks them all.
    all: OnceLock<Vec<Chunk>>,
}

impl Mapped {
    /// Parses the record at `position` (in range).
    fn decode(&self, position: usize) -> Result<Chunk, StoreError> {
        self.decode_as(position)
    }

    /// Parses the record at `position` (in range) as `T`: a chunk, or the few of its fields a
    /// caller needs.
    fn decode_as<T: serde::de::DeserializeOwned>(&self, position: usize) -> Result<T, StoreError> {
        let (start, end) = (
            self.offsets[position] as usize,
            self.offsets[position + 1] as usize,
        );
        serde_json::from_slice(&self.text[start..end]).map_err(|e| StoreError::Corrupt {
            path: self.path.display().to_string(),
            line: position + 1,
            message: e.to_string(),
        })
    }
}

impl Records {
    pub fn loaded(chunks: Vec<Chunk>) -> Self {
        Self {
            keys: IdKeys::of(&chunks),
            access: AccessGroups::of(&chunks),
            written: OnceLock::new(),
            source: Source::Loaded(chunks),
        }
    }

    /// The records at `path` read through the table at `table_path`; `None` when there is no
    /// table (a generation written before it: the caller reads the records whole).
    pub fn open_mapped(path: &Path, table_path: &Path) -> Result<Option<Self>, StoreError> {
        let io_err = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let Some(table) = ChunkTable::read(table_path, len)? else {
            return Ok(None);
        };
        // SAFETY: read-only and private; a generation's files are written once, renamed into
        // place and never modified (a removed one stays mapped), and every record read through
        // it lies between offsets checked against the file's length.
        let text = unsafe { Mmap::map(&file) }.map_err(io_err)?;
        if text.len() as u64 != len {
            return Err(io_err(std::io::Error::other(
                "chunks.jsonl changed length while opened",
            )));
        }
        let rows = table.offsets.len() - 1;
        let written = OnceLock::new();
        let _ = written.set(table.written);
        Ok(Some(Self {
            source: Source::Mapped(Mapped {
                path: path.to_path_buf(),
                text,
                offsets: table.offsets,
                decoded: (0..rows).map(|_| OnceLock::new()).collect(),
                all: OnceLock::new(),
            }),
            keys: table.keys,
            access: table.access,
            written,
        }))
    }

    pub fn len(&self) -> usize {
        self.access.group_of.len()
    }

    pub fn access(&self) -> &AccessGroups {
        &self.access
    }

    /// Every record, in chunk order (decoded on the first call).
    pub fn all(&self) -> Result<&[Chunk], StoreError> {
        let m = match &self.source {
            Source::Loaded(chunks) => return Ok(chunks),
            Source::Mapped(m) => m,
        };
        if let Some(chunks) = m.all.get() {
            return Ok(chunks);
        }
        let chunks = (0..self.len())
            .map(|i| m.decode(i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(m.all.get_or_init(|| chunks))
    }

    /// Every record in chunk order, each decoded anew and handed over: a mapped store keeps
    /// none of them, for a caller that takes the chunks over or looks at each once.
    pub fn decode_each(&self) -> Box<dyn Iterator<Item = Result<Chunk, StoreError>> + '_> {
        let m = match &self.source {
            Source::Loaded(chunks) => return Box::new(chunks.iter().cloned().map(Ok)),
            Source::Mapped(m) => m,
        };
        match m.all.get() {
            Some(chunks) => Box::new(chunks.iter().cloned().map(Ok)),
            None => Box::new((0..m.decoded.len()).map(|position| m.decode(position))),
        }
    }

    /// The record at `position` (`None` past the end).
    pub fn at(&self, position: usize) -> Result<Option<&Chunk>, StoreError> {
        let m = match &self.source {
            Source::Loaded(chunks) => return Ok(chunks.get(position)),
            Source::Mapped(m) => m,
        };
        if let Some(chunks) = m.all.get() {
            return Ok(chunks.get(position));
        }
        let Some(slot) = m.decoded.get(position) else {
            return Ok(None);
        };
        if let Some(chunk) = slot.get() {
            return Ok(Some(chunk));
        }
        let chunk = Box::new(m.decode(position)?);
        Ok(Some(slot.get_or_init(|| chunk)))
    }

    /// Where the chunk `id` is (the last of equal ids).
    pub fn position(&self, id: &str) -> Result<Option<usize>, StoreError> {
        for (position, _) in self.keys.positions(id_key(id).0) {
            if self.at(position)?.is_some_and(|c| c.id == id) {
                return Ok(Some(position));
            }
        }
        Ok(None)
    }

    /// Where the chunk of numeric id `id64` is (the BM25 index's fast field).
    pub fn position_of_id64(&self, id64: u64) -> Option<usize> {
        self.keys.last_numeric(id64)
    }

    /// The documents that have a chunk here, each once; a mapped store reads only each
    /// record's `source`, so that a caller who needs no more does not hold every chunk.
    pub fn sources(&self) -> Result<HashSet<String>, StoreError> {
        let m = match &self.source {
            Source::Loaded(chunks) => return Ok(chunks.iter().map(|c| c.source.clone()).collect()),
            Source::Mapped(m) => m,
        };
        if let Some(chunks) = m.all.get() {
            return Ok(chunks.iter().map(|c| c.source.clone()).collect());
        }
        #[derive(serde::Deserialize)]
        struct SourceOnly {
            source: String,
        }
        let mut sources = HashSet::new();
        for position in 0..m.decoded.len() {
            let record: SourceOnly = m.decode_as(position)?;
            if !sources.contains(&record.source) {
                sources.insert(record.source);
            }
        }
        Ok(sources)
    }

    /// The script each chunk is written in.
    pub fn written(&self) -> Result<&[Written], StoreError> {
        if let Some(w) = self.written.get() {
            return Ok(w);
        }
        let written = self.all()?.iter().map(|c| Written::of(&c.text)).collect();
        Ok(self.written.get_or_init(|| written))
    }
}
