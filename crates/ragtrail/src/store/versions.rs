//! Every chunk text ever indexed, kept by (chunk id, content hash), so an audit can show the
//! exact text a run was shown after its document was edited or removed.
//!
//! The embedded store keeps them in one append-only file beside its generations,
//! `store/versions.jsonl`: ingest appends the chunks whose (id, hash) is not there yet, so an
//! unchanged text is stored once however often it is re-ingested. Generations come and go; this
//! file is never rewritten, except by pruning (`--keep-versions`), which replaces a dropped
//! version's line by a short tombstone so an audit can say "pruned" instead of "unknown".

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::access::AccessContext;
use crate::knowledge::{Chunk, DocStatus};

const VERSIONS: &str = "versions.jsonl";

/// One text a chunk id held, as it was indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkVersion {
    pub chunk_id: String,
    /// SHA-256 of `text`.
    pub content_hash: String,
    pub source: String,
    pub title_path: String,
    pub source_uri: String,
    /// The text, or `None` once pruned.
    pub text: Option<String>,
    /// Who could see it: the chunk's tenant and roles when it was indexed.
    pub tenant: String,
    pub roles: Vec<String>,
    pub status: DocStatus,
    /// RFC 3339 time this text was first indexed.
    pub first_indexed: String,
    /// RFC 3339 time its text was pruned (`--keep-versions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned_at: Option<String>,
}

impl ChunkVersion {
    /// The version `chunk` is, first indexed at `now`.
    pub fn of(chunk: &Chunk, now: &str) -> Self {
        Self {
            chunk_id: chunk.id.clone(),
            content_hash: chunk.content_hash.clone(),
            source: chunk.source.clone(),
            title_path: chunk.title_path.clone(),
            source_uri: chunk.source_uri.clone(),
            text: Some(chunk.text.clone()),
            tenant: chunk.tenant.clone(),
            roles: chunk.roles.clone(),
            status: chunk.status,
            first_indexed: now.to_string(),
            pruned_at: None,
        }
    }

    /// Whether `access` may see this version: by the access the chunk had when it was indexed,
    /// the same rule as for today's chunks.
    pub fn visible_to(&self, access: &AccessContext) -> bool {
        access.allows(&self.tenant, &self.roles)
    }
}

/// How many past versions of each chunk to keep (today's text is always kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepVersions {
    /// Every version ever indexed (the default).
    #[default]
    Forever,
    /// The newest N versions of each chunk id that are no longer current.
    Last(usize),
}

impl std::str::FromStr for KeepVersions {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("forever") || s.eq_ignore_ascii_case("all") {
            return Ok(Self::Forever);
        }
        s.parse::<usize>().map(Self::Last).map_err(|_| {
            format!(
                "`{s}` is not a number of versions: give N (past versions kept per chunk, 0 keeps only today's text) or `forever`"
            )
        })
    }
}

impl std::fmt::Display for KeepVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Forever => f.write_str("forever"),
            Self::Last(n) => write!(f, "{n}"),
        }
    }
}

/// Only the key of a line, so reading the keys does not keep every text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionKey {
    chunk_id: String,
    content_hash: String,
    #[serde(default)]
    text: Option<serde::de::IgnoredAny>,
}

/// The embedded store's version file.
pub struct VersionLog {
    path: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl VersionLog {
    /// The version file of the store in `store_dir`.
    pub fn in_store(store_dir: &Path) -> Self {
        Self {
            path: store_dir.join(VERSIONS),
        }
    }

    /// Appends every chunk whose (id, content hash) is not kept yet, each stamped with its
    /// indexing time; returns how many. The chunks come one at a time: a stored generation's
    /// records, decoded as they are read, are never all held at once.
    pub fn record<'a>(
        &self,
        chunks: impl IntoIterator<Item = Result<(Cow<'a, Chunk>, &'a str), StoreError>>,
    ) -> Result<usize, StoreError> {
        let mut kept = self.keys()?;
        let mut out: Option<BufWriter<std::fs::File>> = None;
        let mut added = 0;
        for item in chunks {
            let (chunk, now) = item?;
            // A pruned text indexed again is kept again (its later line wins).
            if kept.insert((chunk.id.clone(), chunk.content_hash.clone()), true) == Some(true) {
                continue;
            }
            if out.is_none() {
                let file = crate::access::private::open(
                    &self.path,
                    std::fs::OpenOptions::new().create(true).append(true),
                )
                .map_err(io_err(&self.path))?;
                out = Some(BufWriter::new(file));
            }
            if let Some(out) = out.as_mut() {
                write_line(out, &ChunkVersion::of(&chunk, now), &self.path)?;
            }
            added += 1;
        }
        if let Some(out) = out {
            let file = out
                .into_inner()
                .map_err(|e| io_err(&self.path)(e.into_error()))?;
            file.sync_all().map_err(io_err(&self.path))?;
        }
        Ok(added)
    }

    /// Every (chunk id, content hash) in the file, and whether its text is kept.
    fn keys(&self) -> Result<HashMap<(String, String), bool>, StoreError> {
        let mut keys = HashMap::new();
        self.for_each_line(|line, n| {
            let key: VersionKey =
                serde_json::from_str(line).map_err(|e| corrupt(&self.path, n, e))?;
            keys.insert((key.chunk_id, key.content_hash), key.text.is_some());
            Ok(())
        })?;
        Ok(keys)
    }

    /// Every version kept of chunk `id`, oldest first (pruned ones as tombstones).
    pub fn of_chunk(&self, id: &str) -> Result<Vec<ChunkVersion>, StoreError> {
        let mut found: Vec<ChunkVersion> = Vec::new();
        // The id is checked on the raw line first: most lines are other chunks'.
        let needle = format!("\"chunkId\":\"{id}\"");
        self.for_each_line(|line, n| {
            if line.contains(&needle) {
                let v: ChunkVersion =
                    serde_json::from_str(line).map_err(|e| corrupt(&self.path, n, e))?;
                if v.chunk_id == id {
                    // A text kept again after pruning: its later line replaces the tombstone.
                    found.retain(|old| old.content_hash != v.content_hash);
                    found.push(v);
                }
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Prunes the text of every version beyond the newest `keep` past ones of each chunk id
    /// (`current` holds today's (id, hash) pairs, never pruned). Returns how many were pruned.
    pub fn prune(
        &self,
        keep: usize,
        current: &HashSet<(String, String)>,
        now: &str,
    ) -> Result<usize, StoreError> {
        let mut all: Vec<ChunkVersion> = Vec::new();
        self.for_each_line(|line, n| {
            all.push(serde_json::from_str(line).map_err(|e| corrupt(&self.path, n, e))?);
            Ok(())
        })?;
        // Past versions with text, newest first per chunk id (the file is in indexing order).
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut pruned = 0;
        for v in all.iter_mut().rev() {
            let key = (v.chunk_id.clone(), v.content_hash.clone());
            if v.text.is_none() || current.contains(&key) {
                continue;
            }
            let n = seen.entry(v.chunk_id.clone()).or_default();
            *n += 1;
            if *n > keep {
                v.text = None;
                v.pruned_at = Some(now.to_string());
                pruned += 1;
            }
        }
        if pruned == 0 {
            return Ok(0);
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        let file = crate::access::private::open(
            &tmp,
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
        .map_err(io_err(&tmp))?;
        let mut out = BufWriter::new(file);
        for v in &all {
            write_line(&mut out, v, &tmp)?;
        }
        let file = out.into_inner().map_err(|e| io_err(&tmp)(e.into_error()))?;
        file.sync_all().map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(io_err(&self.path))?;
        Ok(pruned)
    }

    fn for_each_line(
        &self,
        mut f: impl FnMut(&str, usize) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&self.path)(e)),
        };
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io_err(&self.path))?;
            if !line.trim().is_empty() {
                f(&line, i + 1)?;
            }
        }
        Ok(())
    }
}

fn corrupt(path: &Path, line: usize, e: serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        path: path.display().to_string(),
        line,
        message: e.to_string(),
    }
}

fn write_line(out: &mut impl Write, version: &ChunkVersion, path: &Path) -> Result<(), StoreError> {
    let line = serde_json::to_string(version).map_err(|e| StoreError::Io {
        path: path.display().to_string(),
        source: e.into(),
    })?;
    out.write_all(line.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
        .map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, text: &str) -> Chunk {
        Chunk {
            id: id.to_string(),
            source: "a.md".into(),
            title_path: "A".into(),
            headings: Vec::new(),
            source_uri: "a.md".into(),
            ordinal: 0,
            text: text.to_string(),
            content_hash: crate::knowledge::sha256_hex(text.as_bytes()),
            tenant: "default".into(),
            roles: Vec::new(),
            version: None,
            updated: None,
            status: DocStatus::Active,
        }
    }

    #[test]
    fn unchanged_text_is_stored_once_and_pruning_keeps_the_newest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = VersionLog::in_store(dir.path());
        let (a1, a2, a3) = (
            chunk("c_1", "one"),
            chunk("c_1", "two"),
            chunk("c_1", "three"),
        );
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a1), "t1"))])
                .expect("record"),
            1
        );
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a1), "t2"))])
                .expect("record"),
            0
        );
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a2), "t2"))])
                .expect("record"),
            1
        );
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a3), "t3"))])
                .expect("record"),
            1
        );
        let texts: Vec<_> = log
            .of_chunk("c_1")
            .expect("read")
            .into_iter()
            .map(|v| v.text)
            .collect();
        assert_eq!(
            texts,
            [Some("one".into()), Some("two".into()), Some("three".into())]
        );
        assert_eq!(log.of_chunk("c_1").expect("read")[0].first_indexed, "t1");
        let current: HashSet<_> = [(a3.id.clone(), a3.content_hash.clone())].into();
        assert_eq!(log.prune(1, &current, "t4").expect("prune"), 1);
        let after = log.of_chunk("c_1").expect("read");
        assert_eq!(after[0].text, None, "the oldest past version goes");
        assert_eq!(after[0].pruned_at.as_deref(), Some("t4"));
        assert_eq!(after[1].text.as_deref(), Some("two"));
        assert_eq!(
            after[2].text.as_deref(),
            Some("three"),
            "today's text stays"
        );
        // A pruned text indexed again is kept again, once.
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a1), "t5"))])
                .expect("record"),
            1
        );
        assert_eq!(
            log.record([Ok((Cow::Borrowed(&a1), "t6"))])
                .expect("record"),
            0
        );
        let again = log.of_chunk("c_1").expect("read");
        assert_eq!(again.len(), 3);
        assert_eq!(again[2].text.as_deref(), Some("one"));
    }

    #[test]
    fn keep_versions_parses_numbers_and_forever() {
        assert_eq!("forever".parse(), Ok(KeepVersions::Forever));
        assert_eq!("3".parse(), Ok(KeepVersions::Last(3)));
        assert!("-1".parse::<KeepVersions>().is_err());
    }
}
