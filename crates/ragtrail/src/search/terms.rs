//! Each chunk's analysed terms, computed once and kept beside the chunk record, so that a
//! `searchDocs` call decides key-term coverage and picks snippet sentences with set lookups
//! instead of running jieba and the stemmer over every hit's full text again (3–4 ms a call
//! on SciFact abstracts). The analysis is exactly the one the per-call code did, so results do
//! not change; it is computed on a chunk's first hit (opening a 100k-chunk store stays fast)
//! and lives as long as the store generation that holds the chunk.

use std::sync::OnceLock;

use crate::knowledge::Chunk;
use crate::text;

/// Distinct analysed terms, sorted (binary-searched).
type TermList = Box<[Box<str>]>;

/// A chunk's analysed terms.
#[derive(Debug)]
pub struct ChunkTerms {
    /// Distinct analysed terms of the titlePath and of the text, sorted.
    terms: TermList,
    /// `titlePath`, newline, text, lowercased: CJK key terms are matched as written.
    lowercase: Box<str>,
    /// Distinct analysed terms of each sentence of the text (in
    /// [`sentence_spans`](super::snippet::sentence_spans) order), sorted; only snippets of long
    /// texts need them, so they are computed on first use.
    sentences: OnceLock<Box<[TermList]>>,
}

impl ChunkTerms {
    /// Analyses `chunk` as `searchDocs` does: the titlePath and the text separately.
    pub fn new(chunk: &Chunk) -> Self {
        let terms = sorted_distinct(
            text::terms(&chunk.title_path)
                .into_iter()
                .chain(text::terms(&chunk.text))
                .map(|t| t.text),
        );
        Self {
            terms,
            lowercase: format!("{}\n{}", chunk.title_path, chunk.text)
                .to_lowercase()
                .into_boxed_str(),
            sentences: OnceLock::new(),
        }
    }

    /// Whether the titlePath or the text has the analysed term `term`.
    pub fn contains(&self, term: &str) -> bool {
        self.terms.binary_search_by(|t| (**t).cmp(term)).is_ok()
    }

    /// The lowercased `titlePath\ntext`.
    pub fn lowercase(&self) -> &str {
        &self.lowercase
    }

    /// How many of `wanted` occur in sentence `i` of `chunk_text` (the text these terms were
    /// built from); 0 for a sentence index out of range.
    pub fn sentence_matches<'a>(
        &self,
        chunk_text: &str,
        i: usize,
        wanted: impl IntoIterator<Item = &'a String>,
    ) -> usize {
        let sentences = self.sentences.get_or_init(|| {
            super::snippet::sentence_spans(chunk_text)
                .into_iter()
                .map(|(a, b)| {
                    sorted_distinct(text::terms(&chunk_text[a..b]).into_iter().map(|t| t.text))
                })
                .collect()
        });
        let Some(terms) = sentences.get(i) else {
            return 0;
        };
        wanted
            .into_iter()
            .filter(|w| terms.binary_search_by(|t| (**t).cmp(w.as_str())).is_ok())
            .count()
    }
}

fn sorted_distinct(terms: impl Iterator<Item = String>) -> TermList {
    let mut v: Vec<Box<str>> = terms.map(String::into_boxed_str).collect();
    v.sort_unstable();
    v.dedup();
    v.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::Path;

    use super::*;
    use crate::knowledge::{ScanOptions, scan};
    use crate::search::snippet::{snippet, snippet_by};
    use crate::search::sufficiency::{covered, covered_by, key_terms};

    /// The cached terms give the same coverage and snippets as analysing the text per call,
    /// on every chunk of the bundled knowledge and with keywords drawn from other chunks.
    #[test]
    fn cached_terms_match_per_call_analysis_on_the_bundled_knowledge() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge");
        let report = scan(&root, &ScanOptions::default()).expect("bundled knowledge");
        assert!(report.chunks.len() > 100);
        let n = report.chunks.len();
        for (i, chunk) in report.chunks.iter().enumerate() {
            let cached = ChunkTerms::new(chunk);
            let all: HashSet<String> = text::terms(&chunk.title_path)
                .into_iter()
                .chain(text::terms(&chunk.text))
                .map(|t| t.text)
                .collect();
            assert!(all.iter().all(|t| cached.contains(t)));
            assert_eq!(cached.terms.len(), all.len());
            let lowercase = format!("{}\n{}", chunk.title_path, chunk.text).to_lowercase();
            assert_eq!(cached.lowercase(), lowercase);
            // Keywords: this chunk's title, plus words of two other chunks (mostly misses).
            let other = &report.chunks[(i * 7 + 3) % n];
            let keywords: Vec<String> = [&chunk.title_path, &other.title_path, &other.text]
                .iter()
                .flat_map(|s| {
                    text::terms(s)
                        .into_iter()
                        .take(3)
                        .map(|t| s[t.start..t.end].to_string())
                })
                .collect();
            let keys = key_terms(&keywords, &|_| 1, 10);
            assert_eq!(
                covered_by(&keys, |t| cached.contains(t), cached.lowercase()),
                covered(&keys, &all, &lowercase)
            );
            let wanted: HashSet<String> = keys.iter().flat_map(|k| k.parts.clone()).collect();
            for max in [40, 120, 240] {
                assert_eq!(
                    snippet_by(&chunk.text, max, |s, _| cached.sentence_matches(
                        &chunk.text,
                        s,
                        &wanted
                    )),
                    snippet(&chunk.text, &wanted, max),
                    "chunk {i}, {max} chars"
                );
            }
        }
    }
}
