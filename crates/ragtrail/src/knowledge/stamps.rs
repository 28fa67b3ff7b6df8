//! Has the knowledge folder changed since the last ingest? A cheap answer: each file's size and
//! modification time, recorded after an ingest and compared with the folder now, without reading
//! a single file. A file whose stamp moved but whose bytes did not (a `touch`) is reported too;
//! the next ingest finds it unchanged and records the new stamp.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::KnowledgeError;
use super::scan::{knowledge_files, relative_source};

/// Size and modification time of one knowledge file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStamp {
    pub size: u64,
    /// Nanoseconds since the Unix epoch (0 where the file system keeps no time).
    pub modified_ns: u64,
}

/// The stamps of every knowledge file of a folder, by source path (relative, `/`-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderStamps {
    /// The folder, as it was given to ingest.
    pub root: PathBuf,
    pub files: BTreeMap<String, FileStamp>,
}

/// What differs between the folder now and its stamps at the last ingest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeChanges {
    pub root: PathBuf,
    /// The folder itself is gone (or is no longer a folder).
    pub root_missing: bool,
    pub changed: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

impl KnowledgeChanges {
    pub fn is_empty(&self) -> bool {
        !self.root_missing
            && self.changed.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
    }

    /// Every path named, changed first, at most `n`, then how many more there are.
    pub fn sample(&self, n: usize) -> (Vec<&str>, usize) {
        let all: Vec<&str> = self
            .changed
            .iter()
            .chain(&self.added)
            .chain(&self.removed)
            .map(String::as_str)
            .collect();
        let more = all.len().saturating_sub(n);
        (all.into_iter().take(n).collect(), more)
    }
}

impl FolderStamps {
    /// Stamps every knowledge file under `root` (the files `scan` would read).
    pub fn of(root: &Path) -> Result<Self, KnowledgeError> {
        if !root.is_dir() {
            return Err(KnowledgeError::MissingDir {
                path: root.display().to_string(),
            });
        }
        let mut unreadable = Vec::new();
        let mut files = BTreeMap::new();
        for path in knowledge_files(root, &mut unreadable) {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let modified_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            files.insert(
                relative_source(root, &path),
                FileStamp {
                    size: meta.len(),
                    modified_ns,
                },
            );
        }
        Ok(Self {
            root: root.to_path_buf(),
            files,
        })
    }

    /// How the folder differs now from these stamps.
    pub fn changes(&self) -> KnowledgeChanges {
        let mut out = KnowledgeChanges {
            root: self.root.clone(),
            ..KnowledgeChanges::default()
        };
        let Ok(now) = Self::of(&self.root) else {
            out.root_missing = true;
            return out;
        };
        for (source, stamp) in &now.files {
            match self.files.get(source) {
                None => out.added.push(source.clone()),
                Some(old) if old != stamp => out.changed.push(source.clone()),
                Some(_) => {}
            }
        }
        out.removed = self
            .files
            .keys()
            .filter(|s| !now.files.contains_key(*s))
            .cloned()
            .collect();
        out
    }

    /// Reads stamps saved by [`FolderStamps::save`]; `None` if there are none (never saved, or
    /// unreadable: the check is a convenience and must never stop a command).
    pub fn load(path: &Path) -> Option<Self> {
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the stamps atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), KnowledgeError> {
        let io = |source| KnowledgeError::Io {
            path: path.display().to_string(),
            source,
        };
        let bytes = serde_json::to_vec(self).map_err(|e| io(e.into()))?;
        let tmp = path.with_extension("json.tmp");
        crate::access::private::write(&tmp, &bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    #[test]
    fn changed_added_and_removed_files_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "a.md", "# A\n\nalpha\n");
        write(root, "sub/b.md", "# B\n\nbeta\n");
        write(root, "c.txt", "gamma\n");
        write(root, "notes.rtf", "not a knowledge file");
        write(root, ".hidden/d.md", "# D\n");
        let stamps = FolderStamps::of(root).expect("stamps");
        assert_eq!(
            stamps.files.keys().collect::<Vec<_>>(),
            ["a.md", "c.txt", "sub/b.md"]
        );
        assert!(stamps.changes().is_empty());

        write(root, "a.md", "# A\n\nalpha, longer now\n");
        write(root, "e.md", "# E\n\nepsilon\n");
        std::fs::remove_file(root.join("c.txt")).expect("remove");
        write(root, "notes2.rtf", "still not a knowledge file");
        let changes = stamps.changes();
        assert_eq!(changes.changed, ["a.md"]);
        assert_eq!(changes.added, ["e.md"]);
        assert_eq!(changes.removed, ["c.txt"]);
        assert!(!changes.root_missing);
        assert_eq!(changes.sample(2), (vec!["a.md", "e.md"], 1));
    }

    #[test]
    fn stamps_round_trip_and_a_missing_folder_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("kb");
        write(&root, "a.md", "# A\n\nalpha\n");
        let stamps = FolderStamps::of(&root).expect("stamps");
        let file = dir.path().join("stamps.json");
        stamps.save(&file).expect("save");
        assert_eq!(FolderStamps::load(&file), Some(stamps.clone()));
        assert_eq!(FolderStamps::load(&dir.path().join("none.json")), None);
        std::fs::remove_dir_all(&root).expect("rm");
        assert!(stamps.changes().root_missing);
        assert!(!stamps.changes().is_empty());
    }
}
