//! Fusing the BM25 leg and the vector leg of hybrid search into one ranking.
//!
//! BM25 scores and cosine similarities live on unrelated scales, so they cannot simply be
//! added. [`Fusion::Rrf`] (reciprocal rank fusion) ignores scores and uses ranks only: robust
//! and parameter-light (it is what `Fusion::default()` and a bare `rrf` mean). [`Fusion::MinMax`]
//! rescales each leg's scores to `[0, 1]` and takes a weighted sum: it keeps score gaps, at the
//! price of sensitivity to outliers. The engine's defaults are min-max sums whose weight is
//! earned per query (`search::default_fusion_for`, measured in BENCHMARKS.md):
//! [`Fusion::Agreement`] with the lexical hashing embedder, [`Fusion::Standout`] with a model
//! ([`Fusion::StandoutCoverage`] for a model that knows the askers' languages, by the
//! operator's choice).
//! The single-leg modes exist for ablations and debugging, and still report the other leg's
//! rank.
//!
//! Every fused hit keeps the rank and raw score it had in each leg, so a trace can explain why
//! it ended up where it did.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// The conventional RRF constant (Cormack et al., 2009): damps the head so that rank 1 vs 2
/// matters less than agreement between legs.
pub const DEFAULT_RRF_K: f64 = 60.0;
/// BM25's weight in min-max fusion when none is given (`minmax` without a weight), and the
/// engine's default with the hashing embedder (see `search::default_fusion_for`).
pub const DEFAULT_BM25_WEIGHT: f64 = 0.3;
/// [`Fusion::Agreement`]'s vector weight at full agreement when none is given (`agree`).
pub const DEFAULT_AGREEMENT_WEIGHT: f64 = 0.5;
/// How deep [`Fusion::Agreement`] compares the legs' tops.
pub const AGREEMENT_DEPTH: usize = 10;
/// [`Fusion::Confidence`]'s vector weight when BM25's best hit covers none of the query
/// (`confidence` without a weight): at 1 the BM25 weight is the lexical confidence itself.
pub const DEFAULT_CONFIDENCE_WEIGHT: f64 = 1.0;
/// The key-term coverage [`Fusion::Confidence`] assumes when none was measured (a query
/// without content words, or a caller of [`fuse`] that passes no signal): neither leg leads.
pub const UNMEASURED_COVERAGE: f64 = 0.5;

/// What [`Fusion::Confidence`] reads BM25's confidence in a query from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexicalSignal {
    /// How much of the query BM25's best hit contains: the IDF-weighted share of the key
    /// terms ([`QuerySignals::lexical_coverage`]).
    Coverage,
    /// How far BM25's best hit stands ahead of the runner-up: `1 - s2 / s1` over the raw
    /// scores of the first two distinct hits ([`bm25_margin`]).
    Margin,
    /// Both at once, `coverage · margin`: BM25 is confident only when its best hit contains
    /// the query and no other hit comes close.
    CoverageAndMargin,
}

impl LexicalSignal {
    fn name(self) -> &'static str {
        match self {
            LexicalSignal::Coverage => "coverage",
            LexicalSignal::Margin => "margin",
            LexicalSignal::CoverageAndMargin => "confidence",
        }
    }
}

/// The weights one min-max-style fusion gave its legs for one query, as a trace records them
/// beside the mode's name (`agree` and `confidence` earn them per query).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FusionWeights {
    /// BM25's weight; the vector leg's is `1 - bm25`.
    pub bm25: f64,
    /// The lexical confidence the weight was derived from ([`Fusion::Confidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical_confidence: Option<f64>,
}

/// What a fusion may know about the query beyond the two hit lists.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuerySignals {
    /// The IDF-weighted share of the query's key terms that BM25's best hit contains, in
    /// `[0, 1]` (`search::lexical_coverage`); `None` when not measured. Only
    /// [`Fusion::Confidence`] and [`Fusion::StandoutCoverage`] read it.
    pub lexical_coverage: Option<f64>,
}

/// One hit of one leg, as returned by that leg (best first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegHit {
    /// Chunk id.
    pub id: String,
    /// The leg's own score (BM25 score or cosine similarity).
    pub score: f32,
}

impl LegHit {
    /// Convenience constructor.
    pub fn new(id: impl Into<String>, score: f32) -> Self {
        Self {
            id: id.into(),
            score,
        }
    }
}

/// Where a fused hit stood in one leg.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegRank {
    /// 1-based position in the leg's list as given (duplicates included in the counting).
    pub rank: u32,
    /// The leg's raw score.
    pub score: f32,
}

/// One hit of the fused ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FusedHit {
    /// Chunk id.
    pub id: String,
    /// Fused score; only comparable within one [`fuse`] call.
    pub score: f64,
    /// Rank in the BM25 leg, if the hit was there.
    pub bm25: Option<LegRank>,
    /// Rank in the vector leg, if the hit was there.
    pub vector: Option<LegRank>,
}

/// How to combine the two legs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: `Σ 1 / (k + rank)` over the legs containing the hit.
    Rrf {
        /// Damping constant, finite and `>= 0` (default [`DEFAULT_RRF_K`]).
        k: f64,
    },
    /// `w · bm25_norm + (1 - w) · vector_norm`, each leg min-max normalised to `[0, 1]`.
    MinMax {
        /// `w`, in `[0, 1]` (default [`DEFAULT_BM25_WEIGHT`]).
        bm25_weight: f64,
    },
    /// Min-max fusion whose vector weight is earned per query: `v · a`, where `a` is the share
    /// of the top [`AGREEMENT_DEPTH`] of each leg that the other leg's top also holds. Legs
    /// that agree rerank each other; a vector leg that disagrees with BM25 (a lexical leg
    /// finding other words, or a model off its language) only breaks ties and fills in after
    /// BM25's hits, so the fusion cannot fall far below BM25 alone.
    Agreement {
        /// `v`, the vector weight at full agreement, in `[0, 1]`.
        max_vector_weight: f64,
    },
    /// Min-max fusion whose BM25 weight is the lexical leg's own confidence in this query:
    /// `w = 1 - v · (1 - c)`, where `c` in `[0, 1]` is read from `signal` (by default
    /// [`LexicalSignal::CoverageAndMargin`]: BM25's best hit contains the query's key terms
    /// and stands clear of the runner-up). Where the question copies one passage's words BM25
    /// is sure and leads; where it is not (a paraphrase, distractors sharing the question's
    /// words, a question in another language) the vector leg leads.
    Confidence {
        /// `v`, the vector weight when BM25 has no confidence at all, in `[0, 1]`.
        max_vector_weight: f64,
        /// Where `c` comes from.
        signal: LexicalSignal,
    },
    /// Min-max fusion in which each leg's weight is how far its best hit stands out among the
    /// leg's own candidates ([`leg_standout`], a z-score: scale-free, so a BM25 score and a
    /// cosine similarity are read alike): `w = z_bm25 / (z_bm25 + z_vector)`, equal weights
    /// when neither stands out. Where a question copies one passage's words BM25's best hit
    /// towers over the rest and BM25 leads; where BM25's hits share the question's words about
    /// evenly (distractors, paraphrases, another language) the leg that singles a passage out
    /// leads. It reads both legs alike, with no parameter to fit.
    Standout,
    /// [`Fusion::Standout`] with BM25's standing-out discounted by how much of the query its
    /// best hit contains ([`QuerySignals::lexical_coverage`]): `w = c·z_bm25 / (c·z_bm25 +
    /// z_vector)`. A best hit that towers over the rest on a word or two of a long question
    /// (a paraphrase, an everyday question about a policy) no longer leads; one that holds the
    /// question's words still does. For a model that knows the askers' languages: with one
    /// that does not, the vector leg it hands the lead to cannot read the question either.
    StandoutCoverage,
    /// The BM25 leg alone, in its order, with its raw scores.
    Bm25Only,
    /// The vector leg alone, in its order, with its raw scores.
    VectorOnly,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Rrf { k: DEFAULT_RRF_K }
    }
}

/// Invalid fusion name or parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FusionError {
    /// Not one of `rrf`, `minmax`, `agree`, `confidence`, `coverage`, `margin`, `standout`,
    /// `standout-coverage`, `bm25`, `vector`.
    #[error(
        "unknown fusion {0:?}: expected one of rrf, minmax, agree, confidence, coverage, margin, standout, standout-coverage, bm25, vector"
    )]
    UnknownName(String),
    /// RRF `k` must be finite and non-negative.
    #[error("RRF k must be finite and >= 0, got {0}")]
    InvalidRrfK(f64),
    /// Min-max weight must lie in `[0, 1]`.
    #[error("min-max bm25 weight must be in [0, 1], got {0}")]
    InvalidWeight(f64),
}

impl Fusion {
    /// RRF with a checked `k`.
    pub fn rrf(k: f64) -> Result<Self, FusionError> {
        let fusion = Fusion::Rrf { k };
        fusion.validate()?;
        Ok(fusion)
    }

    /// Min-max fusion with a checked BM25 weight.
    pub fn min_max(bm25_weight: f64) -> Result<Self, FusionError> {
        let fusion = Fusion::MinMax { bm25_weight };
        fusion.validate()?;
        Ok(fusion)
    }

    /// Checks the parameters; [`fuse`] repairs invalid ones instead of failing (see there).
    pub fn validate(&self) -> Result<(), FusionError> {
        match *self {
            Fusion::Rrf { k } if !(k.is_finite() && k >= 0.0) => Err(FusionError::InvalidRrfK(k)),
            Fusion::MinMax { bm25_weight: w } if !(0.0..=1.0).contains(&w) => {
                Err(FusionError::InvalidWeight(w))
            }
            Fusion::Agreement {
                max_vector_weight: w,
            }
            | Fusion::Confidence {
                max_vector_weight: w,
                ..
            } if !(0.0..=1.0).contains(&w) => Err(FusionError::InvalidWeight(w)),
            _ => Ok(()),
        }
    }

    /// The name used by [`Display`](fmt::Display) and [`FromStr`].
    pub fn name(&self) -> &'static str {
        match self {
            Fusion::Rrf { .. } => "rrf",
            Fusion::MinMax { .. } => "minmax",
            Fusion::Agreement { .. } => "agree",
            Fusion::Confidence { signal, .. } => signal.name(),
            Fusion::Standout => "standout",
            Fusion::StandoutCoverage => "standout-coverage",
            Fusion::Bm25Only => "bm25",
            Fusion::VectorOnly => "vector",
        }
    }
}

impl fmt::Display for Fusion {
    /// The mode's name and its parameter (`rrf:60`, `minmax:0.3`, `bm25`, `vector`): traces
    /// record this, so a replay fuses exactly as the run did.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fusion::Rrf { k } => write!(f, "rrf:{k}"),
            Fusion::MinMax { bm25_weight } => write!(f, "minmax:{bm25_weight}"),
            Fusion::Agreement { max_vector_weight } => write!(f, "agree:{max_vector_weight}"),
            Fusion::Confidence {
                max_vector_weight,
                signal,
            } => write!(f, "{}:{max_vector_weight}", signal.name()),
            _ => f.write_str(self.name()),
        }
    }
}

impl FromStr for Fusion {
    type Err = FusionError;

    /// `rrf`, `minmax`, `bm25` or `vector` (ASCII case-insensitive, surrounding spaces ignored),
    /// with default parameters, or `rrf:K` / `minmax:W` with explicit ones.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        if let Some((name, param)) = trimmed.split_once(':') {
            let value: f64 = param
                .trim()
                .parse()
                .map_err(|_| FusionError::UnknownName(s.to_owned()))?;
            return match name.trim().to_ascii_lowercase().as_str() {
                "rrf" => Fusion::rrf(value),
                "minmax" => Fusion::min_max(value),
                "agree" => {
                    let fusion = Fusion::Agreement {
                        max_vector_weight: value,
                    };
                    fusion.validate()?;
                    Ok(fusion)
                }
                name => match signal_named(name) {
                    Some(signal) => {
                        let fusion = Fusion::Confidence {
                            max_vector_weight: value,
                            signal,
                        };
                        fusion.validate()?;
                        Ok(fusion)
                    }
                    None => Err(FusionError::UnknownName(s.to_owned())),
                },
            };
        }
        let name = trimmed;
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if is("rrf") {
            Ok(Fusion::Rrf { k: DEFAULT_RRF_K })
        } else if is("minmax") {
            Ok(Fusion::MinMax {
                bm25_weight: DEFAULT_BM25_WEIGHT,
            })
        } else if is("agree") {
            Ok(Fusion::Agreement {
                max_vector_weight: DEFAULT_AGREEMENT_WEIGHT,
            })
        } else if let Some(signal) = signal_named(&name.to_ascii_lowercase()) {
            Ok(Fusion::Confidence {
                max_vector_weight: DEFAULT_CONFIDENCE_WEIGHT,
                signal,
            })
        } else if is("standout") {
            Ok(Fusion::Standout)
        } else if is("standout-coverage") {
            Ok(Fusion::StandoutCoverage)
        } else if is("bm25") {
            Ok(Fusion::Bm25Only)
        } else if is("vector") {
            Ok(Fusion::VectorOnly)
        } else {
            Err(FusionError::UnknownName(s.to_owned()))
        }
    }
}

/// The [`LexicalSignal`] a lowercase mode name stands for.
fn signal_named(name: &str) -> Option<LexicalSignal> {
    [
        LexicalSignal::CoverageAndMargin,
        LexicalSignal::Coverage,
        LexicalSignal::Margin,
    ]
    .into_iter()
    .find(|s| s.name() == name)
}

/// A hit's first occurrence in a leg: 0-based position and raw score.
#[derive(Debug, Clone, Copy)]
struct Seen {
    pos: usize,
    score: f32,
}

impl Seen {
    fn rank(self) -> LegRank {
        LegRank {
            rank: u32::try_from(self.pos + 1).unwrap_or(u32::MAX),
            score: self.score,
        }
    }
}

#[derive(Debug)]
struct Union<'a> {
    id: &'a str,
    bm25: Option<Seen>,
    vector: Option<Seen>,
}

impl Union<'_> {
    /// Best position in either leg: the tie-break before the id.
    fn best_pos(&self) -> usize {
        let b = self.bm25.map_or(usize::MAX, |s| s.pos);
        let v = self.vector.map_or(usize::MAX, |s| s.pos);
        b.min(v)
    }

    fn into_hit(self, score: f64) -> FusedHit {
        FusedHit {
            id: self.id.to_owned(),
            score,
            bm25: self.bm25.map(Seen::rank),
            vector: self.vector.map(Seen::rank),
        }
    }
}

/// Every distinct id of both legs, with its first (best) occurrence in each.
fn union<'a>(bm25: &'a [LegHit], vector: &'a [LegHit]) -> Vec<Union<'a>> {
    // Chunk ids are not attacker-chosen keys of a long-lived map: a fast hash is safe here, and
    // hashing 200 ids with SipHash cost as much as the rest of the fusion.
    let mut slots: FxHashMap<&'a str, usize> =
        FxHashMap::with_capacity_and_hasher(bm25.len() + vector.len(), Default::default());
    let mut out: Vec<Union<'a>> = Vec::with_capacity(bm25.len() + vector.len());
    for (is_bm25, leg) in [(true, bm25), (false, vector)] {
        for (pos, hit) in leg.iter().enumerate() {
            let seen = Seen {
                pos,
                score: hit.score,
            };
            match slots.entry(hit.id.as_str()) {
                Entry::Vacant(e) => {
                    e.insert(out.len());
                    out.push(Union {
                        id: hit.id.as_str(),
                        bm25: is_bm25.then_some(seen),
                        vector: (!is_bm25).then_some(seen),
                    });
                }
                Entry::Occupied(e) => {
                    let u = &mut out[*e.get()];
                    let slot = if is_bm25 { &mut u.bm25 } else { &mut u.vector };
                    // A later duplicate within the same leg is ignored.
                    if slot.is_none() {
                        *slot = Some(seen);
                    }
                }
            }
        }
    }
    out
}

/// Maps a leg's raw scores to `[0, 1]` over the hits it returned.
struct MinMaxScale {
    min: f64,
    max: f64,
}

impl MinMaxScale {
    fn over(scores: impl Iterator<Item = f32>) -> Self {
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for s in scores.map(f64::from).filter(|s| s.is_finite()) {
            min = min.min(s);
            max = max.max(s);
        }
        Self { min, max }
    }

    /// `max == min` (one hit, or all equal) maps to 1.0: the leg found it, with nothing to
    /// distinguish it. A non-finite raw score maps to 0.
    fn apply(&self, score: f32) -> f64 {
        let s = f64::from(score);
        if !s.is_finite() {
            0.0
        } else if self.max > self.min {
            (s - self.min) / (self.max - self.min)
        } else {
            1.0
        }
    }
}

/// Fuses the two legs (each best-first) into at most `limit` hits.
///
/// For [`Fusion::Rrf`] and [`Fusion::MinMax`] the output holds the union of both legs sorted by
/// fused score descending; equal scores are ordered by the best 1-based rank the hit had in
/// either leg, then by id ascending. (The rank step keeps a leg's own order when scores tie,
/// e.g. min-max over a leg with equal scores.) The result is deterministic and does not depend
/// on which leg is passed first once the weights are mirrored.
///
/// [`Fusion::Bm25Only`] / [`Fusion::VectorOnly`] return that leg's hits in its order with its
/// raw scores; the other leg's rank is attached where the id appears there too.
///
/// Within a leg, only the first occurrence of an id counts. Invalid parameters are repaired,
/// not rejected (use [`Fusion::validate`] to reject them): a non-finite or negative RRF `k`
/// becomes [`DEFAULT_RRF_K`], a min-max weight is clamped to `[0, 1]` (NaN becomes 0.5).
///
/// # Examples
///
/// ```
/// use ragtrail::fusion::{fuse, Fusion, LegHit};
///
/// let bm25 = [LegHit::new("a", 12.0), LegHit::new("b", 9.5), LegHit::new("c", 3.0)];
/// let vector = [LegHit::new("c", 0.91), LegHit::new("a", 0.88), LegHit::new("d", 0.80)];
///
/// let hits = fuse(Fusion::default(), &bm25, &vector, 3);
/// let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
/// assert_eq!(ids, ["a", "c", "b"]);
/// // a: 1/(60+1) from BM25 + 1/(60+2) from the vector leg.
/// assert!((hits[0].score - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-12);
/// assert_eq!(hits[0].vector.map(|r| r.rank), Some(2));
///
/// let fusion: Fusion = "minmax:0.5".parse()?;
/// assert_eq!(fusion, Fusion::MinMax { bm25_weight: 0.5 });
/// assert_eq!(fusion.to_string(), "minmax:0.5");
/// # Ok::<(), ragtrail::fusion::FusionError>(())
/// ```
pub fn fuse(fusion: Fusion, bm25: &[LegHit], vector: &[LegHit], limit: usize) -> Vec<FusedHit> {
    fuse_with(fusion, bm25, vector, limit, QuerySignals::default())
}

/// A weight read from a parameter: NaN becomes `default`, the rest is clamped to `[0, 1]`.
fn repaired(weight: f64, default: f64) -> f64 {
    if weight.is_nan() {
        default
    } else {
        weight.clamp(0.0, 1.0)
    }
}

/// BM25's weight in the min-max sum of the min-max modes for this query ([`Fusion::MinMax`]'s
/// own; the others' per query), repaired as [`fuse`] repairs it; `None` for the modes that sum
/// no weights. A trace records it beside the mode.
pub fn bm25_weight(
    fusion: Fusion,
    bm25: &[LegHit],
    vector: &[LegHit],
    signals: QuerySignals,
) -> Option<f64> {
    match fusion {
        Fusion::MinMax { bm25_weight } => Some(repaired(bm25_weight, DEFAULT_BM25_WEIGHT)),
        Fusion::Agreement { max_vector_weight } => {
            let v = repaired(max_vector_weight, DEFAULT_AGREEMENT_WEIGHT);
            Some(1.0 - v * agreement(bm25, vector))
        }
        Fusion::Confidence {
            max_vector_weight,
            signal,
        } => {
            let v = repaired(max_vector_weight, DEFAULT_CONFIDENCE_WEIGHT);
            let c = lexical_confidence(signal, bm25, signals);
            Some(1.0 - v * (1.0 - c))
        }
        Fusion::Standout => Some(standout_weight(leg_standout(bm25), leg_standout(vector))),
        Fusion::StandoutCoverage => {
            let c = lexical_confidence(LexicalSignal::Coverage, bm25, signals);
            Some(standout_weight(
                c * leg_standout(bm25),
                leg_standout(vector),
            ))
        }
        Fusion::Rrf { .. } | Fusion::Bm25Only | Fusion::VectorOnly => None,
    }
}

/// BM25's weight when its leg stands out by `bm25` and the vector leg by `vector` (both
/// `>= 0`): its share of the two, even when neither stands out.
fn standout_weight(bm25: f64, vector: f64) -> f64 {
    if bm25 + vector > 0.0 {
        bm25 / (bm25 + vector)
    } else {
        0.5
    }
}

impl Fusion {
    /// The signal of BM25's confidence this mode reads, if any ([`Fusion::Confidence`]'s own,
    /// [`Fusion::StandoutCoverage`]'s coverage): a search works out and records it.
    pub fn lexical_signal(self) -> Option<LexicalSignal> {
        match self {
            Fusion::Confidence { signal, .. } => Some(signal),
            Fusion::StandoutCoverage => Some(LexicalSignal::Coverage),
            _ => None,
        }
    }

    /// This fusion for one query's legs: a mode that earns its BM25 weight per query
    /// ([`Fusion::Agreement`], [`Fusion::Confidence`], [`Fusion::Standout`],
    /// [`Fusion::StandoutCoverage`]) as plain min-max at that weight, which fuses exactly the
    /// same; any other mode unchanged. A caller that fuses the same legs more than once, or
    /// records the weight, works it out once.
    pub fn for_query(self, bm25: &[LegHit], vector: &[LegHit], signals: QuerySignals) -> Fusion {
        match self {
            Fusion::Agreement { .. }
            | Fusion::Confidence { .. }
            | Fusion::Standout
            | Fusion::StandoutCoverage => match bm25_weight(self, bm25, vector, signals) {
                Some(bm25_weight) => Fusion::MinMax { bm25_weight },
                None => self,
            },
            _ => self,
        }
    }
}

/// How far a leg's best hit stands out among the leg's hits: the z-score of its best score
/// over the scores of all its hits (each id's first), at least 0. At most `sqrt(n - 1)` for `n`
/// hits, so a short list cannot stand out much: 0 for no hit or one, 1 for two distinct
/// scores, 0 when every score is equal. Non-finite scores are left out.
pub fn leg_standout(leg: &[LegHit]) -> f64 {
    let mut seen: rustc_hash::FxHashSet<&str> = Default::default();
    let scores: Vec<f64> = leg
        .iter()
        .filter(|h| seen.insert(h.id.as_str()))
        .map(|h| f64::from(h.score))
        .filter(|s| s.is_finite())
        .collect();
    let n = scores.len() as f64;
    if scores.len() < 2 {
        return 0.0;
    }
    let mean = scores.iter().sum::<f64>() / n;
    let variance = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if variance <= 0.0 {
        return 0.0;
    }
    ((best - mean) / variance.sqrt()).max(0.0)
}

/// BM25's confidence in the query, in `[0, 1]`, as `signal` reads it (a coverage not measured
/// is [`UNMEASURED_COVERAGE`]).
pub fn lexical_confidence(signal: LexicalSignal, bm25: &[LegHit], signals: QuerySignals) -> f64 {
    let coverage = || {
        repaired(
            signals.lexical_coverage.unwrap_or(UNMEASURED_COVERAGE),
            UNMEASURED_COVERAGE,
        )
    };
    match signal {
        LexicalSignal::Coverage => coverage(),
        LexicalSignal::Margin => bm25_margin(bm25),
        LexicalSignal::CoverageAndMargin => coverage() * bm25_margin(bm25),
    }
}

/// How far the leg's best hit stands ahead of the next distinct one, `1 - s2 / s1` in
/// `[0, 1]`: 1 for a single hit, 0 for none, for a tie, or for a best score that is not
/// positive (BM25 scores are). Scale-free, so it means the same on any corpus.
pub fn bm25_margin(bm25: &[LegHit]) -> f64 {
    let Some(best) = bm25.first() else {
        return 0.0;
    };
    let s1 = f64::from(best.score);
    if !(s1.is_finite() && s1 > 0.0) {
        return 0.0;
    }
    match bm25.iter().find(|h| h.id != best.id) {
        None => 1.0,
        Some(next) => {
            let s2 = f64::from(next.score);
            if s2.is_finite() {
                (1.0 - s2 / s1).clamp(0.0, 1.0)
            } else {
                0.0
            }
        }
    }
}

/// [`fuse`] with what is known about the query ([`QuerySignals`]; only
/// [`Fusion::Confidence`] and [`Fusion::StandoutCoverage`] read it: without a measured
/// coverage they assume [`UNMEASURED_COVERAGE`]).
pub fn fuse_with(
    fusion: Fusion,
    bm25: &[LegHit],
    vector: &[LegHit],
    limit: usize,
    signals: QuerySignals,
) -> Vec<FusedHit> {
    let entries = union(bm25, vector);
    let mut scored: Vec<(Union<'_>, f64)> = match fusion {
        Fusion::Bm25Only | Fusion::VectorOnly => {
            let pick = |u: &Union<'_>| {
                if fusion == Fusion::Bm25Only {
                    u.bm25
                } else {
                    u.vector
                }
            };
            let mut chosen: Vec<(Union<'_>, Seen)> = entries
                .into_iter()
                .filter_map(|u| pick(&u).map(|s| (u, s)))
                .collect();
            // The union lists BM25 ids first, so the vector leg's order must be restored.
            chosen.sort_by_key(|(_, s)| s.pos);
            return chosen
                .into_iter()
                .take(limit)
                .map(|(u, s)| u.into_hit(f64::from(s.score)))
                .collect();
        }
        Fusion::Rrf { k } => {
            let k = if k.is_finite() && k >= 0.0 {
                k
            } else {
                DEFAULT_RRF_K
            };
            let part = |s: Option<Seen>| s.map_or(0.0, |s| 1.0 / (k + (s.pos as f64 + 1.0)));
            entries
                .into_iter()
                .map(|u| {
                    let score = part(u.bm25) + part(u.vector);
                    (u, score)
                })
                .collect()
        }
        Fusion::MinMax { .. }
        | Fusion::Agreement { .. }
        | Fusion::Confidence { .. }
        | Fusion::Standout
        | Fusion::StandoutCoverage => {
            let w = bm25_weight(fusion, bm25, vector, signals).unwrap_or(DEFAULT_BM25_WEIGHT);
            let b_scale = MinMaxScale::over(entries.iter().filter_map(|u| u.bm25.map(|s| s.score)));
            let v_scale =
                MinMaxScale::over(entries.iter().filter_map(|u| u.vector.map(|s| s.score)));
            entries
                .into_iter()
                .map(|u| {
                    let b = u.bm25.map_or(0.0, |s| b_scale.apply(s.score));
                    let v = u.vector.map_or(0.0, |s| v_scale.apply(s.score));
                    let score = w * b + (1.0 - w) * v;
                    (u, score)
                })
                .collect()
        }
    };
    let order = |(a, sa): &(Union<'_>, f64), (b, sb): &(Union<'_>, f64)| -> Ordering {
        sb.total_cmp(sa)
            .then(a.best_pos().cmp(&b.best_pos()))
            .then_with(|| a.id.cmp(b.id))
    };
    // Only the best `limit` are sorted: callers usually want a few of two legs' hundreds.
    if limit == 0 {
        return Vec::new();
    }
    if limit < scored.len() {
        scored.select_nth_unstable_by(limit - 1, order);
        scored.truncate(limit);
    }
    scored.sort_by(order);
    scored.into_iter().map(|(u, s)| u.into_hit(s)).collect()
}

/// The share of the two legs' tops (first [`AGREEMENT_DEPTH`] distinct ids of each) found in
/// both, in `[0, 1]`: 0 when either leg is empty.
pub fn agreement(bm25: &[LegHit], vector: &[LegHit]) -> f64 {
    fn top(leg: &[LegHit]) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::with_capacity(AGREEMENT_DEPTH);
        for h in leg {
            if out.len() == AGREEMENT_DEPTH {
                break;
            }
            if !out.contains(&h.id.as_str()) {
                out.push(h.id.as_str());
            }
        }
        out
    }
    let (b, v) = (top(bm25), top(vector));
    let depth = b.len().min(v.len());
    if depth == 0 {
        return 0.0;
    }
    let shared = b.iter().filter(|id| v.contains(id)).count();
    (shared as f64 / depth as f64).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn standout_lets_the_leg_whose_best_hit_stands_out_lead() {
        // BM25's best hit towers over its others; the vector leg's scores are all alike.
        let towering = leg(&[("a", 20.0), ("b", 5.0), ("c", 4.9), ("d", 4.8)]);
        let flat = leg(&[("d", 0.82), ("c", 0.81), ("b", 0.80), ("a", 0.79)]);
        let none = QuerySignals::default();
        let w = bm25_weight(Fusion::Standout, &towering, &flat, none).expect("weighted");
        assert!(w > 0.5, "{w}");
        assert_eq!(ids(&fuse(Fusion::Standout, &towering, &flat, 4))[0], "a");
        // The same lists the other way round, on other scales: the vector leg leads, with the
        // mirrored weight.
        let scaled = |hits: &[LegHit], factor: f32| -> Vec<LegHit> {
            hits.iter()
                .map(|h| LegHit::new(h.id.clone(), h.score * factor))
                .collect()
        };
        let (towering_v, flat_b) = (scaled(&towering, 1.0 / 32.0), scaled(&flat, 16.0));
        let w_v = bm25_weight(Fusion::Standout, &flat_b, &towering_v, none).expect("weighted");
        assert!((w_v - (1.0 - w)).abs() < 1e-9, "{w_v} against {w}");
        assert_eq!(
            ids(&fuse(Fusion::Standout, &flat_b, &towering_v, 4))[0],
            "a"
        );
        // Neither leg stands out: equal weights.
        let tied = leg(&[("x", 1.0), ("y", 1.0)]);
        assert_eq!(bm25_weight(Fusion::Standout, &tied, &[], none), Some(0.5));
        let parsed: Fusion = " Standout ".parse().expect("parse");
        assert_eq!(parsed, Fusion::Standout);
        assert_eq!(parsed.to_string(), "standout");
    }

    #[test]
    fn standout_coverage_takes_the_lead_from_a_best_hit_that_misses_the_question() {
        // BM25's best hit towers, but holds a fifth of the question's key terms; the vector
        // leg singles out another chunk.
        let towering = leg(&[("a", 20.0), ("b", 5.0), ("c", 4.9), ("d", 4.8)]);
        let vector = leg(&[("d", 0.95), ("c", 0.81), ("b", 0.80), ("a", 0.79)]);
        let at = |c: f64| QuerySignals {
            lexical_coverage: Some(c),
        };
        let standout = bm25_weight(Fusion::Standout, &towering, &vector, at(0.2)).expect("w");
        let covered = bm25_weight(Fusion::StandoutCoverage, &towering, &vector, at(0.2));
        let covered = covered.expect("weighted");
        assert!(covered < standout, "{covered} against {standout}");
        assert_eq!(
            ids(&fuse_with(Fusion::Standout, &towering, &vector, 4, at(0.2)))[0],
            "a"
        );
        assert_eq!(
            ids(&fuse_with(
                Fusion::StandoutCoverage,
                &towering,
                &vector,
                4,
                at(0.2)
            ))[0],
            "d"
        );
        // A best hit that holds the whole question keeps standout's weight; one that holds
        // none of it gives the vector leg the whole say.
        let full = bm25_weight(Fusion::StandoutCoverage, &towering, &vector, at(1.0));
        assert_eq!(full, Some(standout));
        let none = bm25_weight(Fusion::StandoutCoverage, &towering, &vector, at(0.0));
        assert_eq!(none, Some(0.0));
        // Unmeasured (no content word): half a discount, as `confidence` assumes.
        let unmeasured = QuerySignals::default();
        let half = bm25_weight(Fusion::StandoutCoverage, &towering, &vector, unmeasured);
        let expected = standout_weight(
            UNMEASURED_COVERAGE * leg_standout(&towering),
            leg_standout(&vector),
        );
        assert_eq!(half, Some(expected));
        let parsed: Fusion = " Standout-Coverage ".parse().expect("parse");
        assert_eq!(parsed, Fusion::StandoutCoverage);
        assert_eq!(parsed.to_string(), "standout-coverage");
    }

    #[test]
    fn a_leg_stands_out_by_the_z_score_of_its_best_hit() {
        assert_eq!(leg_standout(&[]), 0.0);
        assert_eq!(leg_standout(&leg(&[("a", 3.0)])), 0.0);
        assert_eq!(leg_standout(&leg(&[("a", 3.0), ("b", 3.0)])), 0.0);
        // Two distinct scores: always exactly one standard deviation.
        assert!((leg_standout(&leg(&[("a", 9.0), ("b", 1.0)])) - 1.0).abs() < 1e-12);
        // 10, 2, 2, 2: mean 4, standard deviation sqrt(12).
        let z = leg_standout(&leg(&[("a", 10.0), ("b", 2.0), ("c", 2.0), ("d", 2.0)]));
        assert!((z - 6.0 / 12f64.sqrt()).abs() < 1e-12, "{z}");
        // A repeated id counts once; a non-finite score not at all.
        let repeated = leg(&[("a", 10.0), ("b", 2.0), ("a", 2.0), ("c", 2.0), ("d", 2.0)]);
        assert!((leg_standout(&repeated) - z).abs() < 1e-12);
        let with_nan = leg(&[
            ("a", 10.0),
            ("b", 2.0),
            ("c", 2.0),
            ("d", 2.0),
            ("e", f32::NAN),
        ]);
        assert!((leg_standout(&with_nan) - z).abs() < 1e-12);
    }

    #[test]
    fn agreement_weighs_the_vector_leg_by_the_share_of_tops_both_legs_hold() {
        let bm25 = leg(&[("a", 9.0), ("b", 8.0), ("c", 1.0)]);
        let disagree = leg(&[("x", 0.9), ("y", 0.8), ("z", 0.7)]);
        assert_eq!(agreement(&bm25, &disagree), 0.0);
        let fusion = Fusion::Agreement {
            max_vector_weight: 0.5,
        };
        // No agreement: min-max with BM25 alone, so BM25's order; its last hit (normalised to 0)
        // ties with the vector-only hits, which then go by their best rank.
        let hits = fuse(fusion, &bm25, &disagree, 10);
        assert_eq!(ids(&hits)[..2], ["a", "b"]);
        assert_eq!(hits.len(), 6);
        // Full agreement: min-max at 0.5, so c, first in the vector leg, rises to the top.
        let agree = leg(&[("c", 0.9), ("b", 0.8), ("a", 0.1)]);
        assert_eq!(agreement(&bm25, &agree), 1.0);
        assert_eq!(
            ids(&fuse(fusion, &bm25, &agree, 10)),
            ids(&fuse(
                Fusion::MinMax { bm25_weight: 0.5 },
                &bm25,
                &agree,
                10
            ))
        );
        let one_of_two = leg(&[("b", 0.9), ("q", 0.8)]);
        assert_eq!(agreement(&bm25, &one_of_two), 0.5);
        assert_eq!(agreement(&[], &agree), 0.0);
        let parsed: Fusion = "agree:0.7".parse().expect("parse");
        assert_eq!(
            parsed,
            Fusion::Agreement {
                max_vector_weight: 0.7
            }
        );
        assert_eq!(parsed.to_string(), "agree:0.7");
        assert!("agree:1.5".parse::<Fusion>().is_err());
    }
    use std::collections::HashSet;

    fn leg(hits: &[(&str, f32)]) -> Vec<LegHit> {
        hits.iter().map(|&(id, s)| LegHit::new(id, s)).collect()
    }

    fn ids(hits: &[FusedHit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    fn rank(rank: u32, score: f32) -> Option<LegRank> {
        Some(LegRank { rank, score })
    }

    const RRF60: Fusion = Fusion::Rrf { k: 60.0 };

    #[test]
    fn rrf_hand_computed() {
        let bm25 = leg(&[("a", 9.0), ("b", 8.0), ("c", 7.0)]);
        let vector = leg(&[("c", 0.9), ("a", 0.8), ("d", 0.7)]);
        let hits = fuse(RRF60, &bm25, &vector, 10);
        assert_eq!(ids(&hits), ["a", "c", "b", "d"]);
        let expected = [
            1.0 / 61.0 + 1.0 / 62.0, // a: 0.032522474881015...
            1.0 / 63.0 + 1.0 / 61.0, // c: 0.032266458495966...
            1.0 / 62.0,              // b
            1.0 / 63.0,              // d
        ];
        for (h, e) in hits.iter().zip(expected) {
            assert!((h.score - e).abs() < 1e-15, "{}: {} vs {e}", h.id, h.score);
        }
        assert!((hits[0].score - 0.032_522_474_881_015_34).abs() < 1e-15);
        assert_eq!(hits[0].bm25, rank(1, 9.0));
        assert_eq!(hits[0].vector, rank(2, 0.8));
        assert_eq!(hits[2].vector, None);
        assert_eq!(hits[3].bm25, None);
    }

    #[test]
    fn rrf_k_zero_and_ties() {
        // k = 0: x and y both score 1/1 + 1/2 = 1.5; both best rank 1, so id decides.
        let hits = fuse(
            Fusion::Rrf { k: 0.0 },
            &leg(&[("y", 2.0), ("x", 1.0)]),
            &leg(&[("x", 0.5), ("y", 0.4)]),
            5,
        );
        assert_eq!(ids(&hits), ["x", "y"]);
        assert_eq!(hits[0].score, 1.5);
        assert_eq!(hits[1].score, 1.5);

        let hits = fuse(RRF60, &leg(&[("b", 1.0)]), &leg(&[("a", 1.0)]), 5);
        assert_eq!(ids(&hits), ["a", "b"]);
    }

    #[test]
    fn min_max_hand_computed() {
        let bm25 = leg(&[("a", 10.0), ("b", 5.0), ("c", 0.0)]);
        let vector = leg(&[("b", 0.75), ("d", 0.5), ("a", 0.25)]);
        // bm25 norm: a 1, b .5, c 0; vector norm: b 1, d .5, a 0.
        let hits = fuse(Fusion::MinMax { bm25_weight: 0.5 }, &bm25, &vector, 10);
        assert_eq!(ids(&hits), ["b", "a", "d", "c"]);
        let scores: Vec<f64> = hits.iter().map(|h| h.score).collect();
        assert_eq!(scores, [0.75, 0.5, 0.25, 0.0]);

        let hits = fuse(Fusion::MinMax { bm25_weight: 1.0 }, &bm25, &vector, 10);
        // c and d tie at 0: d's best rank (2, vector) beats c's (3, BM25).
        assert_eq!(ids(&hits), ["a", "b", "d", "c"]);
    }

    #[test]
    fn min_max_single_or_equal_scores_are_one() {
        let hits = fuse(
            Fusion::MinMax { bm25_weight: 0.25 },
            &leg(&[("a", 3.0)]),
            &leg(&[("b", 0.4), ("c", 0.4)]),
            10,
        );
        // a: 0.25 · 1; b, c: 0.75 · 1.
        assert_eq!(ids(&hits), ["b", "c", "a"]);
        assert_eq!(hits[0].score, 0.75);
        assert_eq!(hits[2].score, 0.25);
    }

    #[test]
    fn duplicates_keep_first_occurrence() {
        let bm25 = leg(&[("a", 5.0), ("b", 4.0), ("a", 3.0)]);
        let vector = leg(&[("a", 0.9), ("a", 0.8), ("c", 0.7)]);
        let hits = fuse(RRF60, &bm25, &vector, 10);
        assert_eq!(ids(&hits), ["a", "b", "c"]);
        assert_eq!(hits[0].bm25, rank(1, 5.0));
        assert_eq!(hits[0].vector, rank(1, 0.9));
        assert_eq!(hits[1].bm25, rank(2, 4.0));
        assert_eq!(hits[2].vector, rank(3, 0.7)); // position in the list as given
        assert!((hits[0].score - 2.0 / 61.0).abs() < 1e-15);
    }

    #[test]
    fn single_leg_modes() {
        let bm25 = leg(&[("a", 3.0), ("b", 2.0), ("a", 1.0)]);
        let vector = leg(&[("b", 0.9), ("c", 0.8)]);
        let hits = fuse(Fusion::Bm25Only, &bm25, &vector, 10);
        assert_eq!(
            hits,
            [
                FusedHit {
                    id: "a".into(),
                    score: 3.0,
                    bm25: rank(1, 3.0),
                    vector: None
                },
                FusedHit {
                    id: "b".into(),
                    score: 2.0,
                    bm25: rank(2, 2.0),
                    vector: rank(1, 0.9)
                },
            ]
        );
        let hits = fuse(Fusion::VectorOnly, &bm25, &vector, 1);
        assert_eq!(ids(&hits), ["b"]);
        assert_eq!(hits[0].bm25, rank(2, 2.0));
        assert!((hits[0].score - 0.9).abs() < 1e-7);
    }

    #[test]
    fn limit_and_empty() {
        let bm25 = leg(&[("a", 3.0), ("b", 2.0)]);
        assert!(fuse(RRF60, &bm25, &[], 0).is_empty());
        assert!(fuse(RRF60, &[], &[], 10).is_empty());
        assert_eq!(fuse(Fusion::default(), &bm25, &[], 1).len(), 1);
    }

    #[test]
    fn invalid_parameters_are_repaired_or_rejected() {
        assert_eq!(Fusion::rrf(-1.0), Err(FusionError::InvalidRrfK(-1.0)));
        assert!(Fusion::rrf(f64::NAN).is_err());
        assert_eq!(Fusion::min_max(1.5), Err(FusionError::InvalidWeight(1.5)));
        assert_eq!(Fusion::rrf(10.0), Ok(Fusion::Rrf { k: 10.0 }));
        assert!(Fusion::min_max(0.0).is_ok());
        let bm25 = leg(&[("a", 3.0)]);
        let nan_k = fuse(Fusion::Rrf { k: f64::NAN }, &bm25, &[], 5);
        assert_eq!(nan_k, fuse(RRF60, &bm25, &[], 5));
        let big_w = fuse(Fusion::MinMax { bm25_weight: 7.0 }, &bm25, &[], 5);
        assert_eq!(big_w[0].score, 1.0);
    }

    #[test]
    fn parse_and_display() {
        for (s, f) in [
            ("rrf:60", Fusion::Rrf { k: 60.0 }),
            ("minmax:0.3", Fusion::MinMax { bm25_weight: 0.3 }),
            ("minmax:0.75", Fusion::MinMax { bm25_weight: 0.75 }),
            ("bm25", Fusion::Bm25Only),
            ("vector", Fusion::VectorOnly),
        ] {
            assert_eq!(s.parse::<Fusion>(), Ok(f));
            assert_eq!(f.to_string(), s);
        }
        assert_eq!(
            "minmax".parse::<Fusion>(),
            Ok(Fusion::MinMax {
                bm25_weight: DEFAULT_BM25_WEIGHT
            })
        );
        assert!("minmax:x".parse::<Fusion>().is_err());
        assert!("cosine:3".parse::<Fusion>().is_err());
        assert_eq!(" RRF ".parse::<Fusion>(), Ok(Fusion::default()));
        assert_eq!(
            "cosine".parse::<Fusion>(),
            Err(FusionError::UnknownName("cosine".into()))
        );
    }

    #[test]
    fn fused_hit_json_is_camel_case() {
        let hit = FusedHit {
            id: "c1".into(),
            score: 0.5,
            bm25: rank(2, 1.5),
            vector: None,
        };
        assert_eq!(
            serde_json::to_string(&hit).unwrap(),
            r#"{"id":"c1","score":0.5,"bm25":{"rank":2,"score":1.5},"vector":null}"#
        );
    }

    #[test]
    fn confidence_weighs_bm25_by_its_margin_and_its_coverage() {
        // BM25's best hit stands 3/4 ahead of the runner-up: margin 1 - 2/8 = 0.75.
        let bm25 = leg(&[("a", 8.0), ("b", 2.0), ("c", 1.0)]);
        let vector = leg(&[("c", 0.9), ("b", 0.5), ("a", 0.1)]);
        assert_eq!(bm25_margin(&bm25), 0.75);
        let covered = |c: f64| QuerySignals {
            lexical_coverage: Some(c),
        };
        let confidence = |v: f64| Fusion::Confidence {
            max_vector_weight: v,
            signal: LexicalSignal::CoverageAndMargin,
        };
        // c = 1 · 0.75; w = 1 - 1 · (1 - 0.75) = 0.75: min-max at 0.75.
        assert_eq!(
            bm25_weight(confidence(1.0), &bm25, &vector, covered(1.0)),
            Some(0.75)
        );
        assert_eq!(
            ids(&fuse_with(
                confidence(1.0),
                &bm25,
                &vector,
                10,
                covered(1.0)
            )),
            ids(&fuse(
                Fusion::MinMax { bm25_weight: 0.75 },
                &bm25,
                &vector,
                10
            ))
        );
        // Half the key terms covered: c = 0.375, w = 0.375, and the vector leg's c leads.
        let w = bm25_weight(confidence(1.0), &bm25, &vector, covered(0.5)).expect("min-max");
        assert!((w - 0.375).abs() < 1e-12, "{w}");
        assert_eq!(
            ids(&fuse_with(
                confidence(1.0),
                &bm25,
                &vector,
                10,
                covered(0.5)
            ))[0],
            "c"
        );
        // The vector weight is capped by the parameter: w = 1 - 0.2 · (1 - 0.375) = 0.875.
        let w = bm25_weight(confidence(0.2), &bm25, &vector, covered(0.5)).expect("min-max");
        assert!((w - 0.875).abs() < 1e-12, "{w}");
        // Each signal alone.
        let margin = Fusion::Confidence {
            max_vector_weight: 1.0,
            signal: LexicalSignal::Margin,
        };
        assert_eq!(
            bm25_weight(margin, &bm25, &vector, covered(0.0)),
            Some(0.75)
        );
        let coverage = Fusion::Confidence {
            max_vector_weight: 1.0,
            signal: LexicalSignal::Coverage,
        };
        assert_eq!(
            bm25_weight(coverage, &bm25, &vector, covered(0.25)),
            Some(0.25)
        );
        // Not measured: a coverage of one half.
        assert_eq!(
            bm25_weight(coverage, &bm25, &vector, QuerySignals::default()),
            Some(UNMEASURED_COVERAGE)
        );
        // The other modes do not read the signal; RRF sums no weights.
        assert_eq!(
            bm25_weight(
                Fusion::MinMax { bm25_weight: 0.3 },
                &bm25,
                &vector,
                covered(0.0)
            ),
            Some(0.3)
        );
        assert_eq!(bm25_weight(RRF60, &bm25, &vector, covered(1.0)), None);
    }

    #[test]
    fn margin_edge_cases() {
        assert_eq!(bm25_margin(&[]), 0.0);
        assert_eq!(bm25_margin(&leg(&[("a", 3.0)])), 1.0);
        // A repeated id is not a runner-up.
        assert_eq!(
            bm25_margin(&leg(&[("a", 4.0), ("a", 4.0), ("b", 1.0)])),
            0.75
        );
        assert_eq!(bm25_margin(&leg(&[("a", 2.0), ("b", 2.0)])), 0.0);
        assert_eq!(bm25_margin(&leg(&[("a", 0.0), ("b", 0.0)])), 0.0);
        assert_eq!(bm25_margin(&leg(&[("a", f32::NAN), ("b", 1.0)])), 0.0);
    }

    #[test]
    fn confidence_modes_parse_and_display() {
        for (s, signal) in [
            ("confidence:1", LexicalSignal::CoverageAndMargin),
            ("margin:0.8", LexicalSignal::Margin),
            ("coverage:0.3", LexicalSignal::Coverage),
        ] {
            let f: Fusion = s.parse().expect("parses");
            assert!(
                matches!(f, Fusion::Confidence { signal: g, .. } if g == signal),
                "{s}"
            );
            assert_eq!(f.to_string(), s);
        }
        assert_eq!(
            " Confidence ".parse::<Fusion>(),
            Ok(Fusion::Confidence {
                max_vector_weight: DEFAULT_CONFIDENCE_WEIGHT,
                signal: LexicalSignal::CoverageAndMargin
            })
        );
        assert_eq!(
            "confidence:1.5".parse::<Fusion>(),
            Err(FusionError::InvalidWeight(1.5))
        );
        assert!("confidence:x".parse::<Fusion>().is_err());
    }

    // ---- properties ----

    const POOL: usize = 10;

    fn pool() -> Vec<String> {
        (0..POOL).map(|i| format!("d{i}")).collect()
    }

    /// A leg of distinct ids with descending small-integer scores (ties are common).
    fn unique_leg() -> impl Strategy<Value = Vec<LegHit>> {
        prop::sample::subsequence(pool(), 0..=POOL)
            .prop_shuffle()
            .prop_flat_map(|ids| {
                let n = ids.len();
                prop::collection::vec(0u8..6, n).prop_map(move |mut scores| {
                    scores.sort_unstable_by(|a, b| b.cmp(a));
                    ids.iter()
                        .zip(scores)
                        .map(|(id, s)| LegHit::new(id.clone(), f32::from(s)))
                        .collect()
                })
            })
    }

    /// A leg that may repeat ids (scores arbitrary).
    fn dup_leg() -> impl Strategy<Value = Vec<LegHit>> {
        prop::collection::vec((0..POOL, -5.0f32..5.0), 0..15).prop_map(|v| {
            v.into_iter()
                .map(|(i, s)| LegHit::new(format!("d{i}"), s))
                .collect()
        })
    }

    /// Fusing modes, with min-max weights that are multiples of 1/64 so `1 - (1 - w) == w`.
    fn fusing_mode() -> impl Strategy<Value = Fusion> {
        prop_oneof![
            (0u32..=120).prop_map(|k| Fusion::Rrf { k: f64::from(k) }),
            (0u32..=64).prop_map(|n| Fusion::MinMax {
                bm25_weight: f64::from(n) / 64.0
            }),
        ]
    }

    fn any_mode() -> impl Strategy<Value = Fusion> {
        prop_oneof![
            fusing_mode(),
            Just(Fusion::Bm25Only),
            Just(Fusion::VectorOnly)
        ]
    }

    fn mirror(f: Fusion) -> Fusion {
        match f {
            Fusion::Rrf { k } => Fusion::Rrf { k },
            Fusion::MinMax { bm25_weight } => Fusion::MinMax {
                bm25_weight: 1.0 - bm25_weight,
            },
            Fusion::Bm25Only => Fusion::VectorOnly,
            Fusion::VectorOnly => Fusion::Bm25Only,
            // Not generated: their weights are not mirror images (BM25 leads).
            f @ (Fusion::Agreement { .. }
            | Fusion::Confidence { .. }
            | Fusion::Standout
            | Fusion::StandoutCoverage) => f,
        }
    }

    fn position(hits: &[FusedHit], id: &str) -> usize {
        hits.iter().position(|h| h.id == id).unwrap_or(usize::MAX)
    }

    /// A measured coverage of `n`/64 (at most 1).
    fn coverage_at(n: u32) -> QuerySignals {
        QuerySignals {
            lexical_coverage: Some(f64::from(n.min(64)) / 64.0),
        }
    }

    /// Fuses the legs whole and cut at `limit`, checks the contract every min-max mode keeps
    /// (every id of a leg once, with its legs' ranks; min(limit, |union|) hits; a cut is the
    /// whole's prefix; scores sorted in [0, 1]) and returns the whole.
    fn min_max_contract(
        fusion: Fusion,
        bm25: &[LegHit],
        vector: &[LegHit],
        limit: usize,
        signals: QuerySignals,
    ) -> Result<Vec<FusedHit>, TestCaseError> {
        let whole = fuse_with(fusion, bm25, vector, usize::MAX, signals);
        let cut = fuse_with(fusion, bm25, vector, limit, signals);
        prop_assert_eq!(&cut[..], &whole[..limit.min(whole.len())]);
        prop_assert_eq!(whole.len(), distinct(&[bm25, vector]).len());
        let mut seen = HashSet::new();
        for h in &whole {
            prop_assert!(seen.insert(h.id.clone()));
            prop_assert_eq!(h.bm25.is_some(), bm25.iter().any(|x| x.id == h.id));
            prop_assert_eq!(h.vector.is_some(), vector.iter().any(|x| x.id == h.id));
        }
        prop_assert!(whole.windows(2).all(|w| w[0].score >= w[1].score));
        prop_assert!(whole.iter().all(|h| (0.0..=1.0).contains(&h.score)));
        Ok(whole)
    }

    fn distinct(legs: &[&[LegHit]]) -> HashSet<String> {
        legs.iter()
            .flat_map(|l| l.iter().map(|h| h.id.clone()))
            .collect()
    }

    proptest! {
        /// (a) RRF: moving a hit earlier in one leg never moves it later in the fused list.
        #[test]
        fn rrf_promotion_is_monotone(
            bm25 in unique_leg(),
            vector in unique_leg(),
            k in 0u32..=120,
            in_bm25 in any::<bool>(),
            from in any::<prop::sample::Index>(),
            to in any::<prop::sample::Index>(),
        ) {
            let fusion = Fusion::Rrf { k: f64::from(k) };
            let (mut b2, mut v2) = (bm25.clone(), vector.clone());
            let target_leg = if in_bm25 { &mut b2 } else { &mut v2 };
            prop_assume!(!target_leg.is_empty());
            let i = from.index(target_leg.len());
            let j = to.index(i + 1); // j <= i
            let hit = target_leg.remove(i);
            let id = hit.id.clone();
            target_leg.insert(j, hit);
            let before = fuse(fusion, &bm25, &vector, usize::MAX);
            let after = fuse(fusion, &b2, &v2, usize::MAX);
            prop_assert!(position(&after, &id) <= position(&before, &id));
        }

        /// (a) Min-max: raising a hit's score in one leg (leg kept sorted) never lowers it.
        #[test]
        fn min_max_raise_is_monotone(
            bm25 in unique_leg(),
            vector in unique_leg(),
            n in 0u32..=64,
            in_bm25 in any::<bool>(),
            which in any::<prop::sample::Index>(),
            delta in 1u8..6,
        ) {
            let fusion = Fusion::MinMax { bm25_weight: f64::from(n) / 64.0 };
            let (mut b2, mut v2) = (bm25.clone(), vector.clone());
            let target_leg = if in_bm25 { &mut b2 } else { &mut v2 };
            prop_assume!(!target_leg.is_empty());
            let i = which.index(target_leg.len());
            target_leg[i].score += f32::from(delta);
            let id = target_leg[i].id.clone();
            target_leg.sort_by(|a, b| b.score.total_cmp(&a.score)); // stable
            let before = fuse(fusion, &bm25, &vector, usize::MAX);
            let after = fuse(fusion, &b2, &v2, usize::MAX);
            prop_assert!(position(&after, &id) <= position(&before, &id));
        }

        /// (b) With one leg empty, the other leg's order is kept.
        #[test]
        fn one_empty_leg_keeps_order(
            hits in unique_leg(),
            fusion in any_mode(),
            as_bm25 in any::<bool>(),
            limit in 0usize..=12,
        ) {
            let (b, v): (&[LegHit], &[LegHit]) = if as_bm25 { (&hits, &[]) } else { (&[], &hits) };
            let fused = fuse(fusion, b, v, limit);
            let expected: Vec<&str> = hits.iter().map(|h| h.id.as_str()).take(limit).collect();
            let single_leg_mismatch = matches!(
                (fusion, as_bm25),
                (Fusion::Bm25Only, false) | (Fusion::VectorOnly, true)
            );
            if single_leg_mismatch {
                prop_assert!(fused.is_empty());
            } else {
                prop_assert_eq!(ids(&fused), expected);
            }
        }

        /// (c) Every fused id comes from a leg, none twice, even with duplicate inputs.
        #[test]
        fn ids_come_from_legs_once(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in any_mode(),
            limit in 0usize..=20,
        ) {
            let fused = fuse(fusion, &bm25, &vector, limit);
            let source = distinct(&[&bm25, &vector]);
            let mut seen = HashSet::new();
            for h in &fused {
                prop_assert!(source.contains(&h.id));
                prop_assert!(seen.insert(h.id.clone()), "duplicate {}", h.id);
                let in_bm25 = bm25.iter().any(|x| x.id == h.id);
                let in_vector = vector.iter().any(|x| x.id == h.id);
                prop_assert_eq!(h.bm25.is_some(), in_bm25);
                prop_assert_eq!(h.vector.is_some(), in_vector);
            }
        }

        /// (d) Swapping the legs (with mirrored weights) gives the same fused list.
        #[test]
        fn leg_order_does_not_matter(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in any_mode(),
            limit in 0usize..=20,
        ) {
            let straight = fuse(fusion, &bm25, &vector, limit);
            let swapped: Vec<FusedHit> = fuse(mirror(fusion), &vector, &bm25, limit)
                .into_iter()
                .map(|h| FusedHit { bm25: h.vector, vector: h.bm25, ..h })
                .collect();
            prop_assert_eq!(straight, swapped);
        }

        /// A cut fusion is the whole fusion's prefix (only the best `limit` are sorted).
        #[test]
        fn a_cut_is_the_prefix_of_the_whole(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in any_mode(),
            limit in 0usize..=20,
        ) {
            let whole = fuse(fusion, &bm25, &vector, usize::MAX);
            let cut = fuse(fusion, &bm25, &vector, limit);
            prop_assert_eq!(&cut[..], &whole[..limit.min(whole.len())]);
        }

        /// (e) Output length is min(limit, |union|) when fusing; the chosen leg's for one leg.
        #[test]
        fn output_length(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in any_mode(),
            limit in 0usize..=20,
        ) {
            let fused = fuse(fusion, &bm25, &vector, limit);
            let pool = match fusion {
                Fusion::Bm25Only => distinct(&[&bm25]),
                Fusion::VectorOnly => distinct(&[&vector]),
                _ => distinct(&[&bm25, &vector]),
            };
            prop_assert_eq!(fused.len(), limit.min(pool.len()));
        }

        /// Fused scores are sorted, and RRF scores equal the formula.
        #[test]
        fn scores_sorted_and_rrf_formula(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in fusing_mode(),
        ) {
            let fused = fuse(fusion, &bm25, &vector, usize::MAX);
            prop_assert!(fused.windows(2).all(|w| w[0].score >= w[1].score));
            if let Fusion::Rrf { k } = fusion {
                for h in &fused {
                    let part = |r: Option<LegRank>| r.map_or(0.0, |r| 1.0 / (k + f64::from(r.rank)));
                    prop_assert_eq!(h.score, part(h.bm25) + part(h.vector));
                }
            } else {
                prop_assert!(fused.iter().all(|h| (0.0..=1.0).contains(&h.score)));
            }
        }
    }

    fn confidence_mode() -> impl Strategy<Value = Fusion> {
        (
            0u32..=64,
            prop_oneof![
                Just(LexicalSignal::Coverage),
                Just(LexicalSignal::Margin),
                Just(LexicalSignal::CoverageAndMargin)
            ],
        )
            .prop_map(|(n, signal)| Fusion::Confidence {
                max_vector_weight: f64::from(n) / 64.0,
                signal,
            })
    }

    fn coverage() -> impl Strategy<Value = QuerySignals> {
        prop_oneof![
            Just(QuerySignals::default()),
            (0u32..=64).prop_map(|n| QuerySignals {
                lexical_coverage: Some(f64::from(n) / 64.0)
            }),
        ]
    }

    /// How many hits score strictly above `id` (its place, ties aside).
    fn beaten_by(hits: &[FusedHit], id: &str) -> usize {
        let Some(own) = hits.iter().find(|h| h.id == id) else {
            return usize::MAX;
        };
        // A hair of slack: rounding must not turn an exact tie into a defeat.
        hits.iter().filter(|h| h.score > own.score + 1e-9).count()
    }

    proptest! {
        /// The confidence modes keep the fusion's contract: every id from a leg, once, with
        /// its legs' ranks; min(limit, |union|) hits; a cut is the whole's prefix; scores
        /// sorted in [0, 1]; and BM25's weight between 1 - v and 1, as the formula says.
        #[test]
        fn confidence_keeps_the_fusion_contract(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in confidence_mode(),
            signals in coverage(),
            limit in 0usize..=20,
        ) {
            min_max_contract(fusion, &bm25, &vector, limit, signals)?;
            let Fusion::Confidence { max_vector_weight: v, signal } = fusion else {
                unreachable!()
            };
            let c = lexical_confidence(signal, &bm25, signals);
            prop_assert!((0.0..=1.0).contains(&c));
            let w = bm25_weight(fusion, &bm25, &vector, signals).expect("a min-max mode");
            prop_assert!(w >= 1.0 - v - 1e-12 && w <= 1.0 + 1e-12);
            prop_assert!((w - (1.0 - v * (1.0 - c))).abs() < 1e-12);
        }

        /// A fusion resolved for its query fuses exactly as the fusion itself, every mode.
        #[test]
        fn a_fusion_resolved_for_its_query_fuses_the_same(
            bm25 in dup_leg(),
            vector in dup_leg(),
            fusion in prop_oneof![
                any_mode(),
                confidence_mode(),
                Just(Fusion::Standout),
                Just(Fusion::StandoutCoverage),
                (0u32..=64).prop_map(|n| Fusion::Agreement { max_vector_weight: f64::from(n) / 64.0 }),
            ],
            signals in coverage(),
            limit in 0usize..=20,
        ) {
            let resolved = fusion.for_query(&bm25, &vector, signals);
            prop_assert_eq!(
                fuse_with(fusion, &bm25, &vector, limit, signals),
                fuse_with(resolved, &bm25, &vector, limit, signals)
            );
            prop_assert_eq!(
                bm25_weight(fusion, &bm25, &vector, signals),
                bm25_weight(resolved, &bm25, &vector, signals)
            );
        }

        /// Standout keeps the fusion's contract, reads the legs alike (swapping them mirrors
        /// the weight) and is scale-free (a leg's scores times a power of two change nothing).
        #[test]
        fn standout_is_symmetric_and_scale_free(
            bm25 in dup_leg(),
            vector in dup_leg(),
            shift in -8i32..=8,
            limit in 0usize..=20,
        ) {
            let none = QuerySignals::default();
            let whole = min_max_contract(Fusion::Standout, &bm25, &vector, limit, none)?;
            let w = bm25_weight(Fusion::Standout, &bm25, &vector, none).expect("weighted");
            prop_assert!((0.0..=1.0).contains(&w));
            let swapped = bm25_weight(Fusion::Standout, &vector, &bm25, none).expect("weighted");
            prop_assert!((w + swapped - 1.0).abs() < 1e-9, "{} + {}", w, swapped);
            let factor = 2f32.powi(shift);
            let scaled: Vec<LegHit> = bm25
                .iter()
                .map(|h| LegHit::new(h.id.clone(), h.score * factor))
                .collect();
            let w_scaled = bm25_weight(Fusion::Standout, &scaled, &vector, none).expect("weighted");
            prop_assert!((w - w_scaled).abs() < 1e-9, "{} against {}", w, w_scaled);
            let rescaled = fuse(Fusion::Standout, &scaled, &vector, usize::MAX);
            prop_assert_eq!(ids(&rescaled), ids(&whole));
        }

        /// Standout discounted by coverage keeps the fusion's contract, never gives BM25 more
        /// say than standout does, is standout at full coverage, and gives BM25 no less say
        /// as the coverage rises.
        #[test]
        fn standout_coverage_only_ever_discounts_bm25(
            bm25 in dup_leg(),
            vector in dup_leg(),
            low in 0u32..=64,
            rise in 0u32..=64,
            limit in 0usize..=20,
        ) {
            min_max_contract(Fusion::StandoutCoverage, &bm25, &vector, limit, coverage_at(low))?;
            let weight = |fusion: Fusion, n: u32| {
                bm25_weight(fusion, &bm25, &vector, coverage_at(n)).expect("weighted")
            };
            let standout = weight(Fusion::Standout, low);
            let covered = weight(Fusion::StandoutCoverage, low);
            prop_assert!((0.0..=1.0).contains(&covered));
            prop_assert!(covered <= standout + 1e-12, "{} above {}", covered, standout);
            prop_assert!(weight(Fusion::StandoutCoverage, low + rise) >= covered - 1e-12);
            prop_assert!((weight(Fusion::StandoutCoverage, 64) - standout).abs() < 1e-12);
        }

        /// Full confidence is BM25's order: with every key term covered and a lone BM25 hit
        /// or a clear margin of 1, no hit outranks one with a higher BM25 score.
        #[test]
        fn full_confidence_keeps_bm25_order(
            bm25 in unique_leg(),
            vector in unique_leg(),
            v in 0u32..=64,
        ) {
            let fusion = Fusion::Confidence {
                max_vector_weight: f64::from(v) / 64.0,
                signal: LexicalSignal::Coverage,
            };
            let full = QuerySignals { lexical_coverage: Some(1.0) };
            let fused = fuse_with(fusion, &bm25, &vector, usize::MAX, full);
            let score = |id: &str| bm25.iter().find(|h| h.id == id).map(|h| h.score);
            let in_bm25: Vec<f32> = fused.iter().filter_map(|h| score(&h.id)).collect();
            prop_assert!(in_bm25.windows(2).all(|w| w[0] >= w[1]), "{:?}", in_bm25);
        }

        /// No confidence at the full vector weight is the vector leg's order.
        #[test]
        fn no_confidence_keeps_vector_order(bm25 in unique_leg(), vector in unique_leg()) {
            let fusion = Fusion::Confidence {
                max_vector_weight: 1.0,
                signal: LexicalSignal::Coverage,
            };
            let none = QuerySignals { lexical_coverage: Some(0.0) };
            let fused = fuse_with(fusion, &bm25, &vector, usize::MAX, none);
            let score = |id: &str| vector.iter().find(|h| h.id == id).map(|h| h.score);
            let in_vector: Vec<f32> = fused.iter().filter_map(|h| score(&h.id)).collect();
            prop_assert!(in_vector.windows(2).all(|w| w[0] >= w[1]), "{:?}", in_vector);
        }

        /// More confidence never costs BM25's best hit its place: as the coverage rises, no
        /// more hits score above it than before.
        #[test]
        fn more_confidence_never_demotes_bm25s_best_hit(
            bm25 in unique_leg(),
            vector in unique_leg(),
            v in 0u32..=64,
            low in 0u32..=64,
            rise in 0u32..=64,
        ) {
            prop_assume!(!bm25.is_empty());
            let fusion = Fusion::Confidence {
                max_vector_weight: f64::from(v) / 64.0,
                signal: LexicalSignal::CoverageAndMargin,
            };
            let before = fuse_with(fusion, &bm25, &vector, usize::MAX, coverage_at(low));
            let after = fuse_with(fusion, &bm25, &vector, usize::MAX, coverage_at(low + rise));
            let best = bm25[0].id.as_str();
            prop_assert!(beaten_by(&after, best) <= beaten_by(&before, best));
        }

        /// The margin is scale-free: BM25 scores scaled by a power of two fuse the same.
        #[test]
        fn bm25_scale_does_not_matter(
            bm25 in unique_leg(),
            vector in unique_leg(),
            fusion in confidence_mode(),
            signals in coverage(),
            shift in -8i32..=8,
        ) {
            let scaled: Vec<LegHit> = bm25
                .iter()
                .map(|h| LegHit::new(h.id.clone(), h.score * 2f32.powi(shift)))
                .collect();
            let plain = fuse_with(fusion, &bm25, &vector, usize::MAX, signals);
            let rescaled = fuse_with(fusion, &scaled, &vector, usize::MAX, signals);
            prop_assert_eq!(ids(&plain), ids(&rescaled));
            prop_assert!(plain.iter().zip(&rescaled).all(|(a, b)| a.score == b.score));
        }
    }
}
