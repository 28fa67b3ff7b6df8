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
    /// The text's sentences and their terms; only snippets of long texts need them, so they
    /// are computed on first use.
    sentences: OnceLock<Sentences>,
}

/// The sentences of a chunk's text ([`text::sentence_spans`]) and, for each distinct analysed
/// term of any of them, the sentences it occurs in: a snippet scores every sentence with one
/// lookup per keyword term instead of one per keyword term and sentence.
#[derive(Debug)]
pub struct Sentences {
    spans: Box<[(usize, usize)]>,
    /// Sorted by term; each term's sentence indices ascending.
    postings: Box<[(Box<str>, Box<[u32]>)]>,
}

impl Sentences {
    fn new(chunk_text: &str) -> Self {
        let spans = text::sentence_spans(chunk_text);
        let mut pairs: Vec<(Box<str>, u32)> = Vec::new();
        for (i, &(a, b)) in spans.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for term in sorted_distinct(text::terms(&chunk_text[a..b]).into_iter().map(|t| t.text)) {
                pairs.push((term, i));
            }
        }
        pairs.sort_unstable();
        let mut postings: Vec<(Box<str>, Vec<u32>)> = Vec::new();
        for (term, i) in pairs {
            match postings.last_mut() {
                Some((last, list)) if *last == term => list.push(i),
                _ => postings.push((term, vec![i])),
            }
        }
        Self {
            spans: spans.into_boxed_slice(),
            postings: postings
                .into_iter()
                .map(|(t, list)| (t, list.into_boxed_slice()))
                .collect(),
        }
    }

    /// Each sentence's byte range in the text, in order.
    pub fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }

    /// For each sentence (in [`Sentences::spans`] order), how many of the distinct terms
    /// `wanted` it holds.
    pub fn match_counts<'a>(&self, wanted: impl IntoIterator<Item = &'a String>) -> Vec<usize> {
        let mut counts = vec![0; self.spans.len()];
        for w in wanted {
            if let Ok(at) = self
                .postings
                .binary_search_by(|(t, _)| (**t).cmp(w.as_str()))
            {
                for &i in &self.postings[at].1 {
                    if let Some(c) = counts.get_mut(i as usize) {
                        *c += 1;
                    }
                }
            }
        }
        counts
    }
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

    /// The sentences of `chunk_text` (the text these terms were built from) and their terms.
    pub fn sentences(&self, chunk_text: &str) -> &Sentences {
        self.sentences.get_or_init(|| Sentences::new(chunk_text))
    }
}

fn sorted_distinct(terms: impl Iterator<Item = String>) -> TermList {
    let mut v: Vec<Box<str>> = terms.map(String::into_boxed_str).collect();
    v.sort_unstable();
    v.dedup();
    v.into_boxed_slice()
}
