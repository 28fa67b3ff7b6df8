//! The hydration stage: the fused ranking turned into hits a person reads. Each hit's chunk
//! and its analysed terms are read from the store once and travel with the hit
//! ([`FoundHit`]), so later stages, the trace (its content hash) and the agent (its text for
//! citation checks) need not read the store again.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::knowledge::Chunk;
use crate::store::{ChunkStore, ChunkTerms};

use super::fusion::{FusedHit, LegRank};
use super::request::ValidRequest;
use super::snippet::snippet_by;
use super::sufficiency::{ContentWord, KeyTerm, covered_mask_by};
use super::{SearchHit, SearchSettings};

/// One hit of a [`super::Searcher`] with what it was built from: the chunk record (its text
/// and content hash) and the chunk's analysed terms, borrowed from the store it was read from.
#[derive(Debug, Clone)]
pub struct FoundHit<'e> {
    /// The hit as `searchDocs` returns it.
    pub hit: SearchHit,
    /// The chunk record the hit shows.
    pub chunk: &'e Chunk,
    /// The chunk's analysed terms (the store's cache).
    pub terms: &'e ChunkTerms,
    /// For each of the request's key terms, in order, whether this hit covers it (what the
    /// judgement weighs).
    pub covered: Vec<bool>,
}

impl FoundHit<'_> {
    /// Hash of the chunk's content as returned (the trace records it, audit compares it).
    pub fn content_hash(&self) -> &str {
        &self.chunk.content_hash
    }
}

/// A fused hit as hydration reads it: where its chunk is, and how the legs ranked it.
pub(crate) struct Candidate {
    pub chunk: ChunkAt,
    /// The fused score.
    pub score: f64,
    pub bm25: Option<LegRank>,
    pub vector: Option<LegRank>,
}

/// Where a candidate's chunk is: named by its id (a fused ranking), or at its place in the
/// store (the BM25 leg alone, whose hits are named only when shown).
pub(crate) enum ChunkAt {
    Id(String),
    Position(usize),
}

impl From<FusedHit> for Candidate {
    fn from(f: FusedHit) -> Self {
        Self {
            chunk: ChunkAt::Id(f.id),
            score: f.score,
            bm25: f.bm25,
            vector: f.vector,
        }
    }
}

/// What hydration reads besides the ranking.
pub(crate) struct Hydration<'a, 'e> {
    pub store: &'e ChunkStore,
    pub settings: &'a SearchSettings,
    pub req: &'a ValidRequest<'a>,
    pub keys: &'a [KeyTerm],
    /// Each keyword's content words, in the order of the request's keywords.
    pub words: &'a [Vec<ContentWord>],
    /// The fused hits' first cut, and how long it was asked to be.
    pub fused: Vec<Candidate>,
    pub first_cut: usize,
}

/// Up to `top_k` hits from the fused ranking: chunks the caller may see, each containing a key
/// term or found by the vector leg with at least [`SearchSettings::vector_only_floor`]; the
/// ranking is fused again at the whole candidate set (`widen`) if the first cut runs out.
pub(crate) fn hydrate<'e>(
    h: Hydration<'_, 'e>,
    widen: impl Fn() -> Vec<Candidate>,
) -> Vec<FoundHit<'e>> {
    let Hydration {
        store,
        settings,
        req,
        keys,
        words,
        mut fused,
        first_cut,
    } = h;
    let top_k = req.top_k;
    // The keyword terms a snippet's sentences are scored by, each once.
    let mut wanted: Vec<&str> = keys
        .iter()
        .flat_map(|k| k.parts.iter().map(String::as_str))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    // Each key term's parts by their place in `wanted`: each distinct term is looked up once
    // per hit, and that one lookup answers coverage and the snippet's sentences.
    let part_at: Vec<Vec<usize>> = keys
        .iter()
        .map(|k| {
            k.parts
                .iter()
                .map(|p| wanted.binary_search(&p.as_str()).unwrap_or(usize::MAX))
                .collect()
        })
        .collect();
    // Each keyword's own key terms (their places in `keys`), to record which keywords a hit
    // matched: every content word of a keyword is a key term (`key_terms_of` keeps each).
    let per_keyword: Vec<(&String, Vec<usize>)> = req
        .keywords
        .iter()
        .zip(words)
        .map(|(k, own)| {
            let at = own
                .iter()
                .filter_map(|w| keys.iter().position(|key| key.term == w.term))
                .collect();
            (k, at)
        })
        .collect();
    let mut hits = Vec::with_capacity(top_k);
    let mut next = 0;
    while hits.len() < top_k {
        if next == fused.len() {
            // Fewer than asked for means the legs have no more; the whole set was already fused.
            if fused.len() < first_cut || first_cut == req.candidates {
                break;
            }
            fused = widen();
            if next == fused.len() {
                break;
            }
        }
        let f = &fused[next];
        next += 1;
        // One read: the record and its terms (analysed once per store generation).
        let read = match &f.chunk {
            ChunkAt::Id(id) => store.get_analysed(id),
            ChunkAt::Position(at) => store.get_analysed_at(*at),
        };
        let Some((chunk, terms)) = read else {
            continue;
        };
        // Defence in depth: both legs filter by access; the store record is the authority.
        if !req.access.allows(&chunk.tenant, &chunk.roles) {
            continue;
        }
        let found: Vec<_> = wanted.iter().map(|w| terms.find(w)).collect();
        let covered = covered_mask_by(
            keys,
            |i, j| found.get(part_at[i][j]).is_some_and(Option::is_some),
            terms.lowercase(),
        );
        if !covered.contains(&true)
            && f.vector
                .is_none_or(|v| v.score < settings.vector_only_floor)
        {
            continue;
        }
        let matched: Vec<&String> = per_keyword
            .iter()
            .filter(|(_, own)| own.iter().any(|&i| covered[i]))
            .map(|(k, _)| *k)
            .collect();
        hits.push(FoundHit {
            hit: SearchHit {
                chunk_id: chunk.id.clone(),
                title_path: chunk.title_path.clone(),
                snippet: snippet_by(
                    &chunk.text,
                    settings.snippet_chars,
                    Some(terms.one_line_len()),
                    || {
                        let sentences = terms.sentences(&chunk.text);
                        (
                            Cow::Borrowed(sentences.spans()),
                            sentences.match_counts_found(&wanted, &found),
                            Some(sentences.pieces()),
                        )
                    },
                ),
                source_uri: chunk.source_uri.clone(),
                score: f.score,
                metadata: metadata(chunk, f, &matched),
            },
            chunk,
            terms,
            covered,
        });
    }
    hits
}

fn metadata(chunk: &Chunk, f: &Candidate, matched: &[&String]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("tenant".to_string(), chunk.tenant.clone());
    m.insert("status".to_string(), chunk.status.as_str().to_string());
    if let Some(v) = &chunk.version {
        m.insert("version".to_string(), v.clone());
    }
    if let Some(u) = &chunk.updated {
        m.insert("updated".to_string(), u.clone());
    }
    if let Some(page) = chunk.page() {
        m.insert("page".to_string(), page.to_string());
    }
    if let Some(r) = f.bm25 {
        m.insert("bm25Rank".to_string(), r.rank.to_string());
        m.insert("bm25Score".to_string(), four_decimals(r.score));
    }
    if let Some(r) = f.vector {
        m.insert("vectorRank".to_string(), r.rank.to_string());
        m.insert("vectorScore".to_string(), four_decimals(r.score));
    }
    if !matched.is_empty() {
        m.insert(
            "matchedKeywords".to_string(),
            matched
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    m
}

/// `format!("{x:.4}")`, without the general formatter: scores are written for every hit of
/// every call, and the formatter's exact path for `f32` was a visible share of a call. An
/// `f32` times 10⁴ is exact in an `f64` (24 + 14 bits), so rounding it half to even rounds the
/// exact value as the formatter does.
fn four_decimals(x: f32) -> String {
    let scaled = (f64::from(x) * 1e4).round_ties_even();
    if !scaled.is_finite() || scaled.abs() >= 1e15 {
        return format!("{x:.4}");
    }
    // Exact: |scaled| < 10^15 < 2^53.
    let n = scaled.abs() as u64;
    let sign = if x.is_sign_negative() { "-" } else { "" };
    format!("{sign}{}.{:04}", n / 10_000, n % 10_000)
}

#[cfg(test)]
mod tests {
    use super::four_decimals;
    use proptest::prelude::*;

    #[test]
    fn four_decimals_rounds_as_the_formatter_does_at_the_edges() {
        // 1.03125 × 10⁴ is a tie: half to even, as `{:.4}` rounds.
        for x in [
            0.0f32,
            -0.0,
            1.03125,
            1.03135,
            -0.00001,
            0.99995,
            12.5,
            f32::MIN_POSITIVE,
            3.0e9,
            1.0e12,
            f32::MAX,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(four_decimals(x), format!("{x:.4}"), "{x:e}");
        }
    }

    proptest! {
        #[test]
        fn four_decimals_equals_the_formatter(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assert_eq!(four_decimals(x), format!("{x:.4}"));
        }

        #[test]
        fn four_decimals_equals_the_formatter_on_scores(x in -100.0f32..1000.0) {
            prop_assert_eq!(four_decimals(x), format!("{x:.4}"));
        }
    }
}
