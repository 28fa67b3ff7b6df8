//! The BM25 leg's own scorer for a query whose every chunk is in scope (one tenant, nothing
//! role-restricted or superseded: the common case). It gives exactly the scores and the top
//! list tantivy's boolean union of term queries gives under the scope's statistics, without
//! what that machinery costs per query and per clause (a weight with its own 256-entry length
//! table and explanation strings per term and field, a union window per segment, a dynamic
//! call per document): the length tables are made once per searcher generation, and each
//! clause's postings are added, clause after clause, into one score per document.
//!
//! Exactness rests on three things tantivy does and this does alike: a term's score is
//! `weight · tf / (tf + table[length id])` with `weight = idf · (1 + k1) · boost`, in `f32`; a
//! document's score is the sum of its clauses' scores in clause order, starting from 0 (the
//! union adds them in that order); and the top list keeps the best scores, ties to the lower
//! (segment, document) address.

use std::sync::Arc;

use tantivy::InvertedIndexReader;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::TermInfo;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Score, Term};

/// tantivy's BM25 constants.
const K1: Score = 1.2;
const B: Score = 0.75;

/// Term frequencies whose factor is tabulated; a term written more often in one text is rare.
const TABULATED_TF: usize = 8;

/// A field's length terms over one scope, tabulated once per searcher generation: per length
/// id, `k1 · (1 - b + b · length / average)` as tantivy tabulates it, and the term-frequency
/// factor `tf / (tf + norm)` for a term written up to [`TABULATED_TF`] times (nearly every
/// posting), so that those need no division per query.
pub(super) struct LengthTable {
    norms: [Score; 256],
    factors: [[Score; 256]; TABULATED_TF],
}

impl LengthTable {
    /// `tf / (tf + norm)` of a term written `tf` times in a text of length id `id`.
    #[inline]
    fn factor(&self, tf: u32, id: u8) -> Score {
        match self.factors.get((tf as usize).wrapping_sub(1)) {
            Some(row) => row[usize::from(id)],
            None => {
                let tf = tf as Score;
                tf / (tf + self.norms[usize::from(id)])
            }
        }
    }
}

/// The length table of a field whose average length (in its scope) is `average`.
pub(super) fn length_table(average: Score) -> LengthTable {
    let mut norms = [0.0; 256];
    for (id, slot) in norms.iter_mut().enumerate() {
        let length = FieldNormReader::id_to_fieldnorm(id as u8) as Score;
        // Written as tantivy writes it, so the same rounding.
        *slot = K1 * (1.0 - B + B * length / average);
    }
    // The same f32 operations as the factor computed per posting, so the same values.
    let factors = std::array::from_fn(|i| {
        let tf = (i + 1) as Score;
        norms.map(|norm| tf / (tf + norm))
    });
    LengthTable { norms, factors }
}

/// tantivy's BM25 idf of a term in `doc_freq` of `docs` documents.
fn idf(doc_freq: u64, docs: u64) -> Score {
    let x = (docs.saturating_sub(doc_freq) as Score + 0.5) / (doc_freq as Score + 0.5);
    (1.0 + x).ln()
}

/// One scored clause: a term in one field, its boost, and the field's length table.
pub(super) struct Clause<'t> {
    pub term: Term,
    pub boost: Score,
    pub lengths: &'t LengthTable,
}

/// The best `limit` documents of `clauses` (their scores summed per document), best first,
/// ties to the lower address, deleted documents left out. `docs` is the scope's document
/// count; `doc_freq` counts a term's documents in scope when some segment has deletions (else
/// the terms' postings count them, deleted ones being none).
pub(super) fn top(
    searcher: &tantivy::Searcher,
    clauses: &[Clause<'_>],
    docs: u64,
    doc_freq: &dyn Fn(&Term) -> tantivy::Result<u64>,
    limit: usize,
) -> tantivy::Result<Vec<(Score, DocAddress)>> {
    let segments = searcher.segment_readers();
    // The clauses' fields (a few), and per segment each field's terms and lengths, opened once.
    let mut fields: Vec<Field> = Vec::new();
    let slots: Vec<usize> = clauses
        .iter()
        .map(|c| {
            let field = c.term.field();
            fields.iter().position(|&f| f == field).unwrap_or_else(|| {
                fields.push(field);
                fields.len() - 1
            })
        })
        .collect();
    let mut readers: Vec<Vec<(Arc<InvertedIndexReader>, FieldNormReader)>> =
        Vec::with_capacity(segments.len());
    for segment in segments {
        let mut row = Vec::with_capacity(fields.len());
        for &field in &fields {
            let norms = match segment.fieldnorms_readers().get_field(field)? {
                Some(norms) => norms,
                None => FieldNormReader::constant(segment.max_doc(), 1),
            };
            row.push((segment.inverted_index(field)?, norms));
        }
        readers.push(row);
    }
    // Each clause's term in each segment, looked up once: for its postings and its count.
    let mut infos: Vec<Vec<Option<TermInfo>>> = Vec::with_capacity(segments.len());
    for row in &readers {
        let mut found = Vec::with_capacity(clauses.len());
        for (clause, &slot) in clauses.iter().zip(&slots) {
            found.push(row[slot].0.get_term_info(&clause.term)?);
        }
        infos.push(found);
    }
    let deletions = segments.iter().any(|s| s.has_deletes());
    let mut weights = Vec::with_capacity(clauses.len());
    for (c, clause) in clauses.iter().enumerate() {
        let n = if deletions {
            doc_freq(&clause.term)?
        } else {
            infos
                .iter()
                .map(|row| row[c].as_ref().map_or(0, |i| u64::from(i.doc_freq)))
                .sum()
        };
        let weight = idf(n, docs) * (1.0 + K1);
        // tantivy multiplies by a boost only when it is not 1.
        weights.push(if clause.boost == 1.0 {
            weight
        } else {
            weight * clause.boost
        });
    }
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut best = Best::new(limit);
    SCRATCH.with_borrow_mut(|scratch| -> tantivy::Result<()> {
        let Scratch { scores, touched } = scratch;
        for (ord, segment) in segments.iter().enumerate() {
            // A clause's score is positive (idf, boosts and the tf factor are), so a document
            // still at 0 has not been touched yet. (An idf rounds to 0 only for a term in every
            // one of millions of chunks: then a document may be listed twice, made once below.)
            scores.clear();
            scores.resize(segment.max_doc() as usize, 0.0);
            touched.clear();
            for (c, clause) in clauses.iter().enumerate() {
                let Some(info) = &infos[ord][c] else {
                    continue;
                };
                let (inverted, norms) = &readers[ord][slots[c]];
                let mut block = inverted
                    .read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
                let weight = weights[c];
                let table = clause.lengths;
                loop {
                    let (block_docs, freqs) = (block.docs(), block.freqs());
                    if block_docs.is_empty() {
                        break;
                    }
                    for (&doc, &tf) in block_docs.iter().zip(freqs) {
                        let factor = table.factor(tf, norms.fieldnorm_id(doc));
                        let score = &mut scores[doc as usize];
                        if *score == 0.0 {
                            touched.push(doc);
                        }
                        *score += weight * factor;
                    }
                    block.advance();
                }
            }
            if weights.contains(&0.0) {
                touched.sort_unstable();
                touched.dedup();
            }
            let alive = segment.alive_bitset();
            for &doc in touched.iter() {
                if alive.is_some_and(|a| a.is_deleted(doc)) {
                    continue;
                }
                best.offer(Ranked(
                    scores[doc as usize],
                    DocAddress::new(ord as u32, doc),
                ));
            }
        }
        Ok(())
    })?;
    Ok(best
        .into_sorted()
        .into_iter()
        .map(|Ranked(score, addr)| (score, addr))
        .collect())
}

/// A query's per-document scores and the documents it touched, kept per thread between
/// queries: a segment of 100k chunks would otherwise cost a fresh 400 KB of zeroed pages each
/// time. A thread keeps at most 8 bytes per chunk of the largest segment it searched.
#[derive(Default)]
struct Scratch {
    scores: Vec<Score>,
    touched: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// The best `limit` documents offered, kept by selection rather than a heap: offers gather up
/// to twice the limit, then the best `limit` are selected and the worst of them becomes the bar
/// the next offers must beat, one comparison each (a heap would re-order itself for every
/// document that beats its worst).
struct Best {
    limit: usize,
    kept: Vec<Ranked>,
    bar: Option<Ranked>,
    /// The bar's score, or -∞ while there is no bar.
    bar_score: Score,
}

impl Best {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            // Room made as it fills: a caller's depth may be far more than the matches.
            kept: Vec::with_capacity(limit.min(1024) * 2),
            bar: None,
            bar_score: Score::NEG_INFINITY,
        }
    }

    #[inline]
    fn offer(&mut self, hit: Ranked) {
        // Most offers lose on the score alone.
        if hit.0 < self.bar_score || self.bar.is_some_and(|bar| hit >= bar) {
            return;
        }
        self.kept.push(hit);
        if self.kept.len() >= self.limit.saturating_mul(2) {
            self.keep_best();
            self.bar = self.kept.last().copied();
            self.bar_score = self.bar.map_or(Score::NEG_INFINITY, |bar| bar.0);
        }
    }

    /// Keeps the best `limit` of those gathered, in no order.
    fn keep_best(&mut self) {
        if self.kept.len() > self.limit {
            self.kept.select_nth_unstable(self.limit - 1);
            self.kept.truncate(self.limit);
        }
    }

    fn into_sorted(mut self) -> Vec<Ranked> {
        self.keep_best();
        self.kept.sort_unstable();
        self.kept
    }
}

/// A scored document, ordered best first: higher score, then lower address (tantivy's order).
#[derive(Clone, Copy)]
struct Ranked(Score, DocAddress);

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Ranked {}
