//! Vectors an ingest has computed but not committed yet, kept on disk batch by batch, so that an
//! ingest that stops (the embeddings server gone, Ctrl-C, a crash) resumes where it stopped
//! instead of embedding everything again: against a slow model server a large corpus is hours
//! of work. Nothing here is ever visible to a search; the next ingest only reads it back.
//!
//! One file per data directory. Its header names the embedder that produced the vectors (a
//! journal of another embedder is dropped, never reused); each record holds the SHA-256 of the
//! exact text embedded, the vector, and a checksum. A record cut short by a crash, and anything
//! after it, is dropped when the file is read. The engine removes the file once a generation is
//! committed; a journal left behind is never wrong (same embedder, same text), only wasted disk.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::StoreError;
use crate::embed::EmbedderInfo;

const MAGIC: &[u8; 8] = b"RTEJ0001";
/// Bytes of a record's SHA-256 kept as its checksum.
const CHECKSUM_LEN: usize = 8;
const KEY_LEN: usize = 32;

/// The key of an embedded text: what the vector was computed from, not the chunk it belongs to
/// (two chunks with one text under different headings embed differently).
pub fn text_key(text: &str) -> [u8; KEY_LEN] {
    Sha256::digest(text.as_bytes()).into()
}

/// Vectors kept from interrupted ingests of one embedder, and the file they are appended to.
pub struct EmbedJournal {
    path: PathBuf,
    info: EmbedderInfo,
    dims: usize,
    vectors: HashMap<[u8; KEY_LEN], Vec<f32>>,
    /// Open for appending once the header is on disk (created by the first append).
    file: Option<File>,
}

impl EmbedJournal {
    /// Reads the journal at `path` if it was written by the embedder `info`; a missing file, one
    /// of another embedder or one unreadable from its header on starts empty (and is replaced at
    /// the first append).
    pub fn open(path: &Path, info: &EmbedderInfo) -> Result<Self, StoreError> {
        let mut journal = Self {
            path: path.to_path_buf(),
            info: info.clone(),
            dims: info.dims as usize,
            vectors: HashMap::new(),
            file: None,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(journal),
            Err(e) => return Err(journal.io(e)),
        };
        let Some(records_at) = journal.header_len(&bytes) else {
            return Ok(journal);
        };
        let record_len = KEY_LEN + 4 * journal.dims + CHECKSUM_LEN;
        let mut at = records_at;
        while let Some(record) = bytes.get(at..at + record_len) {
            let (body, sum) = record.split_at(KEY_LEN + 4 * journal.dims);
            if Sha256::digest(body)[..CHECKSUM_LEN] != *sum {
                break;
            }
            let (key, floats) = body.split_at(KEY_LEN);
            let vector: Vec<f32> = floats
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let mut k = [0u8; KEY_LEN];
            k.copy_from_slice(key);
            journal.vectors.insert(k, vector);
            at += record_len;
        }
        // Appends continue right after the last whole record: a torn tail is cut off.
        let file = crate::access::private::open(path, OpenOptions::new().append(true))
            .map_err(|e| journal.io(e))?;
        file.set_len(at as u64).map_err(|e| journal.io(e))?;
        journal.file = Some(file);
        Ok(journal)
    }

    /// Where the records start, when `bytes` opens with this embedder's header.
    fn header_len(&self, bytes: &[u8]) -> Option<usize> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let header = rest.get(4..4 + len)?;
        let info: EmbedderInfo = serde_json::from_slice(header).ok()?;
        (info == self.info).then_some(MAGIC.len() + 4 + len)
    }

    /// The vector kept for the text with this key.
    pub fn get(&self, key: &[u8; KEY_LEN]) -> Option<&[f32]> {
        self.vectors.get(key).map(Vec::as_slice)
    }

    /// How many vectors it holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Appends one batch's vectors and syncs them to disk before returning.
    pub fn append(&mut self, batch: &[([u8; KEY_LEN], &[f32])]) -> Result<(), StoreError> {
        let mut buf = Vec::with_capacity(batch.len() * (KEY_LEN + 4 * self.dims + CHECKSUM_LEN));
        for (key, vector) in batch {
            if vector.len() != self.dims {
                continue;
            }
            let start = buf.len();
            buf.extend_from_slice(key);
            buf.extend(vector.iter().flat_map(|x| x.to_le_bytes()));
            let sum = Sha256::digest(&buf[start..]);
            buf.extend_from_slice(&sum[..CHECKSUM_LEN]);
        }
        let file = match self.file.as_mut() {
            Some(f) => f,
            None => {
                let mut header = MAGIC.to_vec();
                let info = serde_json::to_vec(&self.info).map_err(|e| self.io(e.into()))?;
                header.extend((info.len() as u32).to_le_bytes());
                header.extend(info);
                let mut f = crate::access::private::open(
                    &self.path,
                    OpenOptions::new().write(true).create(true).truncate(true),
                )
                .map_err(|e| self.io(e))?;
                f.write_all(&header).map_err(|e| self.io(e))?;
                self.file.insert(f)
            }
        };
        let written = file.write_all(&buf).and_then(|()| file.sync_data());
        written.map_err(|e| self.io(e))?;
        for (key, vector) in batch {
            if vector.len() == self.dims {
                self.vectors.insert(*key, vector.to_vec());
            }
        }
        Ok(())
    }

    /// Removes the journal at `path` (its vectors are committed). A file that cannot be removed
    /// is left: it is only ever read for texts it holds, so it is never wrong.
    pub fn discard(path: &Path) {
        let _ = std::fs::remove_file(path);
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::Marking;

    fn info(model: &str) -> EmbedderInfo {
        EmbedderInfo {
            kind: "http".into(),
            model: model.into(),
            dims: 3,
            marking: Marking::default(),
        }
    }

    #[test]
    fn vectors_survive_a_reopen_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("embed-journal.bin");
        let mut j = EmbedJournal::open(&path, &info("m")).unwrap();
        assert!(j.is_empty());
        let (a, b, c) = (text_key("a"), text_key("b"), text_key("c"));
        j.append(&[(a, &[1.0, 2.0, 3.0][..]), (b, &[4.0, 5.0, 6.0][..])])
            .unwrap();
        drop(j);
        // A crash in the middle of the next record.
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&c[..20]).unwrap();
        drop(f);

        let mut j = EmbedJournal::open(&path, &info("m")).unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(j.get(&b), Some(&[4.0, 5.0, 6.0][..]));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
        j.append(&[(c, &[7.0, 8.0, 9.0][..])]).unwrap();
        drop(j);
        let j = EmbedJournal::open(&path, &info("m")).unwrap();
        assert_eq!(j.len(), 3);
        assert_eq!(j.get(&c), Some(&[7.0, 8.0, 9.0][..]));
        assert_eq!(j.get(&text_key("d")), None);
    }

    #[test]
    fn another_embedder_or_a_damaged_record_keeps_nothing_from_there_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("embed-journal.bin");
        let mut j = EmbedJournal::open(&path, &info("m")).unwrap();
        j.append(&[
            (text_key("a"), &[1.0, 2.0, 3.0][..]),
            (text_key("b"), &[4.0, 5.0, 6.0][..]),
        ])
        .unwrap();
        drop(j);
        assert!(
            EmbedJournal::open(&path, &info("other"))
                .unwrap()
                .is_empty()
        );

        // Flip one byte of the second record's vector: the first record stays.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - CHECKSUM_LEN - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let j = EmbedJournal::open(&path, &info("m")).unwrap();
        assert_eq!(j.len(), 1);
        assert_eq!(j.get(&text_key("a")), Some(&[1.0, 2.0, 3.0][..]));

        EmbedJournal::discard(&path);
        assert!(!path.exists());
    }
}
