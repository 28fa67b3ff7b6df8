//! A Chinese–English glossary for questions asked in one language about passages written in
//! the other: "paternity leave" is 陪产假 in a Chinese policy, and no English passage says it.
//!
//! It reads a dictionary in the CC-CEDICT line format (`繁體 简体 [pin1 yin1] /sense/sense/`,
//! `#` comments), plain or gzip-compressed, as `ragtrail model install cc-cedict` keeps it. The
//! file is read on the first lookup, not when the engine opens: most questions never need it.
//!
//! A sense is matched whole, never by a word inside it: "leave" alone names dozens of entries,
//! "paternity leave" one. Parenthesised glosses in a sense (`(human resources) internal
//! referral`) are dropped before matching, and English is compared by its analysed terms, so a
//! plural asks for the same entry as its singular.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{is_cjk, terms};

/// Senses longer than this (in words) are explanations, not names for a thing.
const MAX_SENSE_WORDS: usize = 4;

/// Why the glossary file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GlossaryError {
    #[error("cannot read the glossary {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the glossary {path} holds no dictionary entries")]
    Empty { path: PathBuf },
}

/// One dictionary entry: the simplified headword and its senses.
struct Entry {
    word: String,
    /// Each sense as written (parenthesised glosses dropped), and lowercased. Senses are
    /// analysed only when a lookup's first term could be in them: analysing every sense of
    /// the dictionary up front would cost more than the rest of a CLI run.
    senses: Vec<(String, String)>,
}

/// A bilingual glossary, read from its file on first use.
pub struct Glossary {
    path: PathBuf,
    entries: OnceLock<Result<Vec<Entry>, String>>,
}

impl Glossary {
    /// The glossary in `path`, read when first asked.
    pub fn open(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            entries: OnceLock::new(),
        }
    }

    /// A glossary from dictionary text at hand (tests, or a caller that read it already).
    pub fn from_text(text: &str) -> Self {
        let entries = OnceLock::new();
        let _ = entries.set(Ok(parse(text)));
        Self {
            path: PathBuf::new(),
            entries,
        }
    }

    /// Reads the file now: for a caller that wants a broken file reported up front.
    pub fn check(&self) -> Result<usize, GlossaryError> {
        match self.entries() {
            Ok([]) => Err(GlossaryError::Empty {
                path: self.path.clone(),
            }),
            Ok(e) => Ok(e.len()),
            Err(message) => Err(GlossaryError::Read {
                path: self.path.clone(),
                source: std::io::Error::other(message.clone()),
            }),
        }
    }

    fn entries(&self) -> Result<&[Entry], &String> {
        self.entries
            .get_or_init(|| {
                let text = read(&self.path).map_err(|e| e.to_string())?;
                Ok(parse(&text))
            })
            .as_ref()
            .map(Vec::as_slice)
    }

    /// Chinese words whose sense is `english` (a word or a phrase), in dictionary order, without
    /// repeats; empty for a CJK phrase or when the file cannot be read.
    pub fn chinese_for(&self, english: &str) -> Vec<String> {
        if english.chars().any(is_cjk) {
            return Vec::new();
        }
        let wanted = analysed(english);
        // A stem's first letters are the word's ("happi" of "happy"): a sense without them
        // cannot analyse to the phrase.
        let Some(clue) = wanted
            .split(' ')
            .next()
            .map(|t| t.chars().take(4).collect::<String>())
            .filter(|c| !c.is_empty())
        else {
            return Vec::new();
        };
        let Ok(entries) = self.entries() else {
            return Vec::new();
        };
        let mut found: Vec<String> = Vec::new();
        for e in entries {
            let names =
                |(_, lower): &(String, String)| lower.contains(&clue) && analysed(lower) == wanted;
            if e.senses.iter().any(names) && !found.contains(&e.word) {
                found.push(e.word.clone());
            }
        }
        found
    }

    /// The English senses of the Chinese word `chinese`, as written, in dictionary order,
    /// without repeats.
    pub fn english_for(&self, chinese: &str) -> Vec<String> {
        let Ok(entries) = self.entries() else {
            return Vec::new();
        };
        let mut found: Vec<String> = Vec::new();
        for e in entries.iter().filter(|e| e.word == chinese) {
            for (sense, _) in &e.senses {
                if !found.contains(sense) {
                    found.push(sense.clone());
                }
            }
        }
        found
    }
}

fn read(path: &Path) -> Result<String, std::io::Error> {
    let bytes = std::fs::read(path)?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(bytes.as_slice()).read_to_string(&mut text)?;
        Ok(text)
    } else {
        String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}

/// English analysed as the index analyses it (lowercased, stop words dropped, stemmed), the
/// terms joined by a space.
fn analysed(english: &str) -> String {
    terms(english)
        .into_iter()
        .map(|t| t.text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The entries of dictionary text; lines that are not entries are skipped.
fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(entry)
        .collect()
}

/// `繁體 简体 [pin1 yin1] /sense/sense/` → the simplified word and its senses that name
/// something (not "surname …", "variant of …", "CL:…", "see …", "abbr. …", not a long
/// explanation).
fn entry(line: &str) -> Option<Entry> {
    let mut fields = line.splitn(3, ' ');
    let _traditional = fields.next()?;
    let word = fields.next()?.to_string();
    let rest = fields.next()?;
    let senses_at = rest.find('/')?;
    let senses: Vec<(String, String)> = rest[senses_at..]
        .split('/')
        .map(|s| without_parentheses(s).trim().to_string())
        .filter(|s| {
            !s.is_empty()
                && s.split_whitespace().count() <= MAX_SENSE_WORDS
                && !s.contains(['|', '[', ':'])
                && ![
                    "surname ",
                    "variant of",
                    "see ",
                    "abbr. ",
                    "old variant",
                    "used in",
                ]
                .iter()
                .any(|p| s.starts_with(p))
        })
        .map(|s| {
            let lower = s.to_lowercase();
            (s, lower)
        })
        .collect();
    (!senses.is_empty() && word.chars().any(is_cjk)).then_some(Entry { word, senses })
}

/// `sense` without its parenthesised glosses: "(human resources) internal referral" →
/// " internal referral".
fn without_parentheses(sense: &str) -> String {
    let mut out = String::with_capacity(sense.len());
    let mut depth = 0usize;
    for c in sense.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries written for these tests in the dictionary's line format.
    const SAMPLE: &str = "# a comment line\n\
        陪產假 陪产假 [pei2 chan3 jia4] /paternity leave/\n\
        產假 产假 [chan3 jia4] /maternity leave/\n\
        哺乳 哺乳 [bu3 ru3] /breastfeeding/to suckle/to nurse/\n\
        假 假 [jia4] /vacation/leave of absence/\n\
        內推 内推 [nei4 tui1] /(human resources) internal referral; employee referral/\n\
        王 王 [Wang2] /surname Wang/\n\
        客服 客服 [ke4 fu2] /customer service/\n\
        not an entry\n";

    #[test]
    fn an_english_phrase_finds_the_chinese_word_whose_sense_it_is_whole() {
        let g = Glossary::from_text(SAMPLE);
        assert_eq!(g.chinese_for("paternity leave"), ["陪产假"]);
        // Analysed like the index: case and plural forms ask for the same entry.
        assert_eq!(g.chinese_for("Paternity Leaves"), ["陪产假"]);
        assert_eq!(g.chinese_for("breastfeeding"), ["哺乳"]);
        // A word inside a sense is not the sense: "leave" alone names no entry here.
        assert!(g.chinese_for("leave").is_empty());
        assert!(g.chinese_for("paternity").is_empty());
        // Parenthesised glosses are dropped; a "surname" sense names nothing.
        assert!(g.chinese_for("human resources").is_empty());
        assert!(g.chinese_for("wang").is_empty());
        assert!(g.chinese_for("陪产假").is_empty());
    }

    #[test]
    fn a_chinese_word_gives_its_senses_as_written() {
        let g = Glossary::from_text(SAMPLE);
        assert_eq!(g.english_for("客服"), ["customer service"]);
        assert_eq!(
            g.english_for("哺乳"),
            ["breastfeeding", "to suckle", "to nurse"]
        );
        assert!(g.english_for("王").is_empty());
        assert!(g.english_for("年假").is_empty());
    }

    #[test]
    fn a_gzip_file_is_read_on_first_use_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dict.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, SAMPLE.as_bytes()).expect("write");
        std::fs::write(&path, gz.finish().expect("gzip")).expect("write file");
        let g = Glossary::open(&path);
        assert_eq!(g.check().expect("readable"), 6);
        assert_eq!(g.chinese_for("maternity leave"), ["产假"]);

        let missing = Glossary::open(&dir.path().join("absent.gz"));
        assert!(matches!(missing.check(), Err(GlossaryError::Read { .. })));
        assert!(missing.chinese_for("paternity leave").is_empty());
        let empty_path = dir.path().join("empty.txt");
        std::fs::write(&empty_path, "# nothing\n").expect("write");
        assert!(matches!(
            Glossary::open(&empty_path).check(),
            Err(GlossaryError::Empty { .. })
        ));
    }
}
