//! jieba with its dictionary loaded word by word, as texts need them.
//!
//! Loading jieba's whole dictionary (349,000 lines parsed into a trie) took about 150 ms of
//! every process, most of a one-question `ask`. The build turns the same dictionary into a
//! table read in place (`build.rs`); before jieba segments a text, the words of the table that
//! occur in it are added to a jieba that started empty, with their frequency and tag, and a
//! filler word no text can contain keeps the dictionary's total frequency. jieba's answers
//! for a text depend only on the dictionary words inside that text and on that total (the
//! best route weighs the words found at each character against it; the HMM, search-mode
//! grams and part-of-speech guesses read nothing else), so every segmentation equals the one
//! the whole dictionary gives; the tests compare the two.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard};

use jieba_rs::{Jieba, Token};

/// The table `build.rs` wrote from jieba-rs's dictionary.
static TABLE_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/words.bin"));

/// Stands for the dictionary words not loaded yet, so the total stays the whole
/// dictionary's. Two non-ideographs: jieba looks words up only inside runs of ideographs and
/// ASCII letters, and single characters elsewhere, so no text ever matches it.
const FILLER: &str = "\u{FFFF}\u{FFFF}";

/// Text looked up word by word before the whole dictionary is loaded instead: past this, an
/// ingest or a long-running server has spent on lookups about what the load costs once.
const LOOKED_UP_BEFORE_WHOLE: usize = 4 << 20;

/// One part of speech as jieba tags a word of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged<'a> {
    pub word: &'a str,
    pub tag: String,
}

/// The dictionary table, read in place: words sorted by their bytes, each with its frequency
/// and tag, and where each first character's words start.
struct Table {
    words: usize,
    total: u64,
    tags: Vec<&'static str>,
    /// Start of each BMP character's words (one more entry, for the end of the last).
    bmp: &'static [u8],
    /// First characters beyond the BMP, with the start of their words.
    astral: Vec<(u32, u32)>,
    offsets: &'static [u8],
    freqs: &'static [u8],
    tag_ids: &'static [u8],
    bytes: &'static [u8],
}

fn u32_at(bytes: &[u8], index: usize) -> u32 {
    let at = index * 4;
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Splits `n` bytes off the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if rest.len() < n {
        return None;
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Some(head)
}

impl Table {
    fn parse(bytes: &'static [u8]) -> Option<Self> {
        let mut rest = bytes;
        if take(&mut rest, 4)? != b"RTJD" || u32_at(take(&mut rest, 4)?, 0) != 1 {
            return None;
        }
        let words = u32_at(take(&mut rest, 4)?, 0) as usize;
        let total = u64::from_le_bytes(take(&mut rest, 8)?.try_into().ok()?);
        let mut tags = Vec::new();
        for _ in 0..take(&mut rest, 1)?[0] {
            let len = take(&mut rest, 1)?[0] as usize;
            tags.push(std::str::from_utf8(take(&mut rest, len)?).ok()?);
        }
        let bmp = take(&mut rest, 4 * 0x1_0001)?;
        let astral_len = u32_at(take(&mut rest, 4)?, 0) as usize;
        let astral_bytes = take(&mut rest, 8 * astral_len)?;
        let astral = (0..astral_len)
            .map(|i| (u32_at(astral_bytes, 2 * i), u32_at(astral_bytes, 2 * i + 1)))
            .collect();
        let offsets = take(&mut rest, 4 * (words + 1))?;
        let freqs = take(&mut rest, 4 * words)?;
        let tag_ids = take(&mut rest, words)?;
        let bytes = take(&mut rest, u32_at(offsets, words) as usize)?;
        let table = Self {
            words,
            total,
            tags,
            bmp,
            astral,
            offsets,
            freqs,
            tag_ids,
            bytes,
        };
        (words > 0 && rest.is_empty()).then_some(table)
    }

    fn word(&self, i: usize) -> &'static [u8] {
        &self.bytes[u32_at(self.offsets, i) as usize..u32_at(self.offsets, i + 1) as usize]
    }

    /// The words starting with `c`, as a range of positions.
    fn starting_with(&self, c: char) -> (usize, usize) {
        let c = u32::from(c);
        if c < 0x1_0000 {
            let c = c as usize;
            return (
                u32_at(self.bmp, c) as usize,
                u32_at(self.bmp, c + 1) as usize,
            );
        }
        let at = self.astral.partition_point(|&(f, _)| f < c);
        match self.astral.get(at) {
            Some(&(f, start)) if f == c => {
                let end = self
                    .astral
                    .get(at + 1)
                    .map_or(self.words, |&(_, s)| s as usize);
                (start as usize, end)
            }
            _ => (0, 0),
        }
    }

    /// The first position in `lo..hi` where `pred` stops holding (it holds for a prefix).
    fn first_not(&self, mut lo: usize, mut hi: usize, pred: impl Fn(&[u8]) -> bool) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.word(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Every word of the table that occurs in `text`, by position (once per occurrence).
    fn words_in(&self, text: &str, mut found: impl FnMut(usize)) {
        let bytes = text.as_bytes();
        for (start, c) in text.char_indices() {
            let (mut lo, mut hi) = self.starting_with(c);
            let mut end = start + c.len_utf8();
            // Invariant: every word in lo..hi starts with text[start..end], and the
            // shortest (that prefix itself, when it is a word) comes first.
            while lo < hi {
                if self.word(lo).len() == end - start {
                    found(lo);
                }
                let Some(next) = text[end..].chars().next() else {
                    break;
                };
                end += next.len_utf8();
                let prefix = &bytes[start..end];
                lo = self.first_not(lo, hi, |w| w < prefix);
                hi = self.first_not(lo, hi, |w| w.starts_with(prefix));
            }
        }
    }
}

fn table() -> Option<&'static Table> {
    static TABLE: OnceLock<Option<Table>> = OnceLock::new();
    TABLE.get_or_init(|| Table::parse(TABLE_BYTES)).as_ref()
}

struct Loaded {
    jieba: Jieba,
    /// Total frequency of the table's words added so far.
    added: u64,
}

/// jieba's segmentation over the dictionary words each text needs (see the module comment).
pub struct Segmenter {
    loaded: RwLock<Loaded>,
    /// One bit per table word: added to `loaded` already.
    present: Box<[AtomicU64]>,
    /// Bytes of text whose words were looked up.
    looked_up: AtomicUsize,
    /// `loaded` holds the whole dictionary: nothing to look up.
    whole: AtomicBool,
}

impl Segmenter {
    /// An empty jieba to fill word by word (or, should the table not read, jieba's HMM alone).
    fn new() -> Self {
        let mut jieba = Jieba::empty();
        let words = match table() {
            Some(table) => {
                jieba.add_word(FILLER, Some(table.total as usize), Some("x"));
                table.words
            }
            None => 0,
        };
        Self {
            loaded: RwLock::new(Loaded { jieba, added: 0 }),
            present: (0..words.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            looked_up: AtomicUsize::new(0),
            whole: AtomicBool::new(words == 0),
        }
    }

    /// Loads the table's whole dictionary, as `Jieba::new` loads its own; nothing is looked
    /// up from then on.
    fn load_whole(&self) {
        let mut loaded = self.loaded.write().unwrap_or_else(|e| e.into_inner());
        if !self.whole.load(Ordering::Acquire)
            && let Some(table) = table()
        {
            self.add(&mut loaded, table, 0..table.words);
            self.whole.store(true, Ordering::Release);
        }
    }

    /// Adds the table's words `indices` that `loaded` lacks, and gives the filler what the
    /// words not added yet weigh.
    fn add(&self, loaded: &mut Loaded, table: &Table, indices: impl IntoIterator<Item = usize>) {
        for i in indices {
            if self.is_present(i) {
                continue;
            }
            // Table words are UTF-8: they were written from a `str`.
            let Ok(word) = std::str::from_utf8(table.word(i)) else {
                continue;
            };
            let freq = u32_at(table.freqs, i);
            let tag = table.tags.get(table.tag_ids[i] as usize).copied();
            loaded.jieba.add_word(word, Some(freq as usize), tag);
            loaded.added += u64::from(freq);
            self.present[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
        }
        // A word listed twice in jieba's dictionary counts in its total each time: the filler
        // keeps that difference once every word is in.
        let rest = table.total.saturating_sub(loaded.added);
        loaded
            .jieba
            .add_word(FILLER, Some(rest as usize), Some("x"));
    }

    fn is_present(&self, i: usize) -> bool {
        self.present[i / 64].load(Ordering::Acquire) & (1 << (i % 64)) != 0
    }

    /// jieba holding every dictionary word that occurs in `text`.
    fn for_text(&self, text: &str) -> RwLockReadGuard<'_, Loaded> {
        let read = || self.loaded.read().unwrap_or_else(|e| e.into_inner());
        let Some(table) = table().filter(|_| !self.whole.load(Ordering::Acquire)) else {
            return read();
        };
        if self.looked_up.fetch_add(text.len(), Ordering::Relaxed) > LOOKED_UP_BEFORE_WHOLE {
            self.load_whole();
            return read();
        }
        let mut missing = Vec::new();
        table.words_in(text, |i| {
            if !self.is_present(i) {
                missing.push(i);
            }
        });
        if missing.is_empty() {
            return read();
        }
        let mut loaded = self.loaded.write().unwrap_or_else(|e| e.into_inner());
        // The whole dictionary, loaded meanwhile, has every word.
        if self.whole.load(Ordering::Acquire) {
            drop(loaded);
            return read();
        }
        self.add(&mut loaded, table, missing);
        drop(loaded);
        read()
    }

    /// [`Jieba::cut`].
    pub fn cut<'a>(&self, text: &'a str, hmm: bool) -> Vec<Token<'a>> {
        self.for_text(text).jieba.cut(text, hmm)
    }

    /// [`Jieba::cut_for_search`].
    pub fn cut_for_search<'a>(&self, text: &'a str, hmm: bool) -> Vec<Token<'a>> {
        self.for_text(text).jieba.cut_for_search(text, hmm)
    }

    /// [`Jieba::tag`].
    pub fn tag<'a>(&self, text: &'a str, hmm: bool) -> Vec<Tagged<'a>> {
        let loaded = self.for_text(text);
        loaded
            .jieba
            .tag(text, hmm)
            .into_iter()
            .map(|t| Tagged {
                // The same span of `text`, borrowed from it rather than from jieba.
                word: text.get(t.byte_start..t.byte_end).unwrap_or_default(),
                tag: t.tag.to_string(),
            })
            .collect()
    }

    /// [`Jieba::has_word`].
    pub fn has_word(&self, word: &str) -> bool {
        self.for_text(word).jieba.has_word(word)
    }
}

/// The one segmenter of the process.
pub fn segmenter() -> &'static Segmenter {
    static SEGMENTER: OnceLock<Segmenter> = OnceLock::new();
    SEGMENTER.get_or_init(Segmenter::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What jieba with its whole dictionary makes of `text`, beside what a segmenter makes.
    fn assert_same(whole: &Jieba, lazy: &Segmenter, text: &str) {
        for hmm in [false, true] {
            assert_eq!(
                lazy.cut(text, hmm),
                whole.cut(text, hmm),
                "cut {hmm} {text:?}"
            );
            assert_eq!(
                lazy.cut_for_search(text, hmm),
                whole.cut_for_search(text, hmm),
                "cut_for_search {hmm} {text:?}"
            );
            let tags: Vec<(String, String)> = whole
                .tag(text, hmm)
                .into_iter()
                .map(|t| (t.word.to_string(), t.tag.to_string()))
                .collect();
            let lazy_tags: Vec<(String, String)> = lazy
                .tag(text, hmm)
                .into_iter()
                .map(|t| (t.word.to_string(), t.tag))
                .collect();
            assert_eq!(lazy_tags, tags, "tag {hmm} {text:?}");
        }
    }

    #[test]
    fn the_build_found_jiebas_dictionary() {
        let table = table().expect("build.rs wrote the dictionary table");
        assert!(table.words > 300_000, "{} words", table.words);
        let whole = Jieba::new();
        let lazy = Segmenter::new();
        for word in ["报销凭证", "年假", "C++", "AT&T", "中华人民共和国"] {
            assert_eq!(lazy.has_word(word), whole.has_word(word), "{word}");
        }
        assert!(lazy.has_word("报销"));
        assert!(!lazy.has_word("年假没休完"));
    }

    #[test]
    fn segments_as_the_whole_dictionary_does() {
        let whole = Jieba::new();
        let texts = [
            "年假没休完可以折算成工资吗？",
            "高铁票 报销凭证",
            "差旅费报销需要提供发票原件和行程单，出差超过3天需部门经理审批。",
            "How many days of annual leave do I get? C++ and c# at AT&T, WES-5.4.5 v3.6.3 50%",
            "Ｂ超和T恤，AA制；A股 5G网络 iPhone手机",
            "café naïve — “quoted” ‘text’\r\nline two\ttab",
            "讥䶯䶰䶱䶲䶳䶴䶵𦡦𠀀𪚥 中国人民银行行长",
            "南京市长江大桥欢迎您，我在北京天安门广场。",
            "",
            "的",
        ];
        // Each text alone (only its own words loaded), then all through one segmenter.
        for text in texts {
            assert_same(&whole, &Segmenter::new(), text);
        }
        let shared = Segmenter::new();
        for text in texts.iter().rev() {
            assert_same(&whole, &shared, text);
        }
        // Past LOOKED_UP_BEFORE_WHOLE bytes a segmenter switches to the whole dictionary.
        shared.load_whole();
        for text in texts {
            assert_same(&whole, &shared, text);
        }
    }

    #[test]
    fn segments_the_bundled_knowledge_as_the_whole_dictionary_does() {
        let whole = Jieba::new();
        let shared = Segmenter::new();
        // RAGTRAIL_SEGMENTER_CHECK_DIR: any other folder of texts, for a wider check by hand.
        let root = std::env::var_os("RAGTRAIL_SEGMENTER_CHECK_DIR").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge"),
            std::path::PathBuf::from,
        );
        let mut files = 0;
        for entry in walkdir::WalkDir::new(&root).into_iter().flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            files += 1;
            for line in text.lines() {
                assert_same(&whole, &shared, line);
            }
            assert_same(&whole, &Segmenter::new(), &text);
        }
        assert!(files >= 5, "{files} files read under {}", root.display());
    }
}
