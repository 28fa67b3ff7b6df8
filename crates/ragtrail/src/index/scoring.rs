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

use std::collections::BinaryHeap;
use std::sync::Arc;

use tantivy::InvertedIndexReader;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::TermInfo;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Score, Term};

/// tantivy's BM25 constants.
const K1: Score = 1.2;
const B: Score = 0.75;

/// `k1 · (1 - b + b · length / average)` per length id of a field, as tantivy tabulates it.
pub(super) type LengthTable = [Score; 256];

/// The length table of a field whose average length (in its scope) is `average`.
pub(super) fn length_table(average: Score) -> LengthTable {
    let mut table = [0.0; 256];
    for (id, slot) in table.iter_mut().enumerate() {
        let length = FieldNormReader::id_to_fieldnorm(id as u8) as Score;
        // Written as tantivy writes it, so the same rounding.
        *slot = K1 * (1.0 - B + B * length / average);
    }
    table
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
    // The best `limit` so far, the worst of them on top: most documents are turned away by one
    // comparison with it.
    // (Room made as it fills: a caller's depth may be far more than the matches.)
    let mut best: BinaryHeap<Ranked> = BinaryHeap::with_capacity(limit.min(1024));
    let mut scores: Vec<Score> = Vec::new();
    let mut seen: Vec<u64> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    for (ord, segment) in segments.iter().enumerate() {
        let max_doc = segment.max_doc() as usize;
        scores.clear();
        scores.resize(max_doc, 0.0);
        seen.clear();
        seen.resize(max_doc.div_ceil(64), 0);
        touched.clear();
        for (c, clause) in clauses.iter().enumerate() {
            let Some(info) = &infos[ord][c] else {
                continue;
            };
            let (inverted, norms) = &readers[ord][slots[c]];
            let mut block =
                inverted.read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
            let weight = weights[c];
            loop {
                let block_docs = block.docs();
                if block_docs.is_empty() {
                    break;
                }
                for (i, &doc) in block_docs.iter().enumerate() {
                    let tf = block.freq(i) as Score;
                    let norm = clause.lengths[usize::from(norms.fieldnorm_id(doc))];
                    let d = doc as usize;
                    let (word, bit) = (d / 64, 1u64 << (d % 64));
                    if seen[word] & bit == 0 {
                        seen[word] |= bit;
                        touched.push(doc);
                    }
                    scores[d] += weight * (tf / (tf + norm));
                }
                block.advance();
            }
        }
        let alive = segment.alive_bitset();
        for &doc in &touched {
            if alive.is_some_and(|a| a.is_deleted(doc)) {
                continue;
            }
            let hit = Ranked(scores[doc as usize], DocAddress::new(ord as u32, doc));
            if best.len() < limit {
                best.push(hit);
            } else if let Some(mut worst) = best.peek_mut()
                && hit < *worst
            {
                *worst = hit;
            }
        }
    }
    Ok(best
        .into_sorted_vec()
        .into_iter()
        .map(|Ranked(score, addr)| (score, addr))
        .collect())
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
