//! XLM-RoBERTa's tokenizer (SentencePiece unigram) built from the vocabulary and normalization
//! table inside an `e5-small-q4.bin` file ([`super::e5_file`]).
//!
//! The steps, as the model was trained with them:
//! 1. each character goes through the file's normalization table (NFKC-like: full-width forms
//!    to ASCII, tabs and newlines to spaces, control characters dropped);
//! 2. runs of spaces become one space;
//! 3. a space is put before the text unless it starts with one, and every space becomes the
//!    metaspace `▁` (U+2581);
//! 4. the segmentation into vocabulary pieces with the highest total score (Viterbi over the
//!    characters), a character no piece covers becoming `<unk>`.
//!
//! The pieces stay in the mapped file: a hash table of their ids (2 MB) finds the piece spelled
//! by a span of the text, so opening costs no trie or map of 250,000 strings. The table is built
//! once and kept next to the model file (`e5-small-q4.bin.pieces`, see [`Slots`]); later
//! processes map it instead of hashing 250,000 pieces again. The whole text is segmented at
//! once, not word by word: the vocabulary has no piece with a `▁` after its first character, so
//! the result is the same.
//!
//! Three details follow the package's engine rather than SentencePiece, so that token ids (and
//! vectors) equal its own: scores add up in `f32` in the same order (equal-scoring
//! segmentations, as in long runs of `-`, are then decided alike); a run of uncovered
//! characters gives one `<unk>` per character (SentencePiece fuses the run into one); and the
//! text `<s>` / `</s>` in a document matches those pieces, while the text `<unk>` never does.

use std::hash::Hasher;
use std::sync::Arc;

use rustc_hash::FxHasher;

use super::e5_file::{E5File, Specials};

/// The SentencePiece word-boundary marker.
const METASPACE: char = '\u{2581}';
/// An uncovered character scores this far below the lowest-scoring piece (SentencePiece's
/// unknown-piece penalty).
const UNK_PENALTY: f32 = 10.0;

/// The lookup table's slots. Open addressing: slot = piece id + 1, 0 = empty; a power of two
/// long. Built in memory, or mapped from the file a build wrote next to the model:
///
/// | bytes | content |
/// |---|---|
/// | 8 | magic `RTXLMRP2` |
/// | 4 × 4 | u32 slots, u32 longest piece in bytes, f32 unknown-piece score, u32 pieces |
/// | 2 + n | u16 n, the model file's identity ([`stat_key`]: size, modification time, inode, device) |
/// | 2 + m | u16 m, the model's fingerprint ([`super::local::fingerprint`]) |
/// | 0–3 | zeros, to a multiple of 4 |
/// | 4 × slots | the slots, u32 little-endian |
///
/// A table is the model's while the file's identity stays what it was when the table was
/// written (as git trusts its index for unchanged files), so the fingerprint kept with it
/// spares a process hashing 2 MB of the model too. Any other table is rebuilt and rewritten. A
/// lookup compares the piece it finds with the text, so even a wrong table could only miss a
/// piece, never return a wrong one; at open a sample of pieces is looked up to catch that too.
enum Slots {
    Built(Vec<u32>),
    Mapped {
        map: memmap2::Mmap,
        start: usize,
        len: usize,
    },
}

impl Slots {
    fn len(&self) -> usize {
        match self {
            Slots::Built(v) => v.len(),
            Slots::Mapped { len, .. } => *len,
        }
    }

    fn get(&self, i: usize) -> u32 {
        match self {
            Slots::Built(v) => v[i],
            Slots::Mapped { map, start, .. } => {
                let at = start + 4 * i;
                u32::from_le_bytes([map[at], map[at + 1], map[at + 2], map[at + 3]])
            }
        }
    }
}

const CACHE_MAGIC: &[u8; 8] = b"RTXLMRP2";

/// Where the lookup table of the model at `model` is kept.
pub fn cache_path(model: &std::path::Path) -> std::path::PathBuf {
    let mut name = model.file_name().unwrap_or_default().to_os_string();
    name.push(".pieces");
    model.with_file_name(name)
}

/// The model file's identity as the file system records it: size, modification time, and on
/// Unix its inode and device (a file replaced by another, even of the same size and time, is a
/// new inode).
fn stat_key(model: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(model).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    #[cfg(unix)]
    let node = {
        use std::os::unix::fs::MetadataExt;
        format!("{}:{}", meta.ino(), meta.dev())
    };
    #[cfg(not(unix))]
    let node = String::new();
    Some(format!("{}:{modified}:{node}", meta.len()))
}

/// A table kept beside a model, for the file as it is now; not yet checked against the
/// vocabulary (that is [`XlmrTokenizer::open`]'s).
pub struct Kept {
    map: memmap2::Mmap,
    start: usize,
    len: usize,
    longest_piece: usize,
    unk_score: f32,
    pieces: usize,
    fingerprint: String,
}

impl Kept {
    /// The model's fingerprint, as computed when the table was written.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// The table kept beside `model`, if it was written for the file as it is now.
pub fn kept(model: &std::path::Path) -> Option<Kept> {
    let key = stat_key(model)?;
    let f = std::fs::File::open(cache_path(model)).ok()?;
    // SAFETY: read-only mapping; the file is only ever replaced by a rename, never rewritten
    // in place, and every read below is bounds-checked.
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(map.get(at..at + 4)?.try_into().ok()?))
    };
    let text_at = |at: usize| -> Option<(&[u8], usize)> {
        let n = u16::from_le_bytes(map.get(at..at + 2)?.try_into().ok()?) as usize;
        Some((map.get(at + 2..at + 2 + n)?, at + 2 + n))
    };
    if map.get(..8)? != CACHE_MAGIC {
        return None;
    }
    let len = u32_at(8)? as usize;
    let longest_piece = u32_at(12)? as usize;
    let unk_score = f32::from_bits(u32_at(16)?);
    let pieces = u32_at(20)? as usize;
    let (kept_key, next) = text_at(24)?;
    let (fingerprint, next) = text_at(next)?;
    let fingerprint = std::str::from_utf8(fingerprint).ok()?.to_string();
    let start = next.next_multiple_of(4);
    if kept_key != key.as_bytes()
        || !len.is_power_of_two()
        || len < pieces
        || map.len() != start + 4 * len
    {
        return None;
    }
    Some(Kept {
        map,
        start,
        len,
        longest_piece,
        unk_score,
        pieces,
        fingerprint,
    })
}

/// A ready tokenizer.
pub struct XlmrTokenizer {
    file: Arc<E5File>,
    slots: Slots,
    longest_piece: usize,
    unk_score: f32,
    pub specials: Specials,
}

impl std::fmt::Debug for XlmrTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XlmrTokenizer")
            .field("pieces", &self.file.piece_count())
            .field("longest_piece", &self.longest_piece)
            .finish()
    }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(bytes);
    h.finish()
}

impl XlmrTokenizer {
    /// The tokenizer over the file's vocabulary and normalization table, its lookup table
    /// mapped from `kept` ([`kept`]) when that holds this vocabulary's, else built and written
    /// beside the model ([`cache_path`]) with the model's `fingerprint` for the next process
    /// (where the folder is not writable, built every time).
    pub fn open(file: Arc<E5File>, kept: Option<Kept>, fingerprint: &str) -> Result<Self, String> {
        if let Some(t) = kept.and_then(|k| Self::mapped(&file, k)) {
            return Ok(t);
        }
        let path = cache_path(file.path());
        let t = Self::from_file(file)?;
        let written = match stat_key(t.file.path()) {
            Some(key) => t.write_cache(&path, &key, fingerprint),
            None => Err(std::io::Error::other("the model file cannot be examined")),
        };
        if let Err(e) = written {
            tracing::debug!(
                "cannot keep the tokenizer's table at {}: {e}",
                path.display()
            );
        }
        Ok(t)
    }

    /// The tokenizer over a kept table, if the table holds this vocabulary's pieces.
    fn mapped(file: &Arc<E5File>, kept: Kept) -> Option<Self> {
        let Kept {
            map,
            start,
            len,
            longest_piece,
            unk_score,
            pieces,
            ..
        } = kept;
        if pieces != file.piece_count() {
            return None;
        }
        let t = Self {
            specials: file.specials,
            file: Arc::clone(file),
            slots: Slots::Mapped { map, start, len },
            longest_piece,
            unk_score,
        };
        // A sample of pieces must be found where the table says.
        let step = (pieces / 64).max(1);
        let whole = (0..pieces).step_by(step).all(|id| {
            let piece = t.file.piece_bytes(id).unwrap_or_default();
            piece.is_empty()
                || id == t.specials.unk as usize
                || t.lookup(piece)
                    .is_some_and(|found| t.file.piece_bytes(found) == Some(piece))
        });
        whole.then_some(t)
    }

    /// Writes the built table to `path` (a new file renamed over the old, so a process
    /// mapping the old one keeps reading it whole).
    fn write_cache(
        &self,
        path: &std::path::Path,
        key: &str,
        fingerprint: &str,
    ) -> std::io::Result<()> {
        let Slots::Built(slots) = &self.slots else {
            return Ok(());
        };
        let key_len = u16::try_from(key.len()).map_err(std::io::Error::other)?;
        let fingerprint_len = u16::try_from(fingerprint.len()).map_err(std::io::Error::other)?;
        let mut out = Vec::with_capacity(32 + key.len() + 4 * slots.len());
        out.extend_from_slice(CACHE_MAGIC);
        for v in [
            slots.len() as u32,
            self.longest_piece as u32,
            self.unk_score.to_bits(),
            self.file.piece_count() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&key_len.to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&fingerprint_len.to_le_bytes());
        out.extend_from_slice(fingerprint.as_bytes());
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        for s in slots {
            out.extend_from_slice(&s.to_le_bytes());
        }
        let mut tmp = path.as_os_str().to_os_string();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, &out)?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// Builds the tokenizer over the file's vocabulary and normalization table (its lookup
    /// table in memory).
    pub fn from_file(file: Arc<E5File>) -> Result<Self, String> {
        let n = file.piece_count();
        let size = (2 * n).next_power_of_two().max(2);
        let mask = size - 1;
        let mut slots = vec![0u32; size];
        let mut longest_piece = 1;
        for id in 0..n {
            let piece = file.piece_bytes(id).unwrap_or_default();
            // The unknown piece is never matched from text; empty pieces match nothing.
            if piece.is_empty() || id == file.specials.unk as usize {
                continue;
            }
            longest_piece = longest_piece.max(piece.len());
            let mut at = hash(piece) as usize & mask;
            loop {
                match slots[at] {
                    0 => {
                        slots[at] = id as u32 + 1;
                        break;
                    }
                    // A piece spelled twice: the first id keeps it, as in the package's engine.
                    other if file.piece_bytes(other as usize - 1) == Some(piece) => break,
                    _ => at = (at + 1) & mask,
                }
            }
        }
        let lowest = file.scores().iter().copied().fold(f32::INFINITY, f32::min);
        if !lowest.is_finite() {
            return Err("the vocabulary has no scores".into());
        }
        Ok(Self {
            specials: file.specials,
            file,
            slots: Slots::Built(slots),
            longest_piece,
            unk_score: lowest - UNK_PENALTY,
        })
    }

    /// The id of the piece spelled `bytes`, if there is one.
    fn lookup(&self, bytes: &[u8]) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut at = hash(bytes) as usize & mask;
        loop {
            match self.slots.get(at) {
                0 => return None,
                slot => {
                    let id = slot as usize - 1;
                    if self.file.piece_bytes(id) == Some(bytes) {
                        return Some(id);
                    }
                    at = (at + 1) & mask;
                }
            }
        }
    }

    /// Steps 1–3: the text the pieces are matched against.
    pub fn normalize(&self, text: &str) -> String {
        let table = self.file.normalization();
        let mut out = String::with_capacity(text.len() + 3);
        let mut last_space = false;
        let mut push = |c: char, out: &mut String| {
            // Step 2: a space after a space is dropped (a `▁` in the text itself is not a space).
            if c == ' ' && last_space {
                return;
            }
            last_space = c == ' ';
            if out.is_empty() && c != ' ' {
                out.push(METASPACE);
            }
            out.push(if c == ' ' { METASPACE } else { c });
        };
        for c in text.chars() {
            match table.binary_search_by_key(&c, |(from, _)| *from) {
                Ok(i) => {
                    for &r in &table[i].1 {
                        push(r, &mut out);
                    }
                }
                Err(_) => push(c, &mut out),
            }
        }
        if out.is_empty() {
            out.push(METASPACE);
        }
        out
    }

    /// The piece ids of `text`, without `<s>` and `</s>`.
    pub fn content_ids(&self, text: &str) -> Vec<u32> {
        let normalized = self.normalize(text);
        let bytes = normalized.as_bytes();
        // Byte offset of every character, and the end.
        let mut starts: Vec<usize> = normalized.char_indices().map(|(i, _)| i).collect();
        starts.push(bytes.len());
        let n = starts.len() - 1;
        // best[e]: the highest score of a segmentation of the first e characters; from[e]: the
        // piece ending there (None: <unk>) and where it starts.
        let mut best = vec![f32::NEG_INFINITY; n + 1];
        let mut from: Vec<(Option<usize>, usize)> = vec![(None, 0); n + 1];
        best[0] = 0.0;
        let scores = self.file.scores();
        for i in 0..n {
            let here = best[i];
            for e in i + 1..=n {
                let span = &bytes[starts[i]..starts[e]];
                if span.len() > self.longest_piece {
                    break;
                }
                if let Some(id) = self.lookup(span) {
                    let score = here + scores[id];
                    if score > best[e] {
                        best[e] = score;
                        from[e] = (Some(id), i);
                    }
                }
            }
            let score = here + self.unk_score;
            if score > best[i + 1] {
                best[i + 1] = score;
                from[i + 1] = (None, i);
            }
        }
        let mut ids = Vec::new();
        let mut e = n;
        while e > 0 {
            let (piece, start) = from[e];
            ids.push(piece.map_or(self.specials.unk, |id| id as u32));
            e = start;
        }
        ids.reverse();
        ids
    }

    /// The text of piece `id` (for messages and tests).
    pub fn piece(&self, id: u32) -> Option<String> {
        self.file
            .piece_bytes(id as usize)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::super::e5_file::tests::{open_bytes, tiny};
    use super::*;

    #[test]
    fn normalization_spaces_and_unknown_characters() {
        let file = Arc::new(open_bytes(&tiny()).expect("tiny file"));
        let t = XlmrTokenizer::from_file(file).expect("tokenizer");
        // U+3000 becomes a space, U+0001 is dropped, runs of spaces collapse, a space leads.
        assert_eq!(t.normalize("a\u{3000}\u{1} \u{3000}a"), "▁a▁a");
        assert_eq!(t.normalize(" a"), "▁a");
        assert_eq!(t.normalize(""), "▁");
        // "▁a" is a piece (id 2); "b" and "c" are not: one <unk> (id 1) each.
        assert_eq!(t.content_ids("a a"), vec![2, 2]);
        assert_eq!(t.content_ids("abc"), vec![2, 1, 1]);
        // The text "</s>" is the unknown piece's text here, and never matches it.
        assert_eq!(t.content_ids("a</s>"), vec![2, 1, 1, 1, 1]);
        // "<s>" is a piece and matches.
        assert_eq!(t.content_ids("a<s>"), vec![2, 0]);
    }

    /// Every line of the bundled knowledge base (Chinese and English), every question of the
    /// evaluation sets, and the e5 test texts.
    fn texts() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut out = Vec::new();
        let mut dirs = vec![root.join("knowledge")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("knowledge/").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "md") {
                    let text = std::fs::read_to_string(&path).expect("read");
                    out.extend(
                        text.lines()
                            .filter(|l| !l.trim().is_empty())
                            .map(String::from),
                    );
                }
            }
        }
        // Every question of the evaluation sets.
        for entry in std::fs::read_dir(root.join("eval"))
            .expect("eval/")
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                for line in std::fs::read_to_string(&path).expect("read").lines() {
                    let v: serde_json::Value = serde_json::from_str(line).expect("json");
                    for turn in v["turns"].as_array().into_iter().flatten() {
                        if let Some(q) = turn["question"].as_str() {
                            out.push(q.to_string());
                        }
                    }
                }
            }
        }
        let fixtures = root.join("crates/ragtrail/tests/fixtures/e5/texts.jsonl");
        for line in std::fs::read_to_string(fixtures)
            .expect("texts.jsonl")
            .lines()
        {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            out.push(v["text"].as_str().expect("text").to_string());
        }
        out
    }

    #[test]
    fn the_kept_table_gives_the_built_tables_ids() {
        let model = std::env::var_os("RAGTRAIL_TEST_E5_Q4").unwrap_or_else(|| {
            panic!(
                "RAGTRAIL_TEST_E5_Q4 is not set: run the tests with `bash scripts/test.sh`, which points it at the installed e5-small-q4.bin"
            )
        });
        // The model seen through a link in a folder of our own, so the table is kept there.
        let dir = tempfile::tempdir().expect("temp dir");
        let link = dir.path().join("e5-small-q4.bin");
        std::os::unix::fs::symlink(&model, &link).expect("symlink");
        let file = Arc::new(E5File::open(&link).expect("model"));
        let fingerprint = super::super::local::fingerprint(&[], &link).expect("fingerprint");
        let built = XlmrTokenizer::from_file(Arc::clone(&file)).expect("built");
        assert!(super::kept(&link).is_none(), "nothing kept yet");
        let first = XlmrTokenizer::open(Arc::clone(&file), None, &fingerprint).expect("first");
        assert!(matches!(first.slots, Slots::Built(_)));
        assert!(
            cache_path(&link).is_file(),
            "the first open keeps the table"
        );
        let table = super::kept(&link).expect("the table kept for this file");
        assert_eq!(table.fingerprint(), fingerprint);
        let kept = XlmrTokenizer::open(Arc::clone(&file), Some(table), "unused").expect("second");
        assert!(
            matches!(kept.slots, Slots::Mapped { .. }),
            "the second maps it"
        );
        assert_eq!(
            (kept.longest_piece, kept.unk_score.to_bits()),
            (built.longest_piece, built.unk_score.to_bits())
        );

        let texts = texts();
        assert!(texts.len() > 1200, "{} texts", texts.len());
        let mut tokens = 0;
        for text in &texts {
            let want = built.content_ids(text);
            tokens += want.len();
            assert_eq!(kept.content_ids(text), want, "{text:?}");
        }
        assert!(tokens > 20_000, "{tokens} tokens");

        // A table written for another file (its identity differs), or cut: not taken.
        let bytes = std::fs::read(cache_path(&link)).expect("kept table");
        let mut other = bytes.clone();
        other[26] = if other[26] == b'1' { b'2' } else { b'1' };
        std::fs::write(cache_path(&link), &other).expect("other file's table");
        assert!(super::kept(&link).is_none(), "another file's table");
        std::fs::write(cache_path(&link), &bytes[..bytes.len() - 4]).expect("cut");
        assert!(super::kept(&link).is_none(), "a cut table");
        let rebuilt = XlmrTokenizer::open(Arc::clone(&file), None, &fingerprint).expect("again");
        assert!(matches!(rebuilt.slots, Slots::Built(_)));
        assert_eq!(std::fs::read(cache_path(&link)).expect("rewritten"), bytes);
        // A table whose slots are all empty passes the header's checks, not the sample's.
        let mut empty = bytes.clone();
        let slots = u32::from_le_bytes(empty[8..12].try_into().expect("u32")) as usize;
        let from = empty.len() - 4 * slots;
        empty[from..].fill(0);
        std::fs::write(cache_path(&link), &empty).expect("empty table");
        let table = super::kept(&link).expect("the header is whole");
        let emptied =
            XlmrTokenizer::open(Arc::clone(&file), Some(table), &fingerprint).expect("empty");
        assert!(matches!(emptied.slots, Slots::Built(_)));
    }
}
