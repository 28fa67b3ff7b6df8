//! The generation's mapped layout: `chunks.idx` beside `chunks.jsonl`, `vectors.q8` beside
//! `vectors.bin`. A store written and reopened reads what was written, through the table and
//! the maps; one of the older layout (neither file) reads the same; a truncated or corrupted
//! file is a typed error.

use std::path::{Path, PathBuf};

use super::ChunkStore;
use super::StoreError;
use super::vectors::{VectorError, VectorIndex};
use crate::access::AccessContext;
use crate::embed::{Embedder, HashingEmbedder};
use crate::index::chunk_id_to_u64;
use crate::knowledge::{Chunk, DocStatus};

fn chunk(n: usize) -> Chunk {
    // Mostly numeric ids (as ingest makes them), one of another shape; two tenants, a role,
    // a superseded chunk, Chinese and English texts.
    let id = match n {
        3 => "legacy-id-3".to_string(),
        _ => format!("c_{:016x}", 0x1000 + n * 7919),
    };
    let text = match n % 3 {
        0 => format!("差旅 报销 标准 第 {n} 条：高铁二等座。"),
        1 => format!("Travel expenses, rule {n}: economy class."),
        _ => format!("Annual leave {n} days; 年假 {n} 天."),
    };
    Chunk {
        id,
        source: format!("doc-{}.md", n / 4),
        title_path: format!("Doc {} > Section {n}", n / 4),
        headings: vec![format!("Section {n}")],
        source_uri: format!("doc-{}.md", n / 4),
        ordinal: n as u32,
        content_hash: crate::knowledge::sha256_hex(text.as_bytes()),
        text,
        tenant: if n.is_multiple_of(5) {
            "acme"
        } else {
            "default"
        }
        .to_string(),
        roles: if n.is_multiple_of(7) {
            vec!["hr".to_string()]
        } else {
            Vec::new()
        },
        version: None,
        updated: None,
        status: if n == 8 {
            DocStatus::Superseded
        } else {
            DocStatus::Active
        },
    }
}

/// A store of `n` chunks written to a fresh folder and made current, with the chunks it holds.
fn written_store(n: usize) -> (tempfile::TempDir, Vec<Chunk>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let chunks: Vec<Chunk> = (0..n).map(chunk).collect();
    let embedder = HashingEmbedder::default();
    let empty = ChunkStore::open(dir.path()).expect("empty store");
    let dims = Embedder::info(&embedder).dims as usize;
    let (next, mut vectors) = empty.start_generation(dims, n).expect("start");
    for (i, c) in chunks.iter().enumerate() {
        vectors.set_row(i, &embedder.embed(&c.text)).expect("row");
    }
    let next = empty
        .write_generation(
            next,
            vectors,
            Vec::new(),
            chunks.clone(),
            Embedder::info(&embedder),
            None,
        )
        .expect("write");
    next.make_current().expect("current");
    (dir, chunks)
}

fn gen_file(dir: &Path, name: &str) -> PathBuf {
    dir.join("gen-1").join(name)
}

/// Everything a search reads of a store, in one comparable value.
fn observed(store: &ChunkStore, chunks: &[Chunk]) -> Vec<String> {
    let mut seen = Vec::new();
    let access = AccessContext::new("default", Vec::<String>::new());
    let visible = store.visibility(&access, false);
    for (i, c) in chunks.iter().enumerate() {
        let (got, terms) = store.get_analysed_at(i).expect("analysed");
        assert_eq!(got, c);
        assert_eq!(store.get(&c.id), Some(c));
        assert_eq!(store.position(&c.id), Some(i));
        if let Some(n) = chunk_id_to_u64(&c.id) {
            assert_eq!(store.position_of_id64(n), Some(i));
        }
        seen.push(format!(
            "{i} {} {} {:?} {}",
            c.id,
            visible.allows(i),
            store.written().expect("written")[i],
            terms.lowercase().len()
        ));
    }
    seen.push(format!("visible {}", store.visible_count(&access)));
    let query = HashingEmbedder::default()
        .embed_query(&["差旅 报销"])
        .expect("query");
    let hits = store.vectors().search(&query[0], 5, |i| visible.allows(i));
    seen.push(format!("{:?}", hits.expect("search")));
    seen
}

#[test]
fn a_written_generation_reopens_mapped_and_reads_as_written() {
    let (dir, chunks) = written_store(40);
    assert!(gen_file(dir.path(), "chunks.idx").exists());
    assert!(gen_file(dir.path(), "vectors.q8").exists());
    let store = ChunkStore::open(dir.path()).expect("open");
    assert!(store.vectors().is_mapped());
    assert_eq!(store.len(), 40);
    assert_eq!(store.get("c_ffffffffffffffff"), None);
    assert_eq!(store.get("legacy-id-99"), None);
    assert_eq!(store.position_of_id64(42), None);
    let mapped = observed(&store, &chunks);
    // The documents that have chunks, read from the records' sources alone (none decoded
    // whole yet), then from the decoded records.
    let sources: std::collections::HashSet<String> =
        chunks.iter().map(|c| c.source.clone()).collect();
    assert_eq!(sources.len(), 10);
    assert_eq!(store.chunk_sources().expect("sources"), sources);
    assert_eq!(store.chunks().expect("all"), chunks.as_slice());
    assert_eq!(store.chunk_sources().expect("sources"), sources);
    // The older layout (no table, no int8 copy) reads the same, whole.
    std::fs::remove_file(gen_file(dir.path(), "chunks.idx")).expect("rm");
    std::fs::remove_file(gen_file(dir.path(), "vectors.q8")).expect("rm");
    let old = ChunkStore::open(dir.path()).expect("open old layout");
    assert!(!old.vectors().is_mapped());
    assert_eq!(observed(&old, &chunks), mapped);
    assert_eq!(old.chunk_sources().expect("sources"), sources);
    // The vectors read whole equal the mapped ones, and both int8 copies hold their bounds.
    assert_eq!(old.vectors(), store.vectors());
    old.vectors()
        .check_int8_copy()
        .expect("int8 copy in memory");
    store.vectors().check_int8_copy().expect("mapped int8 copy");
}

#[test]
fn an_empty_generation_round_trips() {
    let (dir, _) = written_store(0);
    let store = ChunkStore::open(dir.path()).expect("open");
    assert!(store.is_empty());
    assert!(store.chunks().expect("all").is_empty());
    assert_eq!(store.get("c_0000000000000001"), None);
}

fn assert_corrupt_table(result: Result<ChunkStore, StoreError>, what: &str) {
    match result {
        Err(StoreError::Corrupt { path, .. }) => assert!(path.ends_with("chunks.idx"), "{what}"),
        Err(e) => panic!("{what}: another error: {e}"),
        Ok(_) => panic!("{what}: opened"),
    }
}

#[test]
fn a_truncated_or_corrupted_chunk_table_is_a_typed_error() {
    let (dir, _) = written_store(12);
    let path = gen_file(dir.path(), "chunks.idx");
    let good = std::fs::read(&path).expect("read");
    for cut in [0, 5, 20, good.len() / 2, good.len() - 1] {
        std::fs::write(&path, &good[..cut]).expect("write");
        assert_corrupt_table(ChunkStore::open(dir.path()), &format!("cut at {cut}"));
    }
    for at in [3, 30, good.len() / 2, good.len() - 2] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&path, &bad).expect("write");
        assert_corrupt_table(ChunkStore::open(dir.path()), &format!("byte {at} flipped"));
    }
    // A records file of another length than the table was made for.
    std::fs::write(&path, &good).expect("write");
    let records = gen_file(dir.path(), "chunks.jsonl");
    let mut text = std::fs::read(&records).expect("read");
    text.extend_from_slice(b"\n");
    std::fs::write(&records, &text).expect("write");
    assert_corrupt_table(ChunkStore::open(dir.path()), "records grown");
}

#[test]
fn a_corrupted_record_is_a_typed_error_when_read() {
    let (dir, chunks) = written_store(12);
    let records = gen_file(dir.path(), "chunks.jsonl");
    let text = std::fs::read_to_string(&records).expect("read");
    // Same length, so the table still fits: the fifth record's opening brace broken.
    let fifth = text.match_indices('\n').nth(3).expect("lines").0 + 1;
    let mut bad = text.into_bytes();
    bad[fifth] = b'x';
    std::fs::write(&records, &bad).expect("write");
    let store = ChunkStore::open(dir.path()).expect("opens: records are read when asked for");
    assert_eq!(store.record(3).expect("fourth"), Some(&chunks[3]));
    assert!(matches!(
        store.record(4),
        Err(StoreError::Corrupt { line: 5, .. })
    ));
    assert!(matches!(store.chunks(), Err(StoreError::Corrupt { .. })));
    assert_eq!(store.get(&chunks[4].id), None);
    assert!(store.get_analysed_at(4).is_none());
    assert_eq!(store.record(12).expect("past the end"), None);
}

fn vectors_error(dir: &Path) -> VectorError {
    let path = gen_file(dir, "vectors.bin");
    let q8 = gen_file(dir, "vectors.q8");
    match VectorIndex::open(&path, &q8, 384) {
        Err(e) => e,
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn a_truncated_or_corrupted_int8_copy_is_a_typed_error() {
    let (dir, _) = written_store(12);
    let q8 = gen_file(dir.path(), "vectors.q8");
    let good = std::fs::read(&q8).expect("read");
    for cut in [0, 7, 59, good.len() / 2, good.len() - 1] {
        std::fs::write(&q8, &good[..cut]).expect("write");
        assert!(
            matches!(vectors_error(dir.path()), VectorError::Truncated { .. }),
            "cut at {cut}"
        );
    }
    let mut longer = good.clone();
    longer.push(0);
    std::fs::write(&q8, &longer).expect("write");
    assert!(matches!(
        vectors_error(dir.path()),
        VectorError::TrailingData { .. }
    ));
    for at in [64, good.len() / 2, good.len() - 5] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&q8, &bad).expect("write");
        assert!(
            matches!(
                vectors_error(dir.path()),
                VectorError::ChecksumMismatch { .. }
            ),
            "byte {at} flipped"
        );
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    std::fs::write(&q8, &bad).expect("write");
    assert!(matches!(
        vectors_error(dir.path()),
        VectorError::BadMagic { .. }
    ));
    // The copy of other rows: the rows file's checksum it names differs.
    std::fs::write(&q8, &good).expect("write");
    let rows = gen_file(dir.path(), "vectors.bin");
    let mut other = std::fs::read(&rows).expect("read");
    let last = other.len() - 1;
    other[last] ^= 0x01;
    std::fs::write(&rows, &other).expect("write");
    assert!(matches!(
        vectors_error(dir.path()),
        VectorError::Corrupt { .. }
    ));
    // A truncated rows file.
    std::fs::write(&rows, &other[..other.len() - 40]).expect("write");
    assert!(matches!(
        vectors_error(dir.path()),
        VectorError::Truncated { .. }
    ));
    // Through the store: the vector file's error, telling the user to rebuild.
    let message = match ChunkStore::open(dir.path()) {
        Err(e @ StoreError::Vectors { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("opened"),
    };
    assert!(message.contains("ingest --rebuild"), "{message}");
}

/// `index` saved with its int8 copy under `dir`, and opened mapped: (rows file, copy, mapped).
fn saved_and_mapped(dir: &Path, index: &VectorIndex) -> (PathBuf, PathBuf, VectorIndex) {
    let (rows, q8) = (dir.join("v.bin"), dir.join("v.q8"));
    index.save_with_quantised(&rows, &q8).expect("save");
    let mapped = VectorIndex::open(&rows, &q8, index.dims()).expect("open");
    (rows, q8, mapped)
}

/// `rows` rows of `dims` components drawn from `rng`.
fn random_index(rng: &mut crate::seeded::SplitMix64, dims: usize, rows: usize) -> VectorIndex {
    let mut index = VectorIndex::with_capacity(dims, rows);
    for _ in 0..rows {
        index.push(&rng.vector(dims)).expect("push");
    }
    index
}

#[test]
fn a_mapped_index_searches_and_grows_like_the_one_in_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = crate::seeded::SplitMix64(7);
    // Rows sharing a direction, as a model's embeddings do.
    let base = rng.vector(24);
    let near_base = move |rng: &mut crate::seeded::SplitMix64| -> Vec<f32> {
        (rng.vector(24).iter().zip(&base))
            .map(|(x, b)| x + 2.0 * b)
            .collect()
    };
    let mut index = VectorIndex::new(24);
    for _ in 0..500 {
        index.push(&near_base(&mut rng)).expect("push");
    }
    index.push(&[0.0; 24]).expect("zero row");
    let (rows, q8, mut mapped) = saved_and_mapped(dir.path(), &index);
    assert!(mapped.is_mapped());
    assert_eq!(mapped, index);
    // These rows share a direction: the copy is centred.
    assert!(mapped.is_centred());
    mapped.check_int8_copy().expect("mapped int8 copy");
    for _ in 0..20 {
        let q = near_base(&mut rng);
        assert_eq!(
            mapped.search(&q, 10, |r| r % 3 != 0).expect("mapped"),
            index.search_exact(&q, 10, |r| r % 3 != 0).expect("exact")
        );
    }
    assert!(matches!(
        VectorIndex::open(&rows, &q8, 16),
        Err(VectorError::DimensionMismatch {
            expected: 16,
            actual: 24
        })
    ));
    // Pushing onto a mapped index copies it into memory first.
    let extra = near_base(&mut rng);
    mapped.push(&extra).expect("push");
    index.push(&extra).expect("push");
    assert!(!mapped.is_mapped());
    assert_eq!(mapped, index);
    assert!(mapped.is_centred());
    mapped.check_int8_copy().expect("grown int8 copy");
    let q = near_base(&mut rng);
    assert_eq!(
        mapped.search(&q, 10, |_| true).expect("grown"),
        index.search_exact(&q, 10, |_| true).expect("exact")
    );
}

#[test]
fn sparse_rows_keep_their_int8_copy_relative_to_zero() {
    // Rows with a few non-zero components (as the hashing embedder's) quantise exactly where
    // they are zero; taken relative to their mean they would not, so no center is used.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut index = VectorIndex::new(64);
    for r in 0..200usize {
        let mut v = vec![0.0; 64];
        v[r % 64] = 1.0;
        v[(r * 7 + 3) % 64] = -0.5;
        index.push(&v).expect("push");
    }
    let (_, _, mapped) = saved_and_mapped(dir.path(), &index);
    assert!(!mapped.is_centred());
    mapped.check_int8_copy().expect("mapped int8 copy");
}

#[test]
fn a_mapped_index_reads_the_rows_asked_for_in_runs_and_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = crate::seeded::SplitMix64(5);
    let index = random_index(&mut rng, 8, 300);
    let (_, _, mapped) = saved_and_mapped(dir.path(), &index);
    // A run longer than one read, runs broken by gaps, single rows, the last row.
    let wanted: Vec<usize> = (0..150).chain([151, 152, 200, 297, 299]).collect();
    let mut seen = Vec::new();
    mapped
        .visit_rows(&wanted, |row, vector| {
            assert_eq!(vector, index.row(row), "row {row}");
            seen.push(row);
        })
        .expect("visit");
    assert_eq!(seen, wanted);
    assert!(matches!(
        mapped.visit_rows(&[3, 300], |_, _| {}),
        Err(VectorError::NoSuchRow {
            row: 300,
            rows: 300
        })
    ));
}

/// Resident kB of the mappings of `path` in this process (`/proc/self/smaps`).
#[cfg(target_os = "linux")]
fn resident_kb(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let name = path.to_string_lossy();
    let mut in_mapping = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            in_mapping = line.ends_with(name.as_ref());
        } else if in_mapping && let Some(rest) = line.strip_prefix("Rss:") {
            kb += rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap_or(0);
        }
    }
    kb
}

#[cfg(target_os = "linux")]
#[test]
fn a_mapped_index_rescores_rows_without_bringing_the_rows_file_into_the_process() {
    // 20,000 rows of 64 dims (5 MB): a k = 100 search re-scores at least 100 rows spread over
    // the file, which the kernel's fault-around would map whole if they were read through the
    // mapping.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = crate::seeded::SplitMix64(9);
    let index = random_index(&mut rng, 64, 20_000);
    let (rows, _, mapped) = saved_and_mapped(dir.path(), &index);
    let file_kb = std::fs::metadata(&rows).expect("metadata").len() / 1024;
    let mut second_passes = 0;
    for _ in 0..5 {
        let q = rng.vector(64);
        let (hits, stats) = mapped.search_with_stats(&q, 100, |_| true).expect("search");
        assert_eq!(hits, index.search_exact(&q, 100, |_| true).expect("exact"));
        assert!(stats.rescored >= 100, "{stats:?}");
        second_passes += usize::from(stats.second_pass);
    }
    let resident = resident_kb(&rows);
    assert!(
        resident * 10 < file_kb,
        "{resident} kB of the {file_kb} kB rows file mapped in ({second_passes} second passes)"
    );
    // Reading through the mapping, as `row` does, is what maps it.
    let touched: f32 = (0..20_000).step_by(400).map(|r| mapped.row(r)[0]).sum();
    assert!(touched.is_finite());
    assert!(
        resident_kb(&rows) > resident,
        "the measure must see the mapping"
    );
}

#[test]
fn an_int8_copy_written_before_the_center_still_opens() {
    // The copy's earlier format (`RTVQ8001`) is the current one without the center field.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = crate::seeded::SplitMix64(3);
    let index = random_index(&mut rng, 16, 300);
    let (rows, q8, saved) = saved_and_mapped(dir.path(), &index);
    // Rows spread evenly around zero are saved relative to zero: the center field is zeros.
    assert!(!saved.is_centred());
    let current = std::fs::read(&q8).expect("read");
    assert_eq!(&current[..8], b"RTVQ8002");
    let fixed = 8 + 4 + 8 + 4 + 4 + 32;
    let mut older = b"RTVQ8001".to_vec();
    older.extend_from_slice(&current[8..fixed]);
    older.extend_from_slice(&current[fixed + 4 * 16..current.len() - 4]);
    let crc = crc32fast::hash(&older);
    older.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(&q8, &older).expect("write");
    let opened = VectorIndex::open(&rows, &q8, 16).expect("open the older copy");
    assert!(opened.is_mapped());
    assert!(!opened.is_centred());
    opened.check_int8_copy().expect("older int8 copy");
    for _ in 0..10 {
        let q = rng.vector(16);
        assert_eq!(
            opened.search(&q, 5, |_| true).expect("search"),
            index.search_exact(&q, 5, |_| true).expect("exact")
        );
    }
}
