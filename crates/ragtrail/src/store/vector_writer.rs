//! A new generation's vectors written to its `vectors.bin` as an ingest computes them, in any
//! order, so the ingest never holds them (147 MiB at 100k rows of 384 dimensions, and 37 MiB
//! more for the int8 copy the search needs); then the file's checksum and the int8 copy, each
//! from the rows read back in order. The two files are byte for byte those
//! [`VectorIndex::save_with_quantised`] writes for the same rows.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::vectors::{
    HEADER_LEN, Int8Copy, MAGIC, VectorError, VectorIndex, centred_copy, normalize, quantise_row,
    rename_into_place, tmp_path_for, write_int8_copy,
};

/// Rows read back at once when the file is walked in order (1.5 MB of 384-dim rows).
const BLOCK_ROWS: usize = 1024;

/// The rows file of a new generation, being written (see the module).
pub struct VectorWriter {
    dims: usize,
    rows: usize,
    path: PathBuf,
    quantised: PathBuf,
    /// Where the rows are written, renamed over `path` once checksummed; removed if the
    /// writer is dropped before that.
    tmp: PathBuf,
    file: File,
    /// Each row's int8 scale relative to zero, and that copy's two bounds (as
    /// [`VectorIndex::push`] keeps them): the copy written when centring does not narrow them.
    scales: Vec<f32>,
    max_residual: f32,
    max_quantised_norm: f32,
    renamed: bool,
    /// A row's bytes and its int8 values, reused from row to row.
    row_bytes: Vec<u8>,
    row_int8: Vec<i8>,
}

impl VectorWriter {
    /// A rows file for `rows` rows of `dims` floats, to become `path` with its int8 copy at
    /// `quantised`. Every row is zero until set (a zero row never matches a search).
    pub fn create(
        path: &Path,
        quantised: &Path,
        dims: usize,
        rows: usize,
    ) -> Result<Self, VectorError> {
        let too_large = || VectorError::TooLarge {
            reason: format!("{rows} rows of {dims} dims"),
        };
        let dims_u32 = u32::try_from(dims).map_err(|_| too_large())?;
        // Header and rows; the checksum is appended by `finish`.
        let file_len = rows
            .checked_mul(dims)
            .and_then(|floats| floats.checked_mul(4))
            .and_then(|bytes| u64::try_from(bytes).ok())
            .and_then(|bytes| bytes.checked_add(HEADER_LEN))
            .ok_or_else(too_large)?;
        let tmp = tmp_path_for(path)?;
        let io_err = |source| VectorError::Io {
            path: tmp.clone(),
            source,
        };
        let mut file = crate::access::private::open(
            &tmp,
            OpenOptions::new().read(true).write(true).create_new(true),
        )
        .map_err(io_err)?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&dims_u32.to_le_bytes());
        header.extend_from_slice(&(rows as u64).to_le_bytes());
        // The rows not yet written read as zeros (a sparse file until then).
        let written = file
            .write_all(&header)
            .and_then(|()| file.set_len(file_len));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(e));
        }
        Ok(Self {
            dims,
            rows,
            path: path.to_path_buf(),
            quantised: quantised.to_path_buf(),
            tmp,
            file,
            scales: vec![0.0; rows],
            max_residual: 0.0,
            max_quantised_norm: 0.0,
            renamed: false,
            row_bytes: Vec::with_capacity(4 * dims),
            row_int8: Vec::with_capacity(dims),
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Writes `v`, L2-normalised, as row `i`: the row [`VectorIndex::push`] would have stored.
    pub fn set_row(&mut self, i: usize, v: &[f32]) -> Result<(), VectorError> {
        if i >= self.rows {
            return Err(VectorError::NoSuchRow {
                row: i,
                rows: self.rows,
            });
        }
        let normalized = normalize(v, self.dims)?;
        let stored = normalized.as_deref().unwrap_or(v);
        self.row_bytes.clear();
        self.row_bytes
            .extend(stored.iter().flat_map(|x| x.to_le_bytes()));
        let offset = HEADER_LEN + (i * self.dims * 4) as u64;
        self.file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| self.file.write_all(&self.row_bytes))
            .map_err(|source| VectorError::Io {
                path: self.tmp.clone(),
                source,
            })?;
        self.row_int8.clear();
        let q = quantise_row(stored, &[], &mut self.row_int8);
        self.scales[i] = q.scale;
        self.max_residual = self.max_residual.max(q.residual);
        self.max_quantised_norm = self.max_quantised_norm.max(q.norm);
        Ok(())
    }

    /// Checksums the rows file and puts it in place, writes the int8 copy beside it, and
    /// opens the two mapped, as a reader of the generation will.
    pub fn finish(mut self) -> Result<VectorIndex, VectorError> {
        let digest = self.checksum()?;
        let io_err = |source| VectorError::Io {
            path: self.tmp.clone(),
            source,
        };
        self.file
            .seek(SeekFrom::End(0))
            .and_then(|_| self.file.write_all(&digest))
            .and_then(|()| self.file.sync_all())
            .map_err(io_err)?;
        rename_into_place(&self.tmp, &self.path)?;
        self.renamed = true;
        let (dims, rows) = (self.dims, self.rows);
        let centred = centred_copy(
            dims,
            (self.max_residual, self.max_quantised_norm),
            |visit| {
                let mut reader = RowsInOrder::open(&self.path, dims, rows)?;
                for r in 0..rows {
                    visit(reader.row(r)?);
                }
                Ok(())
            },
        )?;
        let copy = match &centred {
            Some(c) => Int8Copy::centred(c),
            None => Int8Copy {
                center: &[],
                scales: &self.scales,
                max_residual: self.max_residual,
                max_quantised_norm: self.max_quantised_norm,
            },
        };
        let center = copy.center;
        let mut reader = RowsInOrder::open(&self.path, dims, rows)?;
        let mut quant_row = |r: usize, out: &mut Vec<i8>| {
            quantise_row(reader.row(r)?, center, out);
            Ok(())
        };
        write_int8_copy(&self.quantised, dims, &copy, &digest, &mut quant_row)?;
        VectorIndex::open(&self.path, &self.quantised, dims)
    }

    /// The SHA-256 of the header and the rows, as [`VectorIndex::save`] computes it while
    /// writing.
    fn checksum(&mut self) -> Result<[u8; 32], VectorError> {
        let io_err = |source| VectorError::Io {
            path: self.tmp.clone(),
            source,
        };
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut left = HEADER_LEN + (self.rows * self.dims * 4) as u64;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; (BLOCK_ROWS * self.dims.max(1) * 4).min(left as usize)];
        while left > 0 {
            let n = buf.len().min(left as usize);
            self.file.read_exact(&mut buf[..n]).map_err(io_err)?;
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        Ok(hasher.finalize().into())
    }
}

impl Drop for VectorWriter {
    /// A writer dropped before [`VectorWriter::finish`] put its file in place (a failed
    /// ingest) leaves no partial rows file behind.
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The rows of a rows file read in ascending order, a block at a time.
struct RowsInOrder {
    path: PathBuf,
    file: File,
    dims: usize,
    rows: usize,
    /// Rows `first..first + block.len() / dims`, decoded.
    first: usize,
    block: Vec<f32>,
    bytes: Vec<u8>,
}

impl RowsInOrder {
    fn open(path: &Path, dims: usize, rows: usize) -> Result<Self, VectorError> {
        let file = File::open(path).map_err(|source| VectorError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            dims,
            rows,
            first: 0,
            block: Vec::new(),
            bytes: Vec::new(),
        })
    }

    /// Row `r`, asked for in ascending order.
    fn row(&mut self, r: usize) -> Result<&[f32], VectorError> {
        if r >= self.rows {
            return Err(VectorError::NoSuchRow {
                row: r,
                rows: self.rows,
            });
        }
        let dims = self.dims;
        let held = self.block.len() / dims.max(1);
        if dims > 0 && !(self.first..self.first + held).contains(&r) {
            let n = BLOCK_ROWS.min(self.rows.saturating_sub(r));
            self.bytes.resize(n * dims * 4, 0);
            let offset = HEADER_LEN + (r * dims * 4) as u64;
            self.file
                .seek(SeekFrom::Start(offset))
                .and_then(|_| self.file.read_exact(&mut self.bytes))
                .map_err(|source| VectorError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            self.block.clear();
            self.block.extend(
                self.bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            self.first = r;
        }
        let start = (r - self.first) * dims;
        Ok(&self.block[start..start + dims])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeded::SplitMix64;

    /// Rows of four kinds: random, sharing a direction (a model's embeddings, whose copy is
    /// centred), sparse (a hashing embedder's, whose copy is not), and zero rows among them.
    fn rows_of(kind: usize, rng: &mut SplitMix64, dims: usize, rows: usize) -> Vec<Vec<f32>> {
        let base = rng.vector(dims);
        (0..rows)
            .map(|r| match kind {
                _ if r % 97 == 5 => vec![0.0; dims],
                0 => rng.vector(dims),
                1 => (rng.vector(dims).iter().zip(&base))
                    .map(|(x, b)| x + 3.0 * b)
                    .collect(),
                _ => {
                    let mut v = vec![0.0; dims];
                    v[rng.below(dims)] = 1.0;
                    v[rng.below(dims)] -= 0.5;
                    v
                }
            })
            .collect()
    }

    /// Writes `rows` in a scrambled order through a writer and saves them from memory; returns
    /// the written index and the two pairs of files' bytes.
    fn written_and_saved(
        dir: &Path,
        rows: &[Vec<f32>],
        dims: usize,
        rng: &mut SplitMix64,
    ) -> (VectorIndex, [Vec<u8>; 2], [Vec<u8>; 2]) {
        let (path, q8) = (dir.join("w.bin"), dir.join("w.q8"));
        let mut writer = VectorWriter::create(&path, &q8, dims, rows.len()).expect("create");
        let mut order: Vec<usize> = (0..rows.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for &r in &order {
            writer.set_row(r, &rows[r]).expect("set");
        }
        let written = writer.finish().expect("finish");
        let mut memory = VectorIndex::new(dims);
        for row in rows {
            memory.push(row).expect("push");
        }
        let (saved, saved_q8) = (dir.join("s.bin"), dir.join("s.q8"));
        memory.save_with_quantised(&saved, &saved_q8).expect("save");
        let read = |p: &Path| std::fs::read(p).expect("read");
        (
            written,
            [read(&path), read(&q8)],
            [read(&saved), read(&saved_q8)],
        )
    }

    #[test]
    fn rows_written_in_any_order_make_the_files_saved_from_memory() {
        let mut rng = SplitMix64(11);
        for (kind, dims, rows) in [(0, 16, 300), (1, 48, 2500), (2, 64, 1500), (1, 8, 1)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let rows = rows_of(kind, &mut rng, dims, rows);
            let (written, files, saved) = written_and_saved(dir.path(), &rows, dims, &mut rng);
            assert!(files[0] == saved[0], "vectors.bin differs (kind {kind})");
            assert!(files[1] == saved[1], "vectors.q8 differs (kind {kind})");
            assert!(written.is_mapped());
            assert_eq!(written.len(), rows.len());
            let query = rng.vector(dims);
            let mut memory = VectorIndex::new(dims);
            for row in &rows {
                memory.push(row).expect("push");
            }
            assert_eq!(
                written.search(&query, 10, |_| true).expect("search"),
                memory.search(&query, 10, |_| true).expect("search")
            );
        }
    }

    #[test]
    fn the_copy_of_rows_sharing_a_direction_is_centred_and_of_sparse_rows_is_not() {
        let mut rng = SplitMix64(3);
        for (kind, centred) in [(1, true), (2, false)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let rows = rows_of(kind, &mut rng, 32, 400);
            let (written, _, _) = written_and_saved(dir.path(), &rows, 32, &mut rng);
            assert_eq!(written.is_centred(), centred, "kind {kind}");
        }
    }

    #[test]
    fn a_row_never_set_stays_zero_and_never_matches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, q8) = (dir.path().join("v.bin"), dir.path().join("v.q8"));
        let mut writer = VectorWriter::create(&path, &q8, 4, 3).expect("create");
        writer.set_row(0, &[1.0, 0.0, 0.0, 0.0]).expect("set");
        writer.set_row(2, &[0.0, 2.0, 0.0, 0.0]).expect("set");
        let index = writer.finish().expect("finish");
        assert_eq!(index.row(1), [0.0; 4]);
        assert_eq!(index.row(2), [0.0, 1.0, 0.0, 0.0]);
        let hits = index
            .search(&[1.0, 1.0, 1.0, 1.0], 3, |_| true)
            .expect("search");
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 2]);
    }

    #[test]
    fn a_bad_row_is_refused_and_an_unfinished_writer_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, q8) = (dir.path().join("v.bin"), dir.path().join("v.q8"));
        let mut writer = VectorWriter::create(&path, &q8, 4, 2).expect("create");
        assert!(matches!(
            writer.set_row(2, &[1.0; 4]),
            Err(VectorError::NoSuchRow { row: 2, rows: 2 })
        ));
        assert!(matches!(
            writer.set_row(0, &[1.0; 3]),
            Err(VectorError::DimensionMismatch {
                expected: 4,
                actual: 3
            })
        ));
        assert!(matches!(
            writer.set_row(0, &[1.0, f32::NAN, 0.0, 0.0]),
            Err(VectorError::NonFinite { position: 1 })
        ));
        writer.set_row(1, &[1.0; 4]).expect("set");
        drop(writer);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
