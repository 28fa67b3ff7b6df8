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
    /// The text's length in characters on one line (whitespace runs as one space): whether
    /// the whole text is its own snippet, without reading it per call.
    one_line_len: usize,
    /// The text's sentences and their terms; only snippets of long texts need them, so they
    /// are computed on first use.
    sentences: OnceLock<Sentences>,
}

/// Where a term is in a chunk's term list ([`ChunkTerms::find`]): a search looks each keyword
/// term up once per hit and answers both "does the chunk hold it" and "which sentences" from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermAt(u32);

/// The sentences of a chunk's text ([`text::sentence_spans`]) and, for each distinct analysed
/// term of any of them, the sentences it occurs in: a snippet scores every sentence with one
/// lookup per keyword term instead of one per keyword term and sentence. The lists are kept by
/// the term's place in the chunk's own term list, so the lookup that decided whether the chunk
/// holds a term also finds its sentences.
#[derive(Debug)]
pub struct Sentences {
    spans: Box<[(usize, usize)]>,
    /// For the chunk's term at place `i`, the sentences it occurs in (ascending) are
    /// `in_sentences[starts[i]..starts[i + 1]]`.
    starts: Box<[u32]>,
    in_sentences: Box<[u32]>,
    /// Terms of a sentence analysed alone that the whole text's analysis did not give (rare:
    /// segmentation can depend on the neighbouring text), with their sentences.
    others: TermList,
    others_in: Box<[Box<[u32]>]>,
    /// Each sentence measured for a one-line snippet, so a warm call only adds them up.
    pieces: Box<[text::LinePiece]>,
}

impl Sentences {
    fn new(chunk_text: &str, chunk_terms: &TermList) -> Self {
        let spans = text::sentence_spans(chunk_text);
        let mut per_term: Vec<Vec<u32>> = vec![Vec::new(); chunk_terms.len()];
        let mut other_terms: Vec<(usize, String)> = Vec::new();
        for (i, &(a, b)) in spans.iter().enumerate() {
            for t in text::terms(&chunk_text[a..b]) {
                match chunk_terms.position(&t.text) {
                    Some(at) => {
                        let i = u32::try_from(i).unwrap_or(u32::MAX);
                        // A term repeated in one sentence is listed once.
                        if per_term[at].last() != Some(&i) {
                            per_term[at].push(i);
                        }
                    }
                    None => other_terms.push((i, t.text)),
                }
            }
        }
        let others = TermList::new(other_terms.iter().map(|(_, t)| t.clone()));
        let mut others_in: Vec<Vec<u32>> = vec![Vec::new(); others.len()];
        for (i, term) in &other_terms {
            if let Some(at) = others.position(term) {
                let i = u32::try_from(*i).unwrap_or(u32::MAX);
                if others_in[at].last() != Some(&i) {
                    others_in[at].push(i);
                }
            }
        }
        let mut starts = Vec::with_capacity(per_term.len() + 1);
        let mut in_sentences = Vec::new();
        for list in &per_term {
            starts.push(u32::try_from(in_sentences.len()).unwrap_or(u32::MAX));
            in_sentences.extend_from_slice(list);
        }
        starts.push(u32::try_from(in_sentences.len()).unwrap_or(u32::MAX));
        let pieces = spans
            .iter()
            .map(|&(a, b)| text::LinePiece::of(&chunk_text[a..b]))
            .collect();
        Self {
            spans: spans.into_boxed_slice(),
            starts: starts.into_boxed_slice(),
            in_sentences: in_sentences.into_boxed_slice(),
            others,
            others_in: others_in.into_iter().map(Vec::into_boxed_slice).collect(),
            pieces,
        }
    }

    /// Each sentence's byte range in the text, in order.
    pub fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }

    /// Each sentence (in [`Sentences::spans`] order) measured as a piece of one line.
    pub fn pieces(&self) -> &[text::LinePiece] {
        &self.pieces
    }

    /// For each sentence (in [`Sentences::spans`] order), how many of the distinct terms
    /// `wanted` it holds; `found` holds each wanted term's [`ChunkTerms::find`] of the chunk
    /// these sentences are of, in the same order.
    pub fn match_counts_found(&self, wanted: &[&str], found: &[Option<TermAt>]) -> Vec<usize> {
        let mut counts = vec![0; self.spans.len()];
        for (w, at) in wanted.iter().zip(found) {
            let sentences: &[u32] = match at {
                Some(TermAt(at)) => {
                    let at = *at as usize;
                    match (self.starts.get(at), self.starts.get(at + 1)) {
                        (Some(&a), Some(&b)) => &self.in_sentences[a as usize..b as usize],
                        _ => &[],
                    }
                }
                None if self.others.len() == 0 => &[],
                None => self
                    .others
                    .position(w)
                    .map_or(&[][..], |at| &self.others_in[at]),
            };
            for &i in sentences {
                if let Some(c) = counts.get_mut(i as usize) {
                    *c += 1;
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
            one_line_len: text::LinePiece::joined_len([text::LinePiece::of(&chunk.text)]),
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

    /// Where the analysed term `term` is among the titlePath's and the text's terms, if there.
    pub fn find(&self, term: &str) -> Option<TermAt> {
        self.terms
            .position(term)
            .map(|at| TermAt(u32::try_from(at).unwrap_or(u32::MAX)))
    }

    /// The text's length in characters on one line (whitespace runs as one space).
    pub fn one_line_len(&self) -> usize {
        self.one_line_len
    }

    /// The lowercased `titlePath\ntext`.
    pub fn lowercase(&self) -> &str {
        &self.lowercase
    }

    /// The sentences of `chunk_text` (the text these terms were built from) and their terms.
    pub fn sentences(&self, chunk_text: &str) -> &Sentences {
        self.sentences
            .get_or_init(|| Sentences::new(chunk_text, &self.terms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces of text whose segmentation can depend on their neighbours: CJK runs (bigrams
    /// across a sentence end), Latin words with stops, whitespace and newlines.
    const PIECES: [&str; 14] = [
        "报销",
        "凭证",
        "高铁票",
        "。",
        "，",
        "年假",
        "hotel",
        "Receipts",
        ". ",
        "? ",
        "\n",
        " ",
        "e.g.",
        "3.5%",
    ];

    proptest! {
        /// Each sentence's count of the wanted terms, from the lists kept by the chunk's term
        /// places, is the count of analysing each sentence alone.
        #[test]
        fn sentence_counts_are_those_of_each_sentence_analysed_alone(
            picks in prop::collection::vec(0usize..14, 0..40),
            extra in prop::collection::vec(0usize..14, 0..4),
        ) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            let chunk = Chunk {
                id: "c_0000000000000001".to_string(),
                source: "travel.md".to_string(),
                title_path: "Travel".to_string(),
                headings: Vec::new(),
                source_uri: "travel.md".to_string(),
                ordinal: 0,
                text: text.clone(),
                content_hash: String::new(),
                tenant: "default".to_string(),
                roles: Vec::new(),
                version: None,
                updated: None,
                status: crate::knowledge::DocStatus::Active,
            };
            let cached = ChunkTerms::new(&chunk);
            let sentences = cached.sentences(&text);
            // Every term of any sentence, of the title, and a few of other texts.
            let mut wanted: Vec<String> = text::sentence_spans(&text)
                .iter()
                .flat_map(|&(a, b)| text::terms(&text[a..b]))
                .chain(text::terms("Travel"))
                .chain(extra.iter().flat_map(|&i| text::terms(PIECES[i])))
                .map(|t| t.text)
                .collect();
            wanted.push("no-such-term".to_string());
            wanted.sort();
            wanted.dedup();
            let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
            let found: Vec<_> = wanted.iter().map(|w| cached.find(w)).collect();
            let alone: Vec<usize> = sentences
                .spans()
                .iter()
                .map(|&(a, b)| {
                    let terms: std::collections::HashSet<String> =
                        text::terms(&text[a..b]).into_iter().map(|t| t.text).collect();
                    wanted.iter().filter(|w| terms.contains(**w)).count()
                })
                .collect();
            prop_assert_eq!(sentences.match_counts_found(&wanted, &found), alone.clone());
            // Terms the chunk's list lacks (none with today's analyser) are found on their own:
            // here every term is one.
            let apart = Sentences::new(&text, &TermList::default());
            let none = vec![None; wanted.len()];
            prop_assert_eq!(apart.match_counts_found(&wanted, &none), alone);
        }
    }
}
