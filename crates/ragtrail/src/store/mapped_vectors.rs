//! A generation's vectors read in place: its `vectors.bin` (the f32 rows, see
//! [`super::vectors`]) and `vectors.q8` (their int8 copy, written beside it at ingest) are
//! mapped, not read, so opening a store of 100k chunks costs two `mmap`s and a check of the int8
//! copy, and a search reads only what it scans: the int8 rows (a quarter of the f32 bytes) in
//! place, and the few f32 rows it re-scores copied out with positioned reads
//! ([`MappedRows::read_rows`]). Before the copy was stored, every open read 147 MiB of rows,
//! checked their SHA-256 and quantised them again.
//!
//! # The int8 copy's file (`RTVQ8002`, all integers and floats little-endian)
//!
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `RTVQ8002` |
//! | 4 | `dims`, u32 |
//! | 8 | `rows`, u64 |
//! | 4 | largest row quantisation residual, f32 |
//! | 4 | largest dequantised row norm, f32 (both of the rows less the center) |
//! | 32 | the SHA-256 trailer of the `vectors.bin` this copy was made from |
//! | 4·dims | the center the rows are quantised relative to (their mean), f32 |
//! | 4·rows | per-row scale, f32 |
//! | dims·rows | the int8 rows, row-major |
//! | 4 | CRC-32 of all preceding bytes |
//!
//! A copy written before the center (`RTVQ8001`) has no center field and is read as one
//! relative to zero.
//!
//! Opening checks both files' sizes against their headers, that the copy was made from this
//! rows file (the SHA-256 it names is the one the rows file ends with) and the copy's CRC-32
//! (the int8 scan reads every byte of it anyway). The f32 rows are not read at open: a byte
//! corrupted among them changes a re-scored similarity, never a bound or a slice, so it cannot
//! panic; [`super::VectorIndex::load`] still verifies their SHA-256 for a caller that reads
//! them whole. Generation files are written once and never rewritten in place, so a mapping
//! stays valid while an ingest writes the next generation (a removed file stays mapped).

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::vectors::{CHECKSUM_LEN, HEADER_LEN, MAGIC, VectorError};

/// First bytes of the int8 copy this version writes; the trailing digits version the format.
pub const QUANTISED_MAGIC: &[u8; 8] = b"RTVQ8002";
/// The format before the center, still read.
const QUANTISED_MAGIC_UNCENTRED: &[u8; 8] = b"RTVQ8001";
/// The header's fixed fields (the center follows them in the current format).
const QUANTISED_HEADER_LEN: usize = 8 + 4 + 8 + 4 + 4 + 32;
const CRC_LEN: usize = 4;

/// Appends row `r`'s int8 values to the buffer.
pub(super) type QuantRow<'a> = dyn FnMut(usize, &mut Vec<i8>) -> Result<(), VectorError> + 'a;

/// What the int8 copy's file holds, borrowed from the index that writes it.
pub(super) struct Quantised<'a> {
    pub dims: usize,
    pub center: &'a [f32],
    pub scales: &'a [f32],
    /// Appends row `r`'s int8 copy (`dims` values) to the buffer, rows asked for in order: the
    /// copy is made as it is written, never held whole.
    pub quant_row: &'a mut QuantRow<'a>,
    pub max_residual: f32,
    pub max_quantised_norm: f32,
    /// The SHA-256 the rows' file ends with.
    pub rows_digest: &'a [u8; 32],
}

/// Writes the int8 copy's file at `tmp` (a new file, synced).
pub(super) fn write_quantised(tmp: &Path, q: &mut Quantised<'_>) -> Result<(), VectorError> {
    let io_err = |source| VectorError::Io {
        path: tmp.to_path_buf(),
        source,
    };
    let dims = u32::try_from(q.dims).map_err(|_| VectorError::TooLarge {
        reason: format!("dims {} exceeds u32::MAX", q.dims),
    })?;
    let file = crate::access::private::open(tmp, OpenOptions::new().write(true).create_new(true))
        .map_err(io_err)?;
    let mut out = BufWriter::new(file);
    let mut crc = crc32fast::Hasher::new();
    let mut write = |bytes: &[u8]| -> Result<(), VectorError> {
        crc.update(bytes);
        out.write_all(bytes).map_err(io_err)
    };
    write(QUANTISED_MAGIC)?;
    write(&dims.to_le_bytes())?;
    write(&(q.scales.len() as u64).to_le_bytes())?;
    write(&q.max_residual.to_le_bytes())?;
    write(&q.max_quantised_norm.to_le_bytes())?;
    write(q.rows_digest)?;
    let center: Vec<u8> = q.center.iter().flat_map(|c| c.to_le_bytes()).collect();
    write(&center)?;
    let scales: Vec<u8> = q.scales.iter().flat_map(|s| s.to_le_bytes()).collect();
    write(&scales)?;
    let mut row = Vec::with_capacity(q.dims);
    for r in 0..q.scales.len() {
        row.clear();
        (q.quant_row)(r, &mut row)?;
        write(bytemuck::cast_slice(&row))?;
    }
    let sum = crc.finalize();
    out.write_all(&sum.to_le_bytes()).map_err(io_err)?;
    let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
    file.sync_all().map_err(io_err)
}

/// A generation's rows and their int8 copy, mapped and checked (see the module).
pub(super) struct MappedRows {
    rows_map: Mmap,
    /// The rows file again, for [`MappedRows::read_rows`].
    rows_file: File,
    rows_path: PathBuf,
    quant_map: Mmap,
    dims: usize,
    rows: usize,
    /// The center's length: `dims`, or 0 in a copy without one.
    center_len: usize,
    max_residual: f32,
    max_quantised_norm: f32,
}

impl MappedRows {
    /// Maps the rows at `rows_path` with their int8 copy at `quant_path`; `None` when there is
    /// no copy (a generation written before it was stored) or the machine is big-endian (the
    /// files are little-endian; the caller reads them instead).
    pub(super) fn open(rows_path: &Path, quant_path: &Path) -> Result<Option<Self>, VectorError> {
        if cfg!(target_endian = "big") {
            return Ok(None);
        }
        let quant_file = match File::open(quant_path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(VectorError::Io {
                    path: quant_path.to_path_buf(),
                    source,
                });
            }
        };
        let quant_map = map(quant_path, &quant_file)?;
        let rows_file = File::open(rows_path).map_err(|source| VectorError::Io {
            path: rows_path.to_path_buf(),
            source,
        })?;
        let rows_map = map(rows_path, &rows_file)?;
        read_at_random(&rows_file, &rows_map);
        let (dims, rows) = check_rows_file(rows_path, &rows_map)?;
        let QuantisedLayout {
            center_len,
            max_residual,
            max_quantised_norm,
        } = check_quantised_file(quant_path, &quant_map, dims, rows, &rows_map)?;
        Ok(Some(Self {
            rows_map,
            rows_file,
            rows_path: rows_path.to_path_buf(),
            quant_map,
            dims,
            rows,
            center_len,
            max_residual,
            max_quantised_norm,
        }))
    }

    pub(super) fn dims(&self) -> usize {
        self.dims
    }

    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    pub(super) fn max_residual(&self) -> f32 {
        self.max_residual
    }

    pub(super) fn max_quantised_norm(&self) -> f32 {
        self.max_quantised_norm
    }

    /// The f32 rows, row-major (their length and alignment were checked at open).
    pub(super) fn data(&self) -> &[f32] {
        let start = HEADER_LEN as usize;
        bytemuck::cast_slice(&self.rows_map[start..start + 4 * self.dims * self.rows])
    }

    /// Copies rows `first..` into `out` (whole rows, `out.len() / dims` of them, in the file)
    /// with one positioned read, leaving the mapping untouched: the kernel maps the 64 kB
    /// around every page a read through it faults in, so rows re-scored a few dozen kB apart
    /// would bring the whole file into the process.
    #[cfg(unix)]
    pub(super) fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<(), VectorError> {
        use std::os::unix::fs::FileExt;
        let offset = HEADER_LEN + 4 * (first * self.dims) as u64;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        (self.rows_file)
            .read_exact_at(bytes, offset)
            .map_err(|source| VectorError::Io {
                path: self.rows_path.clone(),
                source,
            })
    }

    /// Elsewhere the rows are copied from the mapping.
    #[cfg(not(unix))]
    pub(super) fn read_rows(&self, first: usize, out: &mut [f32]) -> Result<(), VectorError> {
        let start = first * self.dims;
        out.copy_from_slice(&self.data()[start..start + out.len()]);
        Ok(())
    }

    /// The center the int8 rows are relative to; empty in a copy without one (checked at
    /// open).
    pub(super) fn center(&self) -> &[f32] {
        let start = QUANTISED_HEADER_LEN;
        bytemuck::cast_slice(&self.quant_map[start..start + 4 * self.center_len])
    }

    /// Per-row scales (checked at open).
    pub(super) fn scales(&self) -> &[f32] {
        let start = QUANTISED_HEADER_LEN + 4 * self.center_len;
        bytemuck::cast_slice(&self.quant_map[start..start + 4 * self.rows])
    }

    /// The int8 rows, row-major.
    pub(super) fn quant(&self) -> &[i8] {
        let start = QUANTISED_HEADER_LEN + 4 * self.center_len + 4 * self.rows;
        bytemuck::cast_slice(&self.quant_map[start..start + self.dims * self.rows])
    }
}

/// Tells the kernel the rows file is read at scattered offsets ([`MappedRows::read_rows`]) and
/// its mapping touched in a few places (the header and the checksum at open): otherwise each
/// read or fault of a cold page cache reads ahead around it (`read_ahead_kb`, 8 MB on some
/// disks), and a few hundred rows read the whole file. A refused advice leaves the default.
#[cfg(target_os = "linux")]
fn read_at_random(file: &File, mapping: &Mmap) {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the call's duration; the advice changes only what the
    // page cache reads ahead, never what a read returns.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let _ = mapping.advise(memmap2::Advice::Random);
}

#[cfg(not(target_os = "linux"))]
fn read_at_random(_file: &File, _mapping: &Mmap) {}

fn map(path: &Path, file: &File) -> Result<Mmap, VectorError> {
    // SAFETY: the mapping is read-only and private; generation files are written once, renamed
    // into place and never modified afterwards (see the module), and every read through it is
    // bounds-checked against the lengths checked at open.
    unsafe { Mmap::map(file) }.map_err(|source| VectorError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// `header + per_row * rows (+ trailer)` as a length, `None` when it overflows.
fn file_len(header: usize, per_row: u64, rows: u64, trailer: usize) -> Option<usize> {
    let body = per_row.checked_mul(rows)?;
    let len = body
        .checked_add(header as u64)?
        .checked_add(trailer as u64)?;
    usize::try_from(len).ok()
}

fn check_len(path: &Path, actual: usize, expected: usize) -> Result<(), VectorError> {
    let (expected, actual) = (expected as u64, actual as u64);
    match actual.cmp(&expected) {
        std::cmp::Ordering::Less => Err(VectorError::Truncated {
            path: path.to_path_buf(),
            expected,
            actual,
        }),
        std::cmp::Ordering::Greater => Err(VectorError::TrailingData {
            path: path.to_path_buf(),
            expected,
            actual,
        }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// The rows file's `(dims, rows)`, its size checked against its header.
fn check_rows_file(path: &Path, bytes: &[u8]) -> Result<(usize, usize), VectorError> {
    let least = (HEADER_LEN + CHECKSUM_LEN) as usize;
    if bytes.len() < least {
        check_len(path, bytes.len(), least)?;
    }
    if &bytes[..8] != MAGIC {
        return Err(VectorError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let (dims, rows) = (le_u32(bytes, 8), le_u64(bytes, 12));
    let corrupt = || VectorError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("{dims} dims × {rows} rows does not fit"),
    };
    let expected = file_len(
        HEADER_LEN as usize,
        4 * u64::from(dims),
        rows,
        CHECKSUM_LEN as usize,
    )
    .ok_or_else(corrupt)?;
    check_len(path, bytes.len(), expected)?;
    let dims = usize::try_from(dims).map_err(|_| corrupt())?;
    let rows = usize::try_from(rows).map_err(|_| corrupt())?;
    let data = &bytes[HEADER_LEN as usize..expected - CHECKSUM_LEN as usize];
    bytemuck::try_cast_slice::<u8, f32>(data).map_err(|e| VectorError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("rows not readable in place: {e:?}"),
    })?;
    Ok((dims, rows))
}

/// What [`check_quantised_file`] reads from a copy's header.
struct QuantisedLayout {
    /// `dims`, or 0 for a copy without a center.
    center_len: usize,
    max_residual: f32,
    max_quantised_norm: f32,
}

/// The copy's layout and two bounds, once its size, its binding to `rows_bytes`, its CRC-32,
/// its center and its scales are checked.
fn check_quantised_file(
    path: &Path,
    bytes: &[u8],
    dims: usize,
    rows: usize,
    rows_bytes: &[u8],
) -> Result<QuantisedLayout, VectorError> {
    let corrupt = |reason: String| VectorError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let least = QUANTISED_HEADER_LEN + CRC_LEN;
    if bytes.len() < least {
        check_len(path, bytes.len(), least)?;
    }
    let center_len = match &bytes[..8] {
        m if m == QUANTISED_MAGIC => dims,
        m if m == QUANTISED_MAGIC_UNCENTRED => 0,
        _ => {
            return Err(VectorError::BadMagic {
                path: path.to_path_buf(),
            });
        }
    };
    let (q_dims, q_rows) = (le_u32(bytes, 8), le_u64(bytes, 12));
    if u64::from(q_dims) != dims as u64 || q_rows != rows as u64 {
        return Err(corrupt(format!(
            "{q_dims} dims × {q_rows} rows, but the rows file holds {dims} × {rows}"
        )));
    }
    let header = QUANTISED_HEADER_LEN + 4 * center_len;
    let expected = file_len(header, 4 + dims as u64, q_rows, CRC_LEN)
        .ok_or_else(|| corrupt(format!("{dims} dims × {rows} rows does not fit")))?;
    check_len(path, bytes.len(), expected)?;
    let rows_digest = &rows_bytes[rows_bytes.len() - CHECKSUM_LEN as usize..];
    if &bytes[28..60] != rows_digest {
        return Err(corrupt(
            "made from another vectors.bin (its checksum differs); run `ragtrail ingest --rebuild`"
                .to_string(),
        ));
    }
    let body = &bytes[..expected - CRC_LEN];
    let stored = le_u32(bytes, expected - CRC_LEN);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(VectorError::ChecksumMismatch {
            path: path.to_path_buf(),
            expected: format!("{stored:08x}"),
            actual: format!("{computed:08x}"),
        });
    }
    let max_residual = f32::from_bits(le_u32(bytes, 20));
    let max_quantised_norm = f32::from_bits(le_u32(bytes, 24));
    let center = bytemuck::try_cast_slice::<u8, f32>(&bytes[QUANTISED_HEADER_LEN..header])
        .map_err(|e| corrupt(format!("center not readable in place: {e:?}")))?;
    let scales = bytemuck::try_cast_slice::<u8, f32>(&bytes[header..header + 4 * rows])
        .map_err(|e| corrupt(format!("scales not readable in place: {e:?}")))?;
    let sound = |x: f32| x.is_finite() && x >= 0.0;
    if !sound(max_residual) || !sound(max_quantised_norm) || !scales.iter().all(|&s| sound(s)) {
        return Err(corrupt(
            "a scale or bound is negative or not finite".to_string(),
        ));
    }
    // The bound's f32 rounding slack assumes the center is at most a unit vector (a mean of
    // unit rows is).
    let center_norm: f64 = center.iter().map(|&c| f64::from(c) * f64::from(c)).sum();
    if !center.iter().all(|c| c.is_finite()) || center_norm > 1.0 + 1e-3 {
        return Err(corrupt(
            "the center is not finite or longer than a unit vector".to_string(),
        ));
    }
    Ok(QuantisedLayout {
        center_len,
        max_residual,
        max_quantised_norm,
    })
}
