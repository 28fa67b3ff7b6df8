//! Each chunk's analysed terms, computed once and kept beside the chunk record, so that a
//! `searchDocs` call decides key-term coverage and picks snippet sentences with set lookups
//! instead of running jieba and the stemmer over every hit's full text again (3–4 ms a call
//! on SciFact abstracts). The analysis is exactly the one the per-call code did, so results do
//! not change; it is computed on a chunk's first hit (opening a 100k-chunk store stays fast)
//! and lives as long as the store generation that holds the chunk.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use rustc_hash::FxBuildHasher;

use crate::knowledge::Chunk;
use crate::text;

/// Distinct analysed terms ordered by a fixed hash of each (then by the term), so a lookup
/// binary-searches integers and compares strings only where the hash matches: string
/// comparisons were a quarter of a warm `searchDocs` call on SciFact.
#[derive(Debug, Default)]
struct TermList {
    hashes: Box<[u64]>,
    terms: Box<[Box<str>]>,
}

fn term_hash(term: &str) -> u64 {
    FxBuildHasher.hash_one(term)
}

impl TermList {
    /// The distinct terms among `terms`.
    fn new(terms: impl Iterator<Item = String>) -> Self {
        let mut v: Vec<(u64, Box<str>)> =
            terms.map(|t| (term_hash(&t), t.into_boxed_str())).collect();
        v.sort_unstable();
        v.dedup();
        let (hashes, terms) = v.into_iter().unzip::<_, _, Vec<_>, Vec<_>>();
        Self {
            hashes: hashes.into_boxed_slice(),
            terms: terms.into_boxed_slice(),
        }
    }

    fn len(&self) -> usize {
        self.terms.len()
    }

    /// Where `term` is in the list.
    fn position(&self, term: &str) -> Option<usize> {
        let hash = term_hash(term);
        let first = self.hashes.partition_point(|&h| h < hash);
        (first..self.hashes.len())
            .take_while(|&i| self.hashes[i] == hash)
            .find(|&i| &*self.terms[i] == term)
    }
}

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
    /// Every distinct term of any sentence.
    terms: TermList,
    /// For each of `terms`, the sentences it occurs in, ascending.
    postings: Box<[Box<[u32]>]>,
    /// Each sentence measured for a one-line snippet, so a warm call only adds them up.
    pieces: Box<[text::LinePiece]>,
}

impl Sentences {
    fn new(chunk_text: &str) -> Self {
        let spans = text::sentence_spans(chunk_text);
        let analysed: Vec<Vec<String>> = spans
            .iter()
            .map(|&(a, b)| {
                text::terms(&chunk_text[a..b])
                    .into_iter()
                    .map(|t| t.text)
                    .collect()
            })
            .collect();
        let terms = TermList::new(analysed.iter().flatten().cloned());
        let mut postings = vec![Vec::new(); terms.len()];
        for (i, sentence) in analysed.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for term in sentence {
                if let Some(at) = terms.position(term) {
                    // A term repeated in one sentence is listed once.
                    if postings[at].last() != Some(&i) {
                        postings[at].push(i);
                    }
                }
            }
        }
        let pieces = spans
            .iter()
            .map(|&(a, b)| text::LinePiece::of(&chunk_text[a..b]))
            .collect();
        Self {
            spans: spans.into_boxed_slice(),
            terms,
            postings: postings.into_iter().map(Vec::into_boxed_slice).collect(),
            pieces,
        }
    }

    /// Each sentence (in [`Sentences::spans`] order) measured as a piece of one line.
    pub fn pieces(&self) -> &[text::LinePiece] {
        &self.pieces
    }

    /// Each sentence's byte range in the text, in order.
    pub fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }

    /// For each sentence (in [`Sentences::spans`] order), how many of the distinct terms
    /// `wanted` it holds.
    pub fn match_counts<'a>(&self, wanted: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
        let mut counts = vec![0; self.spans.len()];
        for w in wanted {
            if let Some(at) = self.terms.position(w) {
                for &i in &self.postings[at] {
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
        let terms = TermList::new(
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
        self.terms.position(term).is_some()
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
