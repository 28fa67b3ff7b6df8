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
    /// [`text::sentence_spans`] order), sorted; only snippets of long
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

    /// How many distinct analysed terms the titlePath and the text have.
    pub fn term_count(&self) -> usize {
        self.terms.len()
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
            text::sentence_spans(chunk_text)
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
