//! Exact in-memory vector index with checksummed, atomic persistence.
//!
//! Exact search is the right tool at policy-corpus scale (10⁴–10⁵ chunks): results equal a full
//! sort and there is nothing to tune or rebuild. Scanning 100k × 384 f32 rows reads 147 MiB per
//! query, so larger indexes keep a second, int8 copy of the rows (a quarter of the bytes) and
//! search in two steps (see [`VectorIndex::search`]): an integer scan picks a shortlist, the
//! shortlist is re-scored with the f32 rows, and a bound on the quantisation error proves that
//! no row outside the shortlist could have entered the top k; when the proof fails, a second
//! integer pass re-scores every row the bound cannot rule out. Results are therefore always
//! those of the exact scan (same rows, same f32 scores, same order). Timings:
//! `examples/vector_bench.rs`. Rows are addressed by position; the caller keeps a parallel list
//! of chunk ids.
//!
//! # File format (`RTVEC001`, all integers and floats little-endian)
//!
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `RTVEC001` |
//! | 4 | `dims`, u32 |
//! | 8 | `rows`, u64 |
//! | 4·dims·rows | row-major f32 data (rows already L2-normalised) |
//! | 32 | SHA-256 of all preceding bytes |
//!
//! The store writes the int8 copy beside it (`vectors.q8`, see [`super::mapped_vectors`]),
//! taken relative to the rows' mean when that narrows the bound (a model's embeddings share
//! most of their direction, see [`VectorIndex::center`]), and opens both mapped: the int8 scan
//! reads the copy in place, and the few f32 rows re-scored are copied out of `vectors.bin`
//! rather than read through its mapping. An ingest writes the two files without holding the
//! rows ([`super::vector_writer`]). [`VectorIndex::load`] reads a file alone and rebuilds
//! the int8 copy (one pass over the rows), as for a generation written before the copy was
//! stored.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use sha2::{Digest, Sha256};

use super::mapped_vectors::MappedRows;

/// First bytes of every vector file; the trailing digits version the format.
pub const MAGIC: &[u8; 8] = b"RTVEC001";
pub(super) const HEADER_LEN: u64 = 8 + 4 + 8;
pub(super) const CHECKSUM_LEN: u64 = 32;
/// Floats converted per I/O chunk, so save/load never hold a second full copy of the data.
const IO_CHUNK_FLOATS: usize = 16 * 1024;

/// Errors from building, searching, saving or loading a [`VectorIndex`].
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// A vector's length differs from the index's dimension.
    #[error("dimension mismatch: expected {expected} dims, got {actual}")]
    DimensionMismatch {
        /// The index's (or caller's expected) dimension.
        expected: usize,
        /// The dimension found.
        actual: usize,
    },
    /// A vector contains NaN or ±∞, which cannot be normalised or ranked.
    #[error("vector has a non-finite value at position {position}")]
    NonFinite {
        /// Offset of the first bad value within the vector.
        position: usize,
    },
    /// A row past the end of the index.
    #[error("row {row} of an index of {rows}")]
    NoSuchRow {
        /// The row asked for.
        row: usize,
        /// Rows in the index.
        rows: usize,
    },
    /// Reading or writing the file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// The file does not start with `MAGIC`: not a vector file, or another format version.
    #[error("{path} is not a ragtrail vector file (bad magic)")]
    BadMagic {
        /// File involved.
        path: PathBuf,
    },
    /// The file is shorter than its header says it should be.
    #[error("{path} is truncated: expected {expected} bytes, found {actual}")]
    Truncated {
        /// File involved.
        path: PathBuf,
        /// Length implied by the header (or the header's own length).
        expected: u64,
        /// Actual length.
        actual: u64,
    },
    /// The file is longer than its header says it should be.
    #[error("{path} has {actual} bytes but its header implies {expected}")]
    TrailingData {
        /// File involved.
        path: PathBuf,
        /// Length implied by the header.
        expected: u64,
        /// Actual length.
        actual: u64,
    },
    /// The stored SHA-256 does not match the content: the file is corrupt.
    #[error("{path} is corrupt: checksum {actual} does not match stored {expected}")]
    ChecksumMismatch {
        /// File involved.
        path: PathBuf,
        /// Stored checksum, hex.
        expected: String,
        /// Checksum of the content read, hex.
        actual: String,
    },
    /// The file is structurally invalid in some other way (e.g. absurd header sizes).
    #[error("{path} is corrupt: {reason}")]
    Corrupt {
        /// File involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The index cannot be represented in the file format (dims above `u32::MAX`).
    #[error("index too large to save: {reason}")]
    TooLarge {
        /// What does not fit.
        reason: String,
    },
}

/// Exact cosine-similarity index over fixed-dimension vectors.
///
/// # Examples
///
/// ```
/// use ragtrail::internals::VectorIndex;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut index = VectorIndex::new(3);
/// index.push(&[1.0, 0.0, 0.0])?; // row 0
/// index.push(&[0.0, 2.0, 0.0])?; // row 1 (stored normalised)
/// index.push(&[1.0, 1.0, 0.0])?; // row 2
///
/// let hits = index.search(&[0.0, 1.0, 0.0], 2, |_| true)?;
/// assert_eq!(hits[0], (1, 1.0));
/// assert_eq!(hits[1].0, 2);
///
/// // Filters run before scoring: row 1 is never returned here.
/// let hits = index.search(&[0.0, 1.0, 0.0], 2, |row| row != 1)?;
/// assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [2, 0]);
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("chunks.vec");
/// index.save(&path)?;
/// assert_eq!(VectorIndex::load(&path)?, index);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct VectorIndex {
    dims: usize,
    rows: usize,
    /// The rows, their int8 copy and scales: in memory, or mapped from a store's files.
    storage: Storage,
    /// Largest L2 norm of a row's quantisation residual `x - scale * q`, rounded up: bounds how
    /// far an integer score can be from the exact one.
    max_residual: f32,
    /// Largest L2 norm of a dequantised row `scale * q`, rounded up (about 1: rows are unit
    /// vectors, but a file's rows are not trusted to be).
    max_quantised_norm: f32,
}

/// Where a [`VectorIndex`]'s rows live.
#[derive(Clone)]
enum Storage {
    Owned {
        /// Row-major, `rows * dims` floats, each row L2-normalised (or all zeros).
        data: Vec<f32>,
        /// The rows quantised to int8 (row-major, `rows * dims`): row `r` ≈
        /// `scales[r] * quant[r]`. Derived from `data`, kept in step by `push` and `load`.
        quant: Vec<i8>,
        /// Per-row dequantisation scale, `max |x − center| / 127`; 0 exactly for a zero row.
        scales: Vec<f32>,
        /// What every row's int8 copy is taken relative to (see [`VectorIndex::center`]).
        center: Vec<f32>,
    },
    /// The same four, read in place from a generation's `vectors.bin` and `vectors.q8`.
    Mapped(std::sync::Arc<MappedRows>),
}

/// Two indexes are equal when they hold the same rows: the int8 copy is derived from them, and
/// a store's copy may be taken relative to another center than one built in memory.
impl PartialEq for VectorIndex {
    fn eq(&self, other: &Self) -> bool {
        self.dims == other.dims && self.rows == other.rows && self.data() == other.data()
    }
}

impl fmt::Debug for VectorIndex {
    // The data can be hundreds of MB; never dump it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorIndex")
            .field("dims", &self.dims)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl VectorIndex {
    /// An empty index for `dims`-long vectors.
    pub fn new(dims: usize) -> Self {
        Self::with_capacity(dims, 0)
    }

    /// An empty index with room for `rows` vectors before reallocating.
    pub fn with_capacity(dims: usize, rows: usize) -> Self {
        Self {
            dims,
            rows: 0,
            storage: Storage::Owned {
                data: Vec::with_capacity(dims.saturating_mul(rows)),
                quant: Vec::with_capacity(dims.saturating_mul(rows)),
                scales: Vec::with_capacity(rows),
                center: Vec::new(),
            },
            max_residual: 0.0,
            max_quantised_norm: 0.0,
        }
    }

    /// Builds the index from already normalised row-major data (from a file), quantising it.
    fn from_normalised(dims: usize, rows: usize, data: Vec<f32>) -> Self {
        let mut quant = Vec::with_capacity(data.len());
        let mut scales = Vec::with_capacity(rows);
        let (mut max_residual, mut max_quantised_norm) = (0.0f32, 0.0f32);
        if dims > 0 {
            for row in data.chunks_exact(dims) {
                let q = quantise_into(row, &mut quant);
                scales.push(q.scale);
                max_residual = max_residual.max(q.residual);
                max_quantised_norm = max_quantised_norm.max(q.norm);
            }
        } else {
            scales.resize(rows, 0.0);
        }
        Self {
            dims,
            rows,
            storage: Storage::Owned {
                data,
                quant,
                scales,
                center: Vec::new(),
            },
            max_residual,
            max_quantised_norm,
        }
    }

    /// The index of a generation's `vectors.bin` at `path`, mapped with its int8 copy at
    /// `quantised` when that file is there (written by this version's ingest), read whole and
    /// quantised otherwise. Checks the rows are `dims` long either way.
    pub fn open(path: &Path, quantised: &Path, dims: usize) -> Result<Self, VectorError> {
        let Some(mapped) = MappedRows::open(path, quantised)? else {
            return Self::load_with_dims(path, dims);
        };
        if mapped.dims() != dims {
            return Err(VectorError::DimensionMismatch {
                expected: dims,
                actual: mapped.dims(),
            });
        }
        Ok(Self {
            dims,
            rows: mapped.rows(),
            max_residual: mapped.max_residual(),
            max_quantised_norm: mapped.max_quantised_norm(),
            storage: Storage::Mapped(std::sync::Arc::new(mapped)),
        })
    }

    /// Whether the rows are read in place from files (see [`VectorIndex::open`]).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// Row-major `rows * dims` floats, each row L2-normalised (or all zeros).
    fn data(&self) -> &[f32] {
        match &self.storage {
            Storage::Owned { data, .. } => data,
            Storage::Mapped(m) => m.data(),
        }
    }

    /// The int8 copy, row-major: row `r` ≈ `scales[r] * quant[r]`.
    fn quant(&self) -> &[i8] {
        match &self.storage {
            Storage::Owned { quant, .. } => quant,
            Storage::Mapped(m) => m.quant(),
        }
    }

    /// Per-row dequantisation scale, `max |x − center| / 127`; 0 exactly for a zero row.
    fn scales(&self) -> &[f32] {
        match &self.storage {
            Storage::Owned { scales, .. } => scales,
            Storage::Mapped(m) => m.scales(),
        }
    }

    /// The vector the int8 copy is taken relative to: row `r` ≈ `center + scales[r] * quant[r]`
    /// (empty: no center, as in memory). A model's embeddings share a large common direction
    /// (multilingual-e5's unrelated passages score 0.8 against each other), and the int8 grid
    /// spent on it leaves a coarse step for what tells rows apart; the copy a store writes is
    /// taken relative to the rows' mean, which every query scores the same against.
    fn center(&self) -> &[f32] {
        match &self.storage {
            Storage::Owned { center, .. } => center,
            Storage::Mapped(m) => m.center(),
        }
    }

    /// The rows in memory, to append to: a mapped index is copied first (an ingest building
    /// on a generation it opened).
    fn owned(&mut self) -> (&mut Vec<f32>, &mut Vec<i8>, &mut Vec<f32>, &[f32]) {
        if let Storage::Mapped(m) = &self.storage {
            self.storage = Storage::Owned {
                data: m.data().to_vec(),
                quant: m.quant().to_vec(),
                scales: m.scales().to_vec(),
                center: m.center().to_vec(),
            };
        }
        match &mut self.storage {
            Storage::Owned {
                data,
                quant,
                scales,
                center,
            } => (data, quant, scales, &*center),
            Storage::Mapped(_) => unreachable!("copied into memory above"),
        }
    }

    /// Bytes held for the int8 copy used by the quantised scan (on top of the f32 rows).
    pub fn quantised_bytes(&self) -> usize {
        self.quant().len() + std::mem::size_of_val(self.scales())
    }

    /// Length of every row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends a copy of `v`, L2-normalised, and returns its row number. A zero vector is stored
    /// as is and never matches a search (it has no direction).
    pub fn push(&mut self, v: &[f32]) -> Result<usize, VectorError> {
        let normalized = normalize(v, self.dims)?;
        let stored = normalized.as_deref().unwrap_or(v);
        let (data, quant, scales, center) = self.owned();
        data.extend_from_slice(stored);
        let q = quantise_row(stored, center, quant);
        scales.push(q.scale);
        self.max_residual = self.max_residual.max(q.residual);
        self.max_quantised_norm = self.max_quantised_norm.max(q.norm);
        let row = self.rows;
        self.rows += 1;
        Ok(row)
    }

    /// The stored (normalised) row `i`.
    ///
    /// # Panics
    ///
    /// If `i >= len()`, like slice indexing; use [`get`](Self::get) for a checked lookup.
    pub fn row(&self, i: usize) -> &[f32] {
        let start = i * self.dims;
        &self.data()[start..start + self.dims]
    }

    /// The stored (normalised) row `i`, or `None` if out of range.
    pub fn get(&self, i: usize) -> Option<&[f32]> {
        if i < self.rows {
            let start = i * self.dims;
            self.data().get(start..start + self.dims)
        } else {
            None
        }
    }

    /// The `k` rows most similar to `query` by cosine, among rows where `allow(row)` is true.
    ///
    /// Sorted by score descending, then row ascending, so ties are deterministic. Returns fewer
    /// than `k` hits when fewer rows are allowed; zero rows and a zero query match nothing.
    /// Memory per query is O(k + dims), independent of the number of rows.
    ///
    /// The result always equals [`search_exact`](Self::search_exact)'s. Indexes with more rows
    /// than the shortlist (`max(4k, k + 32)`) are scanned with int8 dot products first; the
    /// shortlist is re-scored with the f32 rows, and the quantisation error bound either proves
    /// the shortlist held the true top k or triggers a second integer pass over the rows the
    /// bound cannot exclude. A query with at most one non-zero component in four (the hashing
    /// embedder's) is scored on those components alone while the index is at most 16 MiB,
    /// bit for bit the same sums.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        allow: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f32)>, VectorError> {
        self.search_with_stats(query, k, allow)
            .map(|(hits, _)| hits)
    }

    /// The normalised query, or `None` when nothing can match: a zero query has no direction,
    /// and `k == 0` or a zero-dimension index asks for nothing.
    fn searchable_query(&self, query: &[f32], k: usize) -> Result<Option<Vec<f32>>, VectorError> {
        let query = normalize(query, self.dims)?;
        Ok(query.filter(|_| k > 0 && self.dims > 0))
    }

    /// [`search`](Self::search), also reporting how the answer was reached (for benchmarks).
    pub fn search_with_stats(
        &self,
        query: &[f32],
        k: usize,
        allow: impl Fn(usize) -> bool,
    ) -> Result<(Vec<(usize, f32)>, ScanStats), VectorError> {
        let Some(query) = self.searchable_query(query, k)? else {
            return Ok((Vec::new(), ScanStats::default()));
        };
        let shortlist = shortlist_len(k);
        // A few keywords through the hashing embedder light up a handful of dimensions:
        // multiplying only those is the same sum, several times faster while the f32 rows stay
        // in cache; beyond that the int8 pass reads fewer bytes per row.
        let sparse = SparseQuery::of(&query).filter(|_| {
            self.rows.saturating_mul(self.dims).saturating_mul(4) <= SPARSE_SCAN_MAX_BYTES
        });
        if self.rows <= shortlist || sparse.is_some() {
            // Every row would be re-scored anyway (or cheaply): the int8 pass would add work.
            let hits = match sparse {
                Some(sparse) => self.scan_with(k, &allow, |row| sparse.dot(row)),
                None => self.exact_scan(&query, k, &allow),
            };
            let stats = ScanStats {
                rescored: self.rows,
                ..ScanStats::default()
            };
            return Ok((hits, stats));
        }
        self.quantised_scan(&query, k, shortlist, &allow)
    }

    /// The shortlist step alone: the top `k` of the `max(4k, k + 32)` best rows by integer
    /// score, re-scored exactly, without the completeness proof or the second pass. May miss
    /// true top-k rows; exists so benchmarks can report the recall the proof protects.
    pub fn search_shortlist_only(
        &self,
        query: &[f32],
        k: usize,
        allow: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f32)>, VectorError> {
        let Some(query) = self.searchable_query(query, k)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .shortlist_step(&query, k, shortlist_len(k), &allow)?
            .exact
            .into_hits())
    }

    /// The reference search: every allowed row scored with f32 dot products, no int8 pass.
    /// Same contract and results as [`search`](Self::search), several times slower on large
    /// indexes; kept for tests and benchmarks.
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        allow: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f32)>, VectorError> {
        let Some(query) = self.searchable_query(query, k)? else {
            return Ok(Vec::new());
        };
        Ok(self.exact_scan(&query, k, &allow))
    }

    /// Top `k` of the allowed non-zero rows by f32 score; `query` is normalised.
    fn exact_scan(
        &self,
        query: &[f32],
        k: usize,
        allow: &impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        self.scan_with(k, allow, |row| dot(query, row))
    }

    /// Top `k` of the allowed non-zero rows by `score(row)`.
    fn scan_with(
        &self,
        k: usize,
        allow: &impl Fn(usize) -> bool,
        score: impl Fn(&[f32]) -> f32,
    ) -> Vec<(usize, f32)> {
        let scales = self.scales();
        let scored = self
            .data()
            .chunks_exact(self.dims)
            .enumerate()
            // A zero row (scale 0) has no direction and must never match.
            .filter(|&(row, _)| allow(row) && scales[row] != 0.0)
            .map(|(row, vector)| Candidate {
                score: score(vector),
                row,
            });
        if self.rows <= shortlist_len(k) && u32::try_from(self.rows).is_ok() {
            // Few rows for this k: sorting them all beats keeping a heap (memory stays O(k)),
            // and sorting one integer per row (the candidate order, packed) beats comparing
            // (score, row) pairs.
            let mut keys: Vec<u64> = scored.map(|c| c.sort_key()).collect();
            keys.sort_unstable();
            keys.truncate(k);
            return keys
                .into_iter()
                .map(|key| {
                    let c = Candidate::from_sort_key(key);
                    (c.row, c.score)
                })
                .collect();
        }
        let mut top = TopK::new(k);
        for candidate in scored {
            top.offer(candidate);
        }
        top.into_hits()
    }

    /// Steps 1 and 2 of the quantised scan: the `shortlist` best rows by integer score, and the
    /// top `k` of them re-scored with the f32 rows, best integer score first, until the rows
    /// left cannot reach the k-th exact score even at the error bound; `query` is normalised.
    fn shortlist_step(
        &self,
        query: &[f32],
        k: usize,
        shortlist: usize,
        allow: &impl Fn(usize) -> bool,
    ) -> Result<Shortlist, VectorError> {
        let mut q8 = Vec::with_capacity(self.dims);
        let Quantised {
            scale: q_scale,
            residual: q_residual,
            ..
        } = quantise_into(query, &mut q8);
        // Every row's copy is relative to the center, so the query's score against the center
        // is added to each integer score (see `center`).
        let center = self.center();
        let q_center = if center.is_empty() {
            0.0
        } else {
            dot(center, query)
        };
        let mut coarse = TopK::new(shortlist);
        for (row, score) in self.integer_scores(&q8, q_scale, q_center, allow) {
            coarse.offer(Candidate { score, row });
        }
        let (full, weakest_kept) = (coarse.is_full(), coarse.worst_score());
        let bound = self.error_bound(q_residual);
        let kept = coarse.heap.into_sorted_vec(); // best integer score first
        let mut exact = TopK::new(k);
        let (mut rescored, mut proven) = (0, false);
        let mut rows = Vec::with_capacity(RESCORE_STEP);
        for step in kept.chunks(RESCORE_STEP) {
            // A row scores at most its integer score + bound, and the rest of the shortlist and
            // every row left out score lower (strictly: a tie could win on row number).
            if let (true, Some(kth)) = (exact.is_full(), exact.worst_score())
                && f64::from(step[0].score) + bound < f64::from(kth)
            {
                proven = true;
                break;
            }
            rows.clear();
            rows.extend(step.iter().map(|c| c.row));
            rows.sort_unstable();
            self.visit_rows(&rows, |row, vector| {
                exact.offer(Candidate {
                    score: dot(query, vector),
                    row,
                })
            })?;
            rescored += rows.len();
        }
        Ok(Shortlist {
            full,
            weakest_kept,
            proven,
            bound,
            rescored,
            q8,
            q_scale,
            q_center,
            exact,
        })
    }

    /// The two-step search; `query` is normalised and `self.rows > shortlist >= k > 0`.
    fn quantised_scan(
        &self,
        query: &[f32],
        k: usize,
        shortlist: usize,
        allow: &impl Fn(usize) -> bool,
    ) -> Result<(Vec<(usize, f32)>, ScanStats), VectorError> {
        let mut stats = ScanStats::default();
        let Shortlist {
            q8,
            q_scale,
            q_center,
            full: shortlist_full,
            weakest_kept,
            proven,
            bound,
            rescored,
            exact,
        } = self.shortlist_step(query, k, shortlist, allow)?;
        stats.rescored = rescored;
        if proven {
            return Ok((exact.into_hits(), stats));
        }
        // Step 3: a row left out scores at most weakest_kept + bound. If that is below the k-th
        // exact score (strictly: a tie could win on row number), the shortlist held the top k.
        let (Some(weakest_kept), Some(kth)) = (weakest_kept, exact.worst_score()) else {
            return Ok((exact.into_hits(), stats)); // fewer than k or shortlist rows allowed
        };
        if !shortlist_full || !exact.is_full() || f64::from(weakest_kept) + bound < f64::from(kth) {
            return Ok((exact.into_hits(), stats));
        }
        // Not proven: every row whose integer score is within the bound of the k-th exact score
        // found so far may belong to the top k; score them all exactly.
        stats.second_pass = true;
        let floor = f64::from(kth) - bound;
        let mut exact = TopK::new(k);
        let mut rescore = |rows: &[usize]| {
            self.visit_rows(rows, |row, vector| {
                exact.offer(Candidate {
                    score: dot(query, vector),
                    row,
                })
            })
        };
        // Re-scored in batches, so memory per query stays independent of the row count.
        let mut batch = Vec::with_capacity(RESCORE_BATCH);
        stats.rescored = 0;
        for (row, score) in self.integer_scores(&q8, q_scale, q_center, allow) {
            if f64::from(score) >= floor {
                batch.push(row);
                if batch.len() == RESCORE_BATCH {
                    rescore(&batch)?;
                    stats.rescored += batch.len();
                    batch.clear();
                }
            }
        }
        rescore(&batch)?;
        stats.rescored += batch.len();
        Ok((exact.into_hits(), stats))
    }

    /// How far an integer score can be from the exact one, for a query quantised with error
    /// `q_residual`. With x − c = x̂ + e_x (c the center, 0 for none) and q = q̂ + e_q, the exact
    /// score is x·q = c·q + x̂·q̂ + e_x·q + x̂·e_q, so by Cauchy–Schwarz |exact − integer score|
    /// ≤ ‖e_x‖·‖q‖ + ‖x̂‖·‖e_q‖, with ‖q‖ = 1; plus f32 rounding, in c·q too (‖c‖ ≤ 1).
    fn error_bound(&self, q_residual: f32) -> f64 {
        let norm = f64::from(self.max_quantised_norm);
        f64::from(self.max_residual)
            + norm * f64::from(q_residual)
            + rounding_slack(self.dims) * norm.max(1.0)
            + rounding_slack(self.dims)
    }

    /// Calls `visit(row, vector)` for each of `rows`, given in ascending order. A mapped
    /// index's rows are copied out of the file ([`MappedRows::read_rows`]), each run of
    /// consecutive rows in one read, so scattered rows do not map the whole file.
    pub(crate) fn visit_rows(
        &self,
        rows: &[usize],
        mut visit: impl FnMut(usize, &[f32]),
    ) -> Result<(), VectorError> {
        let dims = self.dims;
        let Storage::Mapped(mapped) = &self.storage else {
            for &row in rows {
                visit(row, self.row(row));
            }
            return Ok(());
        };
        if let Some(&row) = rows.iter().find(|&&row| row >= self.rows) {
            return Err(VectorError::NoSuchRow {
                row,
                rows: self.rows,
            });
        }
        let mut buf = Vec::new();
        let mut rest = rows;
        while let Some(&first) = rest.first() {
            // The run of consecutive rows starting here, at most READ_RUN_ROWS of them.
            let run = rest
                .iter()
                .take(READ_RUN_ROWS)
                .enumerate()
                .take_while(|&(i, &row)| row == first + i)
                .count();
            buf.resize(run * dims, 0.0);
            mapped.read_rows(first, &mut buf)?;
            for (i, vector) in buf.chunks_exact(dims.max(1)).enumerate() {
                visit(first + i, vector);
            }
            rest = &rest[run..];
        }
        Ok(())
    }

    /// Checks the int8 copy against the rows: a zero row, and only a zero row, has scale 0, and
    /// every row is within the stored bounds of `center + scale * q`.
    #[cfg(test)]
    pub(crate) fn check_int8_copy(&self) -> Result<(), String> {
        let center = self.center();
        let quant = self.quant();
        for (r, (row, &scale)) in self
            .data()
            .chunks_exact(self.dims)
            .zip(self.scales())
            .enumerate()
        {
            let q = &quant[r * self.dims..(r + 1) * self.dims];
            if (scale == 0.0) != row.iter().all(|&x| x == 0.0) {
                return Err(format!("row {r}: scale {scale}"));
            }
            if scale == 0.0 {
                continue;
            }
            let (mut residual, mut norm) = (0.0f64, 0.0f64);
            for (d, (&x, &q)) in row.iter().zip(q).enumerate() {
                let dequantised = f64::from(scale) * f64::from(q);
                let c = center.get(d).map_or(0.0, |&c| f64::from(c));
                residual += (f64::from(x) - c - dequantised).powi(2);
                norm += dequantised * dequantised;
            }
            if residual.sqrt() > f64::from(self.max_residual) * (1.0 + 1e-5) + 1e-7 {
                return Err(format!(
                    "row {r}: residual {} > {}",
                    residual.sqrt(),
                    self.max_residual
                ));
            }
            if norm.sqrt() > f64::from(self.max_quantised_norm) * (1.0 + 1e-5) + 1e-7 {
                return Err(format!(
                    "row {r}: norm {} > {}",
                    norm.sqrt(),
                    self.max_quantised_norm
                ));
            }
        }
        Ok(())
    }

    /// Whether the int8 copy is taken relative to a non-zero center.
    #[cfg(test)]
    pub(crate) fn is_centred(&self) -> bool {
        self.center().iter().any(|&c| c != 0.0)
    }

    /// (row, integer score scaled back to a cosine estimate) of every allowed non-zero row;
    /// `q_center` is the query's score against the center.
    fn integer_scores<'a>(
        &'a self,
        q8: &'a [i8],
        q_scale: f32,
        q_center: f32,
        allow: &'a impl Fn(usize) -> bool,
    ) -> impl Iterator<Item = (usize, f32)> + 'a {
        self.quant()
            .chunks_exact(self.dims)
            .zip(self.scales())
            .enumerate()
            // A zero row (scale 0) has no direction and must never match.
            .filter(move |&(row, (_, &scale))| scale != 0.0 && allow(row))
            // Exact in f32 up to 2^24 = 1040 dims × 127²; beyond, rounding_slack covers it.
            .map(move |(row, (v, &scale))| {
                (row, dot_i8(q8, v) as f32 * (scale * q_scale) + q_center)
            })
    }

    /// Writes the index to `path` atomically: a temporary file in the same directory is
    /// written, synced and renamed over `path`, so readers see the old file or the new one,
    /// never a partial one.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), VectorError> {
        self.save_rows(path.as_ref()).map(|_| ())
    }

    /// [`save`](Self::save), then the int8 copy to `quantised` (atomically too), bound to the
    /// rows' file by its checksum: what [`VectorIndex::open`] maps.
    ///
    /// The copy is taken relative to the rows' mean (see [`VectorIndex::center`]) when that
    /// tightens the error bound, as it does for a model's embeddings; otherwise (a hashing
    /// embedder's sparse rows, which quantise exactly where they are zero) relative to zero.
    pub fn save_with_quantised(&self, path: &Path, quantised: &Path) -> Result<(), VectorError> {
        let digest = self.save_rows(path)?;
        // A mapped copy already centred keeps its center.
        let centred = match self.center().is_empty() {
            true => centred_copy(
                self.dims,
                (self.max_residual, self.max_quantised_norm),
                |visit| {
                    self.data().chunks_exact(self.dims.max(1)).for_each(visit);
                    Ok(())
                },
            )?,
            false => None,
        };
        let copy = match &centred {
            Some(c) => Int8Copy::centred(c),
            None => Int8Copy {
                center: self.center(),
                scales: self.scales(),
                max_residual: self.max_residual,
                max_quantised_norm: self.max_quantised_norm,
            },
        };
        // Each row is quantised as it is written: the copy is never held a second time.
        let mut quant_row = |r: usize, out: &mut Vec<i8>| {
            match &centred {
                Some(c) => {
                    quantise_row(self.row(r), &c.center, out);
                }
                None => out.extend_from_slice(&self.quant()[r * self.dims..(r + 1) * self.dims]),
            }
            Ok(())
        };
        write_int8_copy(quantised, self.dims, &copy, &digest, &mut quant_row)
    }

    /// Writes the rows' file and returns its checksum.
    fn save_rows(&self, path: &Path) -> Result<[u8; 32], VectorError> {
        let dims = u32::try_from(self.dims).map_err(|_| VectorError::TooLarge {
            reason: format!("dims {} exceeds u32::MAX", self.dims),
        })?;
        let mut digest = [0u8; 32];
        write_atomically(path, |tmp| {
            digest = self.write_file(tmp, dims)?;
            Ok(())
        })?;
        Ok(digest)
    }

    fn write_file(&self, tmp: &Path, dims: u32) -> Result<[u8; 32], VectorError> {
        let io_err = |source| VectorError::Io {
            path: tmp.to_path_buf(),
            source,
        };
        let file =
            crate::access::private::open(tmp, OpenOptions::new().write(true).create_new(true))
                .map_err(io_err)?;
        let mut out = BufWriter::new(file);
        let mut hasher = Sha256::new();
        let mut write = |bytes: &[u8]| -> Result<(), VectorError> {
            hasher.update(bytes);
            out.write_all(bytes).map_err(io_err)
        };
        write(MAGIC)?;
        write(&dims.to_le_bytes())?;
        write(&(self.rows as u64).to_le_bytes())?;
        let data = self.data();
        let mut buf = Vec::with_capacity(IO_CHUNK_FLOATS.min(data.len()) * 4);
        for chunk in data.chunks(IO_CHUNK_FLOATS) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
            write(&buf)?;
        }
        let digest: [u8; 32] = hasher.finalize().into();
        out.write_all(&digest).map_err(io_err)?;
        let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        file.sync_all().map_err(io_err)?;
        Ok(digest)
    }

    /// Reads an index written by [`save`](Self::save), verifying magic, sizes and checksum.
    /// A truncated, padded or corrupt file is a typed error, never a panic.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, VectorError> {
        let path = path.as_ref();
        let io_err = |source| VectorError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let actual_len = file.metadata().map_err(io_err)?.len();
        let truncated = |expected: u64| VectorError::Truncated {
            path: path.to_path_buf(),
            expected,
            actual: actual_len,
        };
        let mut input = BufReader::new(file);
        let mut hasher = Sha256::new();

        let mut header = [0u8; HEADER_LEN as usize];
        read_exact(&mut input, &mut header, || truncated(HEADER_LEN), io_err)?;
        hasher.update(header);
        let (magic, rest) = header.split_at(8);
        if magic != MAGIC {
            return Err(VectorError::BadMagic {
                path: path.to_path_buf(),
            });
        }
        let (dims_bytes, rows_bytes) = rest.split_at(4);
        let mut dims_le = [0u8; 4];
        dims_le.copy_from_slice(dims_bytes);
        let mut rows_le = [0u8; 8];
        rows_le.copy_from_slice(rows_bytes);
        let dims = u32::from_le_bytes(dims_le);
        let rows = u64::from_le_bytes(rows_le);

        let corrupt = |reason: String| VectorError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let floats = u64::from(dims)
            .checked_mul(rows)
            .ok_or_else(|| corrupt(format!("{dims} dims × {rows} rows overflows")))?;
        let expected_len = floats
            .checked_mul(4)
            .and_then(|n| n.checked_add(HEADER_LEN + CHECKSUM_LEN))
            .ok_or_else(|| corrupt(format!("{dims} dims × {rows} rows overflows")))?;
        match actual_len.cmp(&expected_len) {
            Ordering::Less => return Err(truncated(expected_len)),
            Ordering::Greater => {
                return Err(VectorError::TrailingData {
                    path: path.to_path_buf(),
                    expected: expected_len,
                    actual: actual_len,
                });
            }
            Ordering::Equal => {}
        }
        let too_big = || corrupt(format!("{dims} dims × {rows} rows does not fit in memory"));
        let dims = usize::try_from(dims).map_err(|_| too_big())?;
        let rows = usize::try_from(rows).map_err(|_| too_big())?;
        let floats = usize::try_from(floats).map_err(|_| too_big())?;

        // Sizes now match the real file length, so this allocation is bounded by the file.
        let mut data = Vec::with_capacity(floats);
        let mut buf = vec![0u8; IO_CHUNK_FLOATS.min(floats) * 4];
        while data.len() < floats {
            let n = (floats - data.len()).min(IO_CHUNK_FLOATS) * 4;
            let bytes = &mut buf[..n];
            read_exact(&mut input, bytes, || truncated(expected_len), io_err)?;
            hasher.update(&*bytes);
            data.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        let mut stored = [0u8; CHECKSUM_LEN as usize];
        read_exact(&mut input, &mut stored, || truncated(expected_len), io_err)?;
        let computed = hasher.finalize();
        if computed.as_slice() != stored {
            return Err(VectorError::ChecksumMismatch {
                path: path.to_path_buf(),
                expected: hex::encode(stored),
                actual: hex::encode(computed),
            });
        }
        if let Some(position) = data.iter().position(|x| !x.is_finite()) {
            return Err(corrupt(format!("non-finite value at float {position}")));
        }
        Ok(Self::from_normalised(dims, rows, data))
    }

    /// [`load`](Self::load), then checks the file holds `dims`-long vectors, so an index built
    /// with another embedder configuration is rejected instead of silently mis-scored.
    pub fn load_with_dims(path: impl AsRef<Path>, dims: usize) -> Result<Self, VectorError> {
        let index = Self::load(path)?;
        if index.dims != dims {
            return Err(VectorError::DimensionMismatch {
                expected: dims,
                actual: index.dims,
            });
        }
        Ok(index)
    }
}

/// Writes `path` through `write` into a temporary file in the same directory, then renames it
/// over `path` (and syncs the directory, best effort): readers see the old file or the new
/// one, never a partial one. The temporary file is removed on failure.
pub(super) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), VectorError>,
) -> Result<(), VectorError> {
    let tmp = tmp_path_for(path)?;
    let result = write(&tmp).and_then(|()| rename_into_place(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A temporary file's name beside `path`, unique in this process and among processes.
pub(super) fn tmp_path_for(path: &Path) -> Result<PathBuf, VectorError> {
    let file_name = path.file_name().ok_or_else(|| VectorError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"),
    })?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    Ok(path.with_file_name(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, AtomicOrdering::Relaxed)
    )))
}

/// Renames the written and synced `tmp` over `path` (in the same directory), then syncs the
/// directory so the rename itself persists (best effort, as not every filesystem supports it).
pub(super) fn rename_into_place(tmp: &Path, path: &Path) -> Result<(), VectorError> {
    fs::rename(tmp, path).map_err(|source| VectorError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `read_exact` that reports end-of-file as the caller's truncation error.
fn read_exact(
    input: &mut impl Read,
    buf: &mut [u8],
    truncated: impl FnOnce() -> VectorError,
    io_err: impl FnOnce(io::Error) -> VectorError,
) -> Result<(), VectorError> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            truncated()
        } else {
            io_err(e)
        }
    })
}

/// Checks `v` and returns its L2-normalised copy, or `None` for the zero vector.
pub(super) fn normalize(v: &[f32], dims: usize) -> Result<Option<Vec<f32>>, VectorError> {
    if v.len() != dims {
        return Err(VectorError::DimensionMismatch {
            expected: dims,
            actual: v.len(),
        });
    }
    if let Some(position) = v.iter().position(|x| !x.is_finite()) {
        return Err(VectorError::NonFinite { position });
    }
    // f64 so that squares of large f32 values cannot overflow.
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 {
        return Ok(None);
    }
    Ok(Some(
        v.iter().map(|&x| (f64::from(x) / norm) as f32).collect(),
    ))
}

/// Dot product with 8 independent accumulators: breaking the serial dependency lets LLVM keep
/// them in SIMD registers (it may not reorder a single float sum itself; checked: the loop
/// compiles to packed `mulps`/`addps` on baseline x86-64). The fixed reduction order keeps
/// results identical run to run.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a_chunks, a_tail) = a[..n].as_chunks::<8>();
    let (b_chunks, b_tail) = b[..n].as_chunks::<8>();
    let mut acc = [0.0f32; 8];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((s, &p), &q) in acc.iter_mut().zip(x).zip(y) {
            *s += p * q;
        }
    }
    let mut tail = 0.0f32;
    for (&p, &q) in a_tail.iter().zip(b_tail) {
        tail += p * q;
    }
    // A plain left-to-right reduction: other shapes made LLVM shuffle lanes inside the loop.
    acc.iter().sum::<f32>() + tail
}

/// Largest f32 matrix (bytes) scanned with a sparse query instead of the int8 pass: measured on
/// the hashing embedder's queries (BENCHMARKS.md), the sparse scan was faster at 3,000 and
/// 10,000 rows of 384 dimensions (6 and 15 MiB) and slower at 30,000 (46 MiB, past the 32 MiB
/// L3 cache of the machine).
const SPARSE_SCAN_MAX_BYTES: usize = 16 << 20;

/// The non-zero components of a query that has few of them, for [`SparseQuery::dot`].
struct SparseQuery {
    /// (dimension, value), dimensions ascending.
    components: Vec<(usize, f32)>,
    /// Dimensions below this are summed in [`dot`]'s eight lanes, the rest in its tail.
    lanes_end: usize,
}

impl SparseQuery {
    /// At most one component in four non-zero: below that the dense loop's SIMD wins.
    fn of(query: &[f32]) -> Option<Self> {
        let components: Vec<(usize, f32)> = query
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, x)| x != 0.0)
            .collect();
        (components.len() * 4 <= query.len()).then(|| Self {
            components,
            lanes_end: query.len() / 8 * 8,
        })
    }

    /// Bit for bit [`dot`]`(query, row)`: each product lands in the accumulator `dot` gives its
    /// dimension, in the same order, and the products skipped are zeros, which leave a float sum
    /// unchanged. So results and ties are those of the dense scan.
    #[inline]
    fn dot(&self, row: &[f32]) -> f32 {
        let mut acc = [0.0f32; 8];
        let mut tail = 0.0f32;
        for &(d, q) in &self.components {
            let Some(&x) = row.get(d) else {
                continue;
            };
            if d < self.lanes_end {
                acc[d % 8] += q * x;
            } else {
                tail += q * x;
            }
        }
        acc.iter().sum::<f32>() + tail
    }
}

/// How [`VectorIndex::search_with_stats`] reached its answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Rows scored with f32 dot products.
    pub rescored: usize,
    /// The error bound could not prove the shortlist complete, so a second integer pass ran.
    pub second_pass: bool,
}

/// Most consecutive rows [`VectorIndex::visit_rows`] reads at once (96 kB of 384-dim rows).
const READ_RUN_ROWS: usize = 64;

/// Shortlist rows re-scored between two checks of whether the rest can still enter the top k.
const RESCORE_STEP: usize = 8;

/// Rows the second pass collects before re-scoring them.
const RESCORE_BATCH: usize = 1024;

/// Rows kept by the integer pass for exact re-scoring: 4k leaves room for the quantisation
/// noise around the cut-off; +32 keeps small k from having almost no margin.
pub fn shortlist_len(k: usize) -> usize {
    k.saturating_mul(4).max(k.saturating_add(32))
}

/// Headroom for f32 rounding in the exact and the integer-derived scores (each a sum of `dims`
/// products of unit vectors: error ≤ dims·ε), generous so the proof never relies on luck.
fn rounding_slack(dims: usize) -> f64 {
    4.0 * dims as f64 * f64::from(f32::EPSILON) + 1e-6
}

/// The int8 copy relative to the mean of the non-zero rows, when that gives a tighter bound
/// than `uncentred` (the copy relative to zero: its largest residual and dequantised norm),
/// measured as `residual · (1 + norm)` (the bound of a query quantised as coarsely as the
/// worst row). `each_row` visits every row in order, each time it is called (twice).
pub(super) fn centred_copy(
    dims: usize,
    uncentred: (f32, f32),
    mut each_row: impl FnMut(&mut dyn FnMut(&[f32])) -> Result<(), VectorError>,
) -> Result<Option<CentredCopy>, VectorError> {
    if dims == 0 {
        return Ok(None);
    }
    let mut sum = vec![0.0f64; dims];
    let mut counted = 0usize;
    each_row(&mut |row| {
        // Only a zero row has no scale (see `quantise_into`); it takes no part in the mean.
        if row.iter().any(|&x| x != 0.0) {
            counted += 1;
            for (s, &x) in sum.iter_mut().zip(row) {
                *s += f64::from(x);
            }
        }
    })?;
    if counted == 0 {
        return Ok(None);
    }
    let center: Vec<f32> = sum.iter().map(|&s| (s / counted as f64) as f32).collect();
    let mut scales = Vec::new();
    let (mut max_residual, mut max_quantised_norm) = (0.0f32, 0.0f32);
    let mut scratch = Vec::with_capacity(dims);
    each_row(&mut |row| {
        scratch.clear();
        let q = quantise_row(row, &center, &mut scratch);
        scales.push(q.scale);
        max_residual = max_residual.max(q.residual);
        max_quantised_norm = max_quantised_norm.max(q.norm);
    })?;
    let worst = |residual: f32, norm: f32| f64::from(residual) * (1.0 + f64::from(norm));
    Ok(
        (worst(max_residual, max_quantised_norm) < worst(uncentred.0, uncentred.1)).then_some(
            CentredCopy {
                center,
                scales,
                max_residual,
                max_quantised_norm,
            },
        ),
    )
}

/// What the int8 copy's file holds besides its rows.
pub(super) struct Int8Copy<'a> {
    /// Empty: relative to zero.
    pub center: &'a [f32],
    pub scales: &'a [f32],
    pub max_residual: f32,
    pub max_quantised_norm: f32,
}

impl<'a> Int8Copy<'a> {
    pub fn centred(c: &'a CentredCopy) -> Self {
        Self {
            center: &c.center,
            scales: &c.scales,
            max_residual: c.max_residual,
            max_quantised_norm: c.max_quantised_norm,
        }
    }
}

/// Writes the int8 copy to `quantised` atomically, bound to the rows' file by its checksum
/// `rows_digest`; `quant_row` appends row `r`'s int8 values, rows asked for in order.
pub(super) fn write_int8_copy(
    quantised: &Path,
    dims: usize,
    copy: &Int8Copy<'_>,
    rows_digest: &[u8; 32],
    quant_row: &mut super::mapped_vectors::QuantRow<'_>,
) -> Result<(), VectorError> {
    // The file always has a center; none is the zero vector.
    let zero_center = vec![0.0; if copy.center.is_empty() { dims } else { 0 }];
    write_atomically(quantised, |tmp| {
        super::mapped_vectors::write_quantised(
            tmp,
            &mut super::mapped_vectors::Quantised {
                dims,
                center: if copy.center.is_empty() {
                    &zero_center
                } else {
                    copy.center
                },
                scales: copy.scales,
                quant_row,
                max_residual: copy.max_residual,
                max_quantised_norm: copy.max_quantised_norm,
                rows_digest,
            },
        )
    })
}

/// The int8 copy relative to the rows' mean, as [`centred_copy`] finds it.
pub(super) struct CentredCopy {
    center: Vec<f32>,
    scales: Vec<f32>,
    max_residual: f32,
    max_quantised_norm: f32,
}

/// One vector's int8 quantisation: `v ≈ scale * q`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quantised {
    /// 0 exactly for the zero vector (and only for it).
    pub scale: f32,
    /// ‖v − scale·q‖, rounded up.
    pub residual: f32,
    /// ‖scale·q‖, rounded up.
    pub norm: f32,
}

/// Appends `v` quantised to int8 with one symmetric scale (`max |x|` maps to 127). The norms
/// are computed in f64 and rounded up (relative 1e-6, far above f32 rounding), so bounds built
/// from them stay bounds.
fn quantise_into(v: &[f32], out: &mut Vec<i8>) -> Quantised {
    let max = v.iter().fold(0.0f32, |m, &x| m.max(x.abs()));
    if max == 0.0 {
        out.extend(std::iter::repeat_n(0i8, v.len()));
        return Quantised {
            scale: 0.0,
            residual: 0.0,
            norm: 0.0,
        };
    }
    // Never 0 for a non-zero vector, even a subnormal one: scale 0 marks zero rows.
    let scale = (max / 127.0).max(f32::MIN_POSITIVE);
    let (mut residual, mut norm) = (0.0f64, 0.0f64);
    out.extend(v.iter().map(|&x| {
        // |x / scale| ≤ 127 up to rounding; the clamp keeps a rounded-up 127.0001 in range.
        let q = (x / scale).round().clamp(-127.0, 127.0) as i8;
        let dequantised = f64::from(scale) * f64::from(q);
        let e = f64::from(x) - dequantised;
        residual += e * e;
        norm += dequantised * dequantised;
        q
    }));
    let up = |x: f64| (x.sqrt() * (1.0 + 1e-6)) as f32;
    Quantised {
        scale,
        residual: up(residual),
        norm: up(norm),
    }
}

/// Appends row `v`'s int8 copy relative to `center` (empty: none) to `out`: the quantisation of
/// `v − center`, except that a zero row stays the zero copy with scale 0 (it never matches) and
/// a row equal to the center gets the smallest scale (it is still a row).
pub(super) fn quantise_row(v: &[f32], center: &[f32], out: &mut Vec<i8>) -> Quantised {
    if center.is_empty() || v.iter().all(|&x| x == 0.0) {
        return quantise_into(v, out);
    }
    let offset: Vec<f32> = v.iter().zip(center).map(|(&x, &c)| x - c).collect();
    let q = quantise_into(&offset, out);
    Quantised {
        scale: if q.scale == 0.0 {
            f32::MIN_POSITIVE
        } else {
            q.scale
        },
        ..q
    }
}

/// Integer dot product of two int8 vectors. Each product is formed in i16 (|q| ≤ 127, so it
/// fits) and widened into 32 independent i32 lanes: on baseline x86-64 LLVM turns this into
/// packed multiplies and adds (measured 2.8 ms for 100k × 384, against 3.4 ms for i32
/// products and 13.6 ms for a pairwise-add shape). Exact: no rounding, any order.
#[inline]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    let (a_chunks, a_tail) = a[..n].as_chunks::<32>();
    let (b_chunks, b_tail) = b[..n].as_chunks::<32>();
    let mut acc = [0i32; 32];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((s, &p), &q) in acc.iter_mut().zip(x).zip(y) {
            *s += i32::from(i16::from(p) * i16::from(q));
        }
    }
    let tail: i32 = a_tail
        .iter()
        .zip(b_tail)
        .map(|(&p, &q)| i32::from(p) * i32::from(q))
        .sum();
    acc.iter().sum::<i32>() + tail
}

/// What the shortlist step leaves for the completeness proof.
struct Shortlist {
    /// The quantised query and its scale (for a second integer pass).
    q8: Vec<i8>,
    q_scale: f32,
    /// The query's f32 score against the center the int8 rows are relative to (0 for none).
    q_center: f32,
    /// The shortlist held as many rows as it may (rows were left out).
    full: bool,
    /// The re-scoring stopped early: no row left could enter the top k.
    proven: bool,
    /// How far an integer score can be from the exact one ([`VectorIndex::error_bound`]).
    bound: f64,
    /// The lowest integer score kept in the shortlist.
    weakest_kept: Option<f32>,
    /// Rows re-scored with f32 dot products.
    rescored: usize,
    /// The top `k` of the shortlist by exact score.
    exact: TopK,
}

/// The best `k` candidates seen, in a max-heap whose top is the worst kept.
struct TopK {
    k: usize,
    heap: BinaryHeap<Candidate>,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            // Bounded by k, never by the row count: memory per query stays O(k).
            heap: BinaryHeap::with_capacity(k.min(4096)),
        }
    }

    #[inline]
    fn offer(&mut self, candidate: Candidate) {
        if self.heap.len() < self.k {
            self.heap.push(candidate);
        } else if let Some(mut worst) = self.heap.peek_mut()
            && candidate < *worst
        {
            *worst = candidate;
        }
    }

    fn is_full(&self) -> bool {
        self.heap.len() >= self.k
    }

    fn worst_score(&self) -> Option<f32> {
        self.heap.peek().map(|c| c.score)
    }

    fn into_hits(self) -> Vec<(usize, f32)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|c| (c.row, c.score))
            .collect()
    }
}

/// Heap entry ordered so that "less" means "better" (higher score, then lower row): the
/// max-heap's top is then the worst kept hit, and `into_sorted_vec` is best-first.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    score: f32,
    row: usize,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.row.cmp(&other.row))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Candidate {
    /// The candidate as one integer that sorts exactly like [`Ord`] for rows below 2³²: the
    /// score's bits mapped so that unsigned order is descending `total_cmp` order, then the row.
    fn sort_key(self) -> u64 {
        let bits = self.score.to_bits();
        // total_cmp's order as unsigned integers: negative scores flipped, positive offset.
        let ascending = if bits >> 31 == 1 {
            !bits
        } else {
            bits | 0x8000_0000
        };
        (u64::from(!ascending) << 32) | (self.row as u64 & 0xFFFF_FFFF)
    }

    fn from_sort_key(key: u64) -> Self {
        let ascending = !((key >> 32) as u32);
        let bits = if ascending >> 31 == 1 {
            ascending & 0x7FFF_FFFF
        } else {
            !ascending
        };
        Self {
            score: f32::from_bits(bits),
            row: (key & 0xFFFF_FFFF) as usize,
        }
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeded::SplitMix64 as Rng;
    use proptest::prelude::*;

    /// Reference: score every allowed non-zero row, full sort, truncate.
    fn brute_force(
        index: &VectorIndex,
        query: &[f32],
        k: usize,
        allow: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let Some(q) = normalize(query, index.dims()).unwrap() else {
            return Vec::new();
        };
        let mut all: Vec<(usize, f32)> = (0..index.len())
            .filter(|&i| allow(i) && index.row(i).iter().any(|&x| x != 0.0))
            .map(|i| (i, dot(&q, index.row(i))))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// An index of up to `max_rows` rows and a query, `dims` from 1 below `max_dims`, components
    /// small integers in `-c..=c`: equal rows (hence exact ties) and zero rows are common.
    fn random_index_and_query(
        max_dims: usize,
        c: i8,
        max_rows: usize,
    ) -> impl Strategy<Value = (VectorIndex, Vec<f32>)> {
        (1usize..max_dims).prop_flat_map(move |dims| {
            let vector = prop::collection::vec(-c..=c, dims)
                .prop_map(|v| v.into_iter().map(f32::from).collect::<Vec<f32>>());
            (prop::collection::vec(vector.clone(), 0..max_rows), vector).prop_map(
                move |(rows, query)| {
                    let mut index = VectorIndex::new(dims);
                    for r in &rows {
                        index.push(r).unwrap();
                    }
                    (index, query)
                },
            )
        })
    }

    fn index_and_query() -> impl Strategy<Value = (VectorIndex, Vec<f32>)> {
        random_index_and_query(12, 2, 60)
    }

    /// A row and a query of equal length with real-valued components, most of the query zero.
    fn row_and_sparse_query() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
        (1usize..80).prop_flat_map(|dims| {
            let component = prop_oneof![6 => Just(0.0f32), 1 => -10.0f32..10.0];
            (
                prop::collection::vec(-10.0f32..10.0, dims),
                prop::collection::vec(component, dims),
            )
        })
    }

    proptest! {
        #[test]
        fn sparse_dot_is_dot_bit_for_bit((row, query) in row_and_sparse_query()) {
            if let Some(sparse) = SparseQuery::of(&query) {
                prop_assert_eq!(sparse.dot(&row).to_bits(), dot(&query, &row).to_bits());
            }
        }

        #[test]
        fn sparse_queries_search_like_the_exact_scan(
            rows in prop::collection::vec(prop::collection::vec(-10.0f32..10.0, 40), 0..60),
            (_, query) in (40usize..41).prop_flat_map(|dims| {
                let component = prop_oneof![6 => Just(0.0f32), 1 => -10.0f32..10.0];
                (Just(dims), prop::collection::vec(component, dims))
            }),
            k in 20usize..70,
        ) {
            let mut index = VectorIndex::new(40);
            for r in &rows {
                index.push(r).unwrap();
            }
            // k ≥ 20 means shortlist ≥ 60 ≥ rows: the path that scores sparse queries sparsely.
            let got = index.search(&query, k, |_| true).unwrap();
            let exact = index.search_exact(&query, k, |_| true).unwrap();
            let bits = |hits: &[(usize, f32)]| -> Vec<(usize, u32)> {
                hits.iter().map(|&(r, s)| (r, s.to_bits())).collect()
            };
            prop_assert_eq!(bits(&got), bits(&exact));
        }

        #[test]
        fn sort_keys_order_like_candidates(
            a in any::<f32>(), b in any::<f32>(), ra in 0usize..1000, rb in 0usize..1000,
        ) {
            let (x, y) = (Candidate { score: a, row: ra }, Candidate { score: b, row: rb });
            prop_assert_eq!(x.sort_key().cmp(&y.sort_key()), x.cmp(&y));
            let back = Candidate::from_sort_key(x.sort_key());
            prop_assert_eq!((back.score.to_bits(), back.row), (a.to_bits(), ra));
        }

        #[test]
        fn top_k_equals_brute_force((index, query) in index_and_query(), k in 0usize..70) {
            let got = index.search(&query, k, |_| true).unwrap();
            prop_assert_eq!(got, brute_force(&index, &query, k, |_| true));
        }

        #[test]
        fn filter_respected(
            (index, query) in index_and_query(),
            k in 0usize..70,
            mask in prop::collection::vec(any::<bool>(), 60),
        ) {
            let allow = |i: usize| mask[i];
            let got = index.search(&query, k, allow).unwrap();
            prop_assert!(got.iter().all(|&(i, _)| mask[i]));
            let matchable = (0..index.len())
                .filter(|&i| mask[i] && index.row(i).iter().any(|&x| x != 0.0))
                .count();
            let query_nonzero = query.iter().any(|&x| x != 0.0);
            let expected_len = if query_nonzero { k.min(matchable) } else { 0 };
            prop_assert_eq!(got.len(), expected_len);
            prop_assert_eq!(got, brute_force(&index, &query, k, allow));
        }

        #[test]
        fn any_corrupted_byte_is_an_error(
            (index, _q) in index_and_query(),
            pos in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("v.bin");
            index.save(&path).unwrap();
            let mut bytes = fs::read(&path).unwrap();
            let i = pos.index(bytes.len());
            bytes[i] ^= flip;
            fs::write(&path, &bytes).unwrap();
            prop_assert!(VectorIndex::load(&path).is_err());
        }

        #[test]
        fn any_truncation_is_an_error(
            (index, _q) in index_and_query(),
            cut in any::<prop::sample::Index>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("v.bin");
            index.save(&path).unwrap();
            let bytes = fs::read(&path).unwrap();
            let keep = cut.index(bytes.len()); // strictly shorter than the file
            fs::write(&path, &bytes[..keep]).unwrap();
            let is_truncated = matches!(
                VectorIndex::load(&path),
                Err(VectorError::Truncated { .. })
            );
            prop_assert!(is_truncated);
        }
    }

    /// Many rows of few dims with small integer components: the int8 path runs (more rows than
    /// the shortlist), exact ties abound, and the second pass is often needed.
    fn large_index_and_query() -> impl Strategy<Value = (VectorIndex, Vec<f32>)> {
        random_index_and_query(10, 3, 400)
    }

    proptest! {
        #[test]
        fn quantised_search_equals_brute_force_on_large_indexes(
            (index, query) in large_index_and_query(),
            k in 1usize..40,
            mask in prop::collection::vec(any::<bool>(), 400),
        ) {
            let got = index.search(&query, k, |_| true).unwrap();
            prop_assert_eq!(got, brute_force(&index, &query, k, |_| true));
            let allow = |i: usize| mask[i];
            let got = index.search(&query, k, allow).unwrap();
            prop_assert!(got.iter().all(|&(i, _)| mask[i]));
            prop_assert_eq!(got, brute_force(&index, &query, k, allow));
        }
    }

    /// Rows of few dims sharing a direction (a base plus small integer offsets), as a model's
    /// embeddings do: a store's int8 copy of them is centred.
    fn shared_direction_index_and_query() -> impl Strategy<Value = (VectorIndex, Vec<f32>)> {
        (2usize..10).prop_flat_map(|dims| {
            let offset = prop::collection::vec(-2i8..=2, dims)
                .prop_map(|v| v.into_iter().map(f32::from).collect::<Vec<f32>>());
            (
                prop::collection::vec(1i8..=8, dims),
                prop::collection::vec(offset.clone(), 0..400),
                offset,
            )
                .prop_map(move |(base, rows, query)| {
                    let base: Vec<f32> = base.into_iter().map(|b| 4.0 * f32::from(b)).collect();
                    let mut index = VectorIndex::new(dims);
                    for r in &rows {
                        let v: Vec<f32> = base.iter().zip(r).map(|(b, o)| b + o).collect();
                        index.push(&v).unwrap();
                    }
                    let query = base.iter().zip(&query).map(|(b, o)| b + 3.0 * o).collect();
                    (index, query)
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_centred_copy_searches_like_brute_force(
            (index, query) in shared_direction_index_and_query(),
            k in 1usize..40,
            mask in prop::collection::vec(any::<bool>(), 400),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (rows, q8) = (dir.path().join("v.bin"), dir.path().join("v.q8"));
            index.save_with_quantised(&rows, &q8).unwrap();
            let mapped = VectorIndex::open(&rows, &q8, index.dims()).unwrap();
            prop_assert!(mapped.check_int8_copy().is_ok());
            let got = mapped.search(&query, k, |_| true).unwrap();
            prop_assert_eq!(got, brute_force(&index, &query, k, |_| true));
            let allow = |i: usize| mask[i];
            prop_assert_eq!(
                mapped.search(&query, k, allow).unwrap(),
                brute_force(&index, &query, k, allow)
            );
        }
    }

    #[test]
    fn a_centred_copy_tightens_the_bound_on_rows_sharing_a_direction() {
        let (dims, rows) = (384, 4000);
        let mut rng = Rng(13);
        let base = rng.vector(dims);
        let mut index = VectorIndex::with_capacity(dims, rows);
        for _ in 0..rows {
            let v: Vec<f32> = (rng.vector(dims).iter().zip(&base))
                .map(|(x, b)| 3.0 * b + x)
                .collect();
            index.push(&v).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let (path, q8) = (dir.path().join("v.bin"), dir.path().join("v.q8"));
        index.save_with_quantised(&path, &q8).unwrap();
        let mapped = VectorIndex::open(&path, &q8, dims).unwrap();
        assert!(mapped.is_centred());
        assert!(
            mapped.max_residual * 2.0 < index.max_residual,
            "{} against {}",
            mapped.max_residual,
            index.max_residual
        );
        let (mut rescored_plain, mut rescored_centred) = (0, 0);
        for _ in 0..10 {
            let q: Vec<f32> = (rng.vector(dims).iter().zip(&base))
                .map(|(x, b)| 3.0 * b + x)
                .collect();
            let exact = index.search_exact(&q, 100, |_| true).unwrap();
            let (plain, plain_stats) = index.search_with_stats(&q, 100, |_| true).unwrap();
            let (centred, centred_stats) = mapped.search_with_stats(&q, 100, |_| true).unwrap();
            assert_eq!(plain, exact);
            assert_eq!(centred, exact);
            rescored_plain += plain_stats.rescored;
            rescored_centred += centred_stats.rescored;
        }
        assert!(
            rescored_centred < rescored_plain,
            "{rescored_centred} rows re-scored against {rescored_plain}"
        );
    }

    #[test]
    fn quantised_search_is_exact_on_random_embeddings() {
        let (dims, rows) = (384, 4000);
        let mut rng = Rng(7);
        let mut index = VectorIndex::with_capacity(dims, rows);
        for _ in 0..rows {
            index.push(&rng.vector(dims)).unwrap();
        }
        assert_eq!(index.quantised_bytes(), rows * dims + rows * 4);
        let (mut found, mut wanted, mut proven) = (0, 0, 0);
        let mut rescored_k100 = 0;
        for _ in 0..30 {
            let q = rng.vector(dims);
            let unit = normalize(&q, dims).unwrap().unwrap();
            for k in [1, 10, 100] {
                let exact = index.search_exact(&q, k, |_| true).unwrap();
                let (got, stats) = index.search_with_stats(&q, k, |_| true).unwrap();
                assert_eq!(got, exact, "k = {k}");
                assert!(stats.rescored < rows / 4, "{stats:?}");
                proven += usize::from(!stats.second_pass);
                if k == 100 {
                    rescored_k100 += stats.rescored;
                }
                // The scores are the f32 ones, bit for bit, not dequantised approximations.
                for &(row, score) in &got {
                    assert_eq!(score.to_bits(), dot(&unit, index.row(row)).to_bits());
                }
                let filtered = index.search(&q, k, |r| r % 3 != 0).unwrap();
                assert!(filtered.iter().all(|&(r, _)| r % 3 != 0));
                assert_eq!(filtered, index.search_exact(&q, k, |r| r % 3 != 0).unwrap());
                let shortlist = index.search_shortlist_only(&q, k, |_| true).unwrap();
                found += exact.iter().filter(|h| shortlist.contains(h)).count();
                wanted += exact.len();
            }
        }
        // The shortlist alone already holds the true top k here (recall 1.0 measured with this
        // seed; 0.99 leaves room), and the bound proves it for most queries.
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.99, "shortlist recall {recall}");
        assert!(proven >= 80, "proven {proven} of 90");
        // Re-scoring stops once the rows left cannot reach the k-th exact score: well short of
        // the shortlist's 400 rows on these scattered scores.
        assert!(
            rescored_k100 / 30 < 300,
            "{} rows re-scored",
            rescored_k100 / 30
        );
    }

    #[test]
    fn second_pass_recovers_what_the_shortlist_misses() {
        // Rows that differ from a common direction by less than one int8 step: integer scores
        // cannot rank them, so the shortlist misses true top-k rows and the proof must fail.
        let (dims, rows) = (64, 2000);
        let mut rng = Rng(11);
        let base = rng.vector(dims);
        let mut index = VectorIndex::with_capacity(dims, rows);
        for _ in 0..rows {
            let v: Vec<f32> = base.iter().map(|&b| b + 1e-4 * rng.next_f32()).collect();
            index.push(&v).unwrap();
        }
        let mut shortlist_missed = 0;
        for _ in 0..10 {
            let q: Vec<f32> = base.iter().map(|&b| b + 0.01 * rng.next_f32()).collect();
            let exact = index.search_exact(&q, 10, |_| true).unwrap();
            let (got, stats) = index.search_with_stats(&q, 10, |_| true).unwrap();
            assert_eq!(got, exact);
            assert!(stats.second_pass, "{stats:?}");
            shortlist_missed +=
                usize::from(index.search_shortlist_only(&q, 10, |_| true).unwrap() != exact);
        }
        assert!(
            shortlist_missed > 0,
            "the test data must defeat the shortlist"
        );
    }

    #[test]
    fn empty_and_one_row_indexes() {
        let empty = VectorIndex::new(384);
        assert!(empty.search(&[1.0; 384], 10, |_| true).unwrap().is_empty());
        assert_eq!(empty.quantised_bytes(), 0);
        let mut one = VectorIndex::new(3);
        one.push(&[0.0, 3.0, 4.0]).unwrap();
        let hits = one.search(&[0.0, 0.0, 1.0], 5, |_| true).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 0);
        assert!((hits[0].1 - 0.8).abs() < 1e-6);
        assert!(
            one.search(&[0.0, 0.0, 1.0], 5, |_| false)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn quantisation_round_trips_within_its_bound() {
        let mut out = Vec::new();
        let v = [0.5f32, -0.25, 0.1, 0.0, -0.5];
        let q = quantise_into(&v, &mut out);
        assert_eq!(out[0], 127);
        assert_eq!(out[4], -127);
        assert_eq!(out[3], 0);
        let residual: f64 = v
            .iter()
            .zip(&out)
            .map(|(&x, &q8)| (f64::from(x) - f64::from(q.scale) * f64::from(q8)).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(f64::from(q.residual) >= residual);
        assert!(f64::from(q.residual) <= f64::from(q.scale));
        // A zero vector, and only a zero vector, gets scale 0 (it marks rows never matched).
        assert_eq!(quantise_into(&[0.0; 4], &mut out).scale, 0.0);
        assert!(quantise_into(&[f32::from_bits(1), 0.0], &mut out).scale > 0.0);
        let a: Vec<i8> = (0..70).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..70).map(|i| (i * 91 % 255 - 127) as i8).collect();
        let naive: i32 = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        assert_eq!(dot_i8(&a, &b), naive);
    }

    #[test]
    fn loaded_index_is_quantised_like_the_built_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let mut rng = Rng(3);
        let mut index = VectorIndex::new(16);
        for _ in 0..300 {
            index.push(&rng.vector(16)).unwrap();
        }
        index.push(&[0.0; 16]).unwrap();
        index.save(&path).unwrap();
        let loaded = VectorIndex::load(&path).unwrap();
        assert_eq!(loaded, index);
        assert_eq!(loaded.quant(), index.quant());
        assert_eq!(loaded.scales(), index.scales());
        assert_eq!(
            (loaded.max_residual, loaded.max_quantised_norm),
            (index.max_residual, index.max_quantised_norm)
        );
        let q = rng.vector(16);
        assert_eq!(
            loaded.search(&q, 5, |_| true).unwrap(),
            index.search_exact(&q, 5, |_| true).unwrap()
        );
    }

    fn sample_index() -> VectorIndex {
        let mut index = VectorIndex::with_capacity(4, 8);
        for v in [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 3.0, 0.0, 0.0],
            [2.0, 2.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, -1.0, 0.5],
        ] {
            index.push(&v).unwrap();
        }
        index
    }

    #[test]
    fn rows_are_normalised_and_zero_rows_kept() {
        let index = sample_index();
        assert_eq!(index.len(), 6);
        assert_eq!(index.dims(), 4);
        assert_eq!(index.row(1), &[0.0, 1.0, 0.0, 0.0]);
        let r2 = index.row(2);
        assert!((r2[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-7);
        assert_eq!(index.row(3), &[0.0; 4]);
        assert!(index.get(6).is_none());
        assert!(VectorIndex::new(4).is_empty());
    }

    #[test]
    fn ties_are_broken_by_row() {
        let index = sample_index();
        let hits = index.search(&[5.0, 0.0, 0.0, 0.0], 3, |_| true).unwrap();
        let rows: Vec<usize> = hits.iter().map(|h| h.0).collect();
        assert_eq!(rows, [0, 4, 2]);
        assert_eq!(hits[0].1, hits[1].1);
        // Same when the tie straddles the cut-off.
        let hits = index.search(&[5.0, 0.0, 0.0, 0.0], 1, |_| true).unwrap();
        assert_eq!(hits, [(0, 1.0)]);
        let hits = index.search(&[5.0, 0.0, 0.0, 0.0], 1, |r| r != 0).unwrap();
        assert_eq!(hits, [(4, 1.0)]);
    }

    #[test]
    fn zero_rows_and_zero_queries_never_match() {
        let index = sample_index();
        let all = index.search(&[0.0, 0.0, 0.0, 1.0], 100, |_| true).unwrap();
        assert_eq!(all.len(), 5); // every row but the zero row 3, negative scores included
        assert!(all.iter().all(|h| h.0 != 3));
        assert!(index.search(&[0.0; 4], 10, |_| true).unwrap().is_empty());
    }

    #[test]
    fn wrong_dims_and_non_finite_are_errors() {
        let mut index = sample_index();
        assert!(matches!(
            index.push(&[1.0, 2.0]),
            Err(VectorError::DimensionMismatch {
                expected: 4,
                actual: 2
            })
        ));
        assert!(matches!(
            index.search(&[1.0; 5], 3, |_| true),
            Err(VectorError::DimensionMismatch {
                expected: 4,
                actual: 5
            })
        ));
        assert!(matches!(
            index.push(&[1.0, f32::NAN, 0.0, 0.0]),
            Err(VectorError::NonFinite { position: 1 })
        ));
        assert!(matches!(
            index.search(&[f32::INFINITY, 0.0, 0.0, 0.0], 3, |_| true),
            Err(VectorError::NonFinite { position: 0 })
        ));
        assert_eq!(index.len(), 6, "failed pushes add nothing");
    }

    #[test]
    fn save_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let index = sample_index();
        let path = dir.path().join("chunks.vec");
        index.save(&path).unwrap();
        let expected_len = HEADER_LEN + 4 * 4 * 6 + CHECKSUM_LEN;
        assert_eq!(fs::metadata(&path).unwrap().len(), expected_len);
        let loaded = VectorIndex::load(&path).unwrap();
        assert_eq!(loaded, index);
        assert_eq!(
            loaded.search(&[1.0, 1.0, 0.0, 0.0], 3, |_| true).unwrap(),
            index.search(&[1.0, 1.0, 0.0, 0.0], 3, |_| true).unwrap()
        );
        // Overwrite in place; no temporary files are left behind.
        let empty = VectorIndex::new(7);
        empty.save(&path).unwrap();
        assert_eq!(VectorIndex::load(&path).unwrap(), empty);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn header_layout_is_little_endian() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        sample_index().save(&path).unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"RTVEC001");
        assert_eq!(&bytes[8..12], &[4, 0, 0, 0]);
        assert_eq!(&bytes[12..20], &[6, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[20..24], &1.0f32.to_le_bytes());
        let body = &bytes[..bytes.len() - 32];
        assert_eq!(&bytes[bytes.len() - 32..], Sha256::digest(body).as_slice());
    }

    #[test]
    fn corrupted_data_byte_is_checksum_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        sample_index().save(&path).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        bytes[30] ^= 0x01;
        fs::write(&path, &bytes).unwrap();
        let err = VectorIndex::load(&path).unwrap_err();
        assert!(matches!(err, VectorError::ChecksumMismatch { .. }), "{err}");
    }

    #[test]
    fn bad_magic_truncation_and_padding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        sample_index().save(&path).unwrap();
        let good = fs::read(&path).unwrap();

        let mut bad = good.clone();
        bad[0] = b'X';
        fs::write(&path, &bad).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::BadMagic { .. })
        ));

        fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::Truncated { expected, actual, .. })
                if expected == good.len() as u64 && actual == expected - 1
        ));

        fs::write(&path, &good[..5]).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::Truncated { .. })
        ));

        let mut padded = good.clone();
        padded.push(0);
        fs::write(&path, &padded).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::TrailingData { .. })
        ));

        // A header claiming absurd sizes is rejected before any large allocation.
        let mut huge = good.clone();
        huge[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        fs::write(&path, &huge).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::Corrupt { .. })
        ));
        huge[12..20].copy_from_slice(&(1u64 << 40).to_le_bytes());
        fs::write(&path, &huge).unwrap();
        assert!(matches!(
            VectorIndex::load(&path),
            Err(VectorError::Truncated { .. })
        ));

        assert!(matches!(
            VectorIndex::load(dir.path().join("missing")),
            Err(VectorError::Io { .. })
        ));
    }

    #[test]
    fn load_with_wrong_dims_is_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        sample_index().save(&path).unwrap();
        assert!(VectorIndex::load_with_dims(&path, 4).is_ok());
        assert!(matches!(
            VectorIndex::load_with_dims(&path, 384),
            Err(VectorError::DimensionMismatch {
                expected: 384,
                actual: 4
            })
        ));
    }

    #[test]
    fn save_to_missing_directory_is_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = sample_index()
            .save(dir.path().join("no/such/dir/v"))
            .unwrap_err();
        assert!(matches!(err, VectorError::Io { .. }), "{err}");
    }

    #[test]
    fn dot_matches_naive_sum_closely() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        assert!((f64::from(dot(&a, &b)) - naive).abs() < 1e-5);
        assert_eq!(dot(&[], &[]), 0.0);
    }

    #[test]
    fn zero_dims_index_is_harmless() {
        let mut index = VectorIndex::new(0);
        assert_eq!(index.push(&[]).unwrap(), 0);
        assert_eq!(index.len(), 1);
        assert_eq!(index.row(0), &[] as &[f32]);
        assert!(index.search(&[], 5, |_| true).unwrap().is_empty());
    }
}
