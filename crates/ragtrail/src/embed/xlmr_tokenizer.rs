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
//! The pieces stay in the mapped file: a hash table of their ids (2 MB, built at open in a few
//! milliseconds) finds the piece spelled by a span of the text, so opening costs no trie or map
//! of 250,000 strings. The whole text is segmented at once, not word by word: the vocabulary
//! has no piece with a `▁` after its first character, so the result is the same.
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

/// A ready tokenizer.
pub struct XlmrTokenizer {
    file: Arc<E5File>,
    /// Open addressing: slot = piece id + 1, 0 = empty; a power of two long.
    slots: Vec<u32>,
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
    /// Builds the tokenizer over the file's vocabulary and normalization table.
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
            slots,
            longest_piece,
            unk_score: lowest - UNK_PENALTY,
        })
    }

    /// The id of the piece spelled `bytes`, if there is one.
    fn lookup(&self, bytes: &[u8]) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut at = hash(bytes) as usize & mask;
        loop {
            match self.slots[at] {
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
}
