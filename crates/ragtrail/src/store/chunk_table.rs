//! The chunk table: what a generation needs to know of every chunk without reading its record,
//! written at ingest as `chunks.idx` beside `chunks.jsonl`. With it a process finds a record by
//! id or position and decodes that record alone, decides visibility per access group, and knows
//! each chunk's script, where it used to parse every line of `chunks.jsonl` at open (100k
//! records: about 15% of a CLI answer's time, most of its memory).
//!
//! # File format (`RTCHK001`, all integers little-endian)
//!
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `RTCHK001` |
//! | 8 | `rows`, u64 |
//! | 8 | length of `chunks.jsonl` in bytes, u64 |
//! | 4 | length `G` of the access groups, u32 |
//! | G | the access groups: a JSON array of `[tenant, roles, status]` |
//! | 8·(rows+1) | where each record starts in `chunks.jsonl`, then where the last one ends |
//! | 4·rows | each chunk's access group, u32 (an index into the groups) |
//! | rows | each chunk's script: bit 0 mainly CJK, bit 1 borrows from the other script |
//! | 12·rows | `(key u64, entry u32)` sorted: [`id_key`] of each chunk id; the entry is the chunk's position, its top bit set when the id is a numeric `c_<16 hex>` one |
//! | 4 | CRC-32 of all preceding bytes |
//!
//! Reading checks the CRC-32, the lengths, that the offsets rise to the records file's length
//! and that every group and position is in range: a truncated or corrupt table is a
//! [`StoreError`], never a panic or a wrong record.

use std::io::{BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::StoreError;
use super::scripts::Written;
use crate::access::private;
use crate::index::chunk_id_to_u64;
use crate::knowledge::{Chunk, DocStatus};

const MAGIC: &[u8; 8] = b"RTCHK001";
const HEADER_LEN: usize = 8 + 8 + 8 + 4;
const CRC_LEN: usize = 4;
/// Marks an entry whose id is a numeric one (what the BM25 index's fast field holds).
const NUMERIC: u32 = 1 << 31;

/// The (tenant, roles, status) that decide who sees a chunk.
pub(super) type AccessGroup = (String, Vec<String>, DocStatus);

/// Chunks grouped by what decides who sees them: chunks with the same (tenant, roles, status)
/// share a group, so a query decides visibility once per group instead of once per row.
#[derive(Debug, Default)]
pub(super) struct AccessGroups {
    pub groups: Vec<AccessGroup>,
    /// Each chunk's group.
    pub group_of: Vec<u32>,
    /// Chunks per group.
    pub sizes: Vec<usize>,
}

impl AccessGroups {
    pub fn of(chunks: &[Chunk]) -> Self {
        let mut groups: Vec<AccessGroup> = Vec::new();
        let mut ids: std::collections::HashMap<AccessGroup, u32> = Default::default();
        let group_of = chunks
            .iter()
            .map(|c| {
                let key = (c.tenant.clone(), c.roles.clone(), c.status);
                *ids.entry(key.clone()).or_insert_with(|| {
                    groups.push(key);
                    (groups.len() - 1) as u32
                })
            })
            .collect();
        Self::with_sizes(groups, group_of)
    }

    fn with_sizes(groups: Vec<AccessGroup>, group_of: Vec<u32>) -> Self {
        let mut sizes = vec![0; groups.len()];
        for &g in &group_of {
            sizes[g as usize] += 1;
        }
        Self {
            groups,
            group_of,
            sizes,
        }
    }
}

/// The key a chunk id is looked up by: its number when it is a numeric `c_<16 hex>` id (then
/// `true`), else the first 8 bytes of its SHA-256. Two ids may share a key; a lookup compares
/// the records' ids.
pub(super) fn id_key(id: &str) -> (u64, bool) {
    match chunk_id_to_u64(id) {
        Some(n) => (n, true),
        None => {
            let digest = Sha256::digest(id.as_bytes());
            let mut b = [0u8; 8];
            b.copy_from_slice(&digest[..8]);
            (u64::from_le_bytes(b), false)
        }
    }
}

/// Lookup by id: `(key, entry)` sorted, an entry being a position, its top bit
/// [`NUMERIC`] when the id is numeric.
#[derive(Debug, Default)]
pub(super) struct IdKeys(Vec<(u64, u32)>);

impl IdKeys {
    pub fn of(chunks: &[Chunk]) -> Self {
        let mut keys: Vec<(u64, u32)> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (key, numeric) = id_key(&c.id);
                (key, i as u32 | if numeric { NUMERIC } else { 0 })
            })
            .collect();
        keys.sort_unstable();
        Self(keys)
    }

    /// Positions whose id has `key`, the last position first (as a map built in chunk order
    /// keeps the last of equal ids), each with whether its id is numeric.
    pub fn positions(&self, key: u64) -> impl Iterator<Item = (usize, bool)> + '_ {
        let start = self.0.partition_point(|&(k, _)| k < key);
        let end = self.0.partition_point(|&(k, _)| k <= key);
        let mut found: Vec<(usize, bool)> = self.0[start..end]
            .iter()
            .map(|&(_, e)| ((e & !NUMERIC) as usize, e & NUMERIC != 0))
            .collect();
        found.sort_unstable_by_key(|&(p, _)| std::cmp::Reverse(p));
        found.into_iter()
    }

    /// The last position whose id is numeric and has `key`: the first numeric one
    /// [`IdKeys::positions`] gives, found without a list (the BM25 leg asks once per hit). A
    /// numeric entry sorts after every other of its key, so it is the key's last entry.
    pub fn last_numeric(&self, key: u64) -> Option<usize> {
        let end = self.0.partition_point(|&(k, _)| k <= key);
        let &(k, entry) = self.0.get(end.checked_sub(1)?)?;
        (k == key && entry & NUMERIC != 0).then_some((entry & !NUMERIC) as usize)
    }
}

/// A generation's chunk table, read into memory (a few MB at 100k chunks).
#[derive(Debug)]
pub(super) struct ChunkTable {
    /// Where each record starts in `chunks.jsonl`, then where the last ends.
    pub offsets: Vec<u64>,
    pub access: AccessGroups,
    pub written: Vec<Written>,
    pub keys: IdKeys,
}

impl ChunkTable {
    /// Writes the table of `chunks`, whose records start at `offsets` (then end) in a records
    /// file of `records_len` bytes, to `path` (a new file, synced).
    pub fn write(
        path: &Path,
        chunks: &[Chunk],
        offsets: &[u64],
        records_len: u64,
    ) -> Result<(), StoreError> {
        let io_err = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let access = AccessGroups::of(chunks);
        let groups = serde_json::to_vec(&access.groups).map_err(|e| io_err(e.into()))?;
        let file = private::open(
            path,
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
        .map_err(io_err)?;
        let mut out = BufWriter::new(file);
        let mut crc = crc32fast::Hasher::new();
        let mut write = |bytes: &[u8]| -> Result<(), StoreError> {
            crc.update(bytes);
            out.write_all(bytes).map_err(io_err)
        };
        write(MAGIC)?;
        write(&(chunks.len() as u64).to_le_bytes())?;
        write(&records_len.to_le_bytes())?;
        write(&(groups.len() as u32).to_le_bytes())?;
        write(&groups)?;
        for o in offsets {
            write(&o.to_le_bytes())?;
        }
        for g in &access.group_of {
            write(&g.to_le_bytes())?;
        }
        let scripts: Vec<u8> = chunks
            .iter()
            .map(|c| {
                let w = Written::of(&c.text);
                u8::from(w.cjk) | u8::from(w.borrows) << 1
            })
            .collect();
        write(&scripts)?;
        for (key, entry) in &IdKeys::of(chunks).0 {
            write(&key.to_le_bytes())?;
            write(&entry.to_le_bytes())?;
        }
        let sum = crc.finalize();
        out.write_all(&sum.to_le_bytes()).map_err(io_err)?;
        let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        file.sync_all().map_err(io_err)
    }

    /// Reads the table at `path`, checked against a records file of `records_len` bytes.
    /// `None` when there is none (a generation written before the table was).
    pub fn read(path: &Path, records_len: u64) -> Result<Option<Self>, StoreError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        Self::parse(&bytes, records_len)
            .map(Some)
            .map_err(|message| StoreError::Corrupt {
                path: path.display().to_string(),
                line: 0,
                message,
            })
    }

    fn parse(bytes: &[u8], records_len: u64) -> Result<Self, String> {
        if bytes.len() < HEADER_LEN + CRC_LEN {
            return Err(format!("truncated: {} bytes", bytes.len()));
        }
        if &bytes[..8] != MAGIC {
            return Err("not a chunk table (bad magic)".to_string());
        }
        let (body, sum) = bytes.split_at(bytes.len() - CRC_LEN);
        let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(format!(
                "checksum {computed:08x} does not match stored {stored:08x} (truncated or corrupt)"
            ));
        }
        let mut r = Reader { bytes: body, at: 8 };
        let rows = usize::try_from(r.u64()?).map_err(|_| "row count does not fit".to_string())?;
        if rows >= NUMERIC as usize {
            return Err(format!("{rows} rows"));
        }
        let table_records_len = r.u64()?;
        if table_records_len != records_len {
            return Err(format!(
                "made for a records file of {table_records_len} bytes, chunks.jsonl has {records_len}"
            ));
        }
        let groups_len = r.u32()? as usize;
        let groups: Vec<AccessGroup> =
            serde_json::from_slice(r.take(groups_len)?).map_err(|e| e.to_string())?;
        // The rest has a fixed size per row: check it before allocating by `rows`.
        let per_row = 8 + 4 + 1 + 12;
        let rest = body.len() - r.at;
        if rows.checked_mul(per_row).and_then(|n| n.checked_add(8)) != Some(rest) {
            return Err(format!("{rest} bytes left for {rows} rows"));
        }
        let offsets: Vec<u64> = (0..=rows).map(|_| r.u64()).collect::<Result<_, _>>()?;
        if offsets.first() != Some(&0)
            || offsets.last() != Some(&records_len)
            || offsets.windows(2).any(|w| w[0] > w[1])
        {
            return Err("record offsets do not rise through chunks.jsonl".to_string());
        }
        let group_of: Vec<u32> = (0..rows).map(|_| r.u32()).collect::<Result<_, _>>()?;
        if group_of.iter().any(|&g| g as usize >= groups.len()) {
            return Err("an access group out of range".to_string());
        }
        let written = r
            .take(rows)?
            .iter()
            .map(|&b| Written {
                cjk: b & 1 != 0,
                borrows: b & 2 != 0,
            })
            .collect();
        let mut keys = Vec::with_capacity(rows);
        for _ in 0..rows {
            let key = r.u64()?;
            let entry = r.u32()?;
            if (entry & !NUMERIC) as usize >= rows {
                return Err("a position out of range".to_string());
            }
            keys.push((key, entry));
        }
        if keys.windows(2).any(|w| w[0] > w[1]) {
            return Err("id keys out of order".to_string());
        }
        Ok(Self {
            offsets,
            access: AccessGroups::with_sizes(groups, group_of),
            written,
            keys: IdKeys(keys),
        })
    }
}

/// Little-endian fields read in order, every read bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Keys drawn from a few values, so that ids share keys, numeric and not, at any place.
        #[test]
        fn the_last_numeric_position_is_the_first_numeric_one_listed(
            entries in proptest::collection::vec((0u64..6, any::<bool>()), 0..40),
        ) {
            let mut keys: Vec<(u64, u32)> = entries
                .iter()
                .enumerate()
                .map(|(i, &(key, numeric))| (key, i as u32 | if numeric { NUMERIC } else { 0 }))
                .collect();
            keys.sort_unstable();
            let keys = IdKeys(keys);
            for key in 0..7 {
                let listed = keys.positions(key).find(|&(_, numeric)| numeric).map(|(p, _)| p);
                prop_assert_eq!(keys.last_numeric(key), listed);
            }
        }
    }
}
