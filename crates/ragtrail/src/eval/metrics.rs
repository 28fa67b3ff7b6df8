//! Ranking metrics with the trec_eval / BEIR conventions, so that a figure computed here can be
//! set beside a published one.
//!
//! - **Relevance** is graded: a judgment's grade is its gain. A document is *relevant* when its
//!   grade is ≥ 1; grades ≤ 0 and unjudged documents gain nothing.
//! - **nDCG@k**: `Σ gain / log2(rank + 1)` over the first `k` results, divided by the same sum
//!   for the ideal ranking of every judged document of the query (best grades first). This is
//!   trec_eval's `ndcg_cut.k`, which BEIR reports.
//! - **Recall@k**: relevant documents in the first `k` results over all relevant documents of
//!   the query (trec_eval's `recall.k`).
//! - **MRR@k**: `1 / rank` of the first relevant result within `k`, else 0 (BEIR's `mrr@k`).
//! - **Ties**: a run is ordered as trec_eval orders it: score descending, then document id
//!   descending (byte order). [`rank_run`] applies that order; every metric here takes a ranked
//!   list, so callers that already have an order (an engine's own tie-break) can pass it as is.
//! - **A query without any relevant document** has no defined nDCG or recall (the ideal gain
//!   is 0): the metrics return `None` and the query is left out of the means, as BEIR does
//!   (its loader keeps only queries with judged relevant documents). The caller reports how
//!   many queries were left out.
//! - A document listed twice counts once, at its first rank.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

/// Judgments of one query: document id → grade.
pub type Judgments = HashMap<String, i32>;

/// Judgments of every query: query id → its judgments.
pub type Qrels = HashMap<String, Judgments>;

/// The cut-offs reported for every query.
pub const NDCG_K: usize = 10;
/// Recall is reported at 10 and at this depth.
pub const DEEP_K: usize = 100;

/// Orders a scored run the way trec_eval does: score descending, ties by id descending.
/// Non-finite scores sort last.
pub fn rank_run(run: &mut [(String, f64)]) {
    run.sort_by(|(a_id, a), (b_id, b)| {
        let a = if a.is_finite() { *a } else { f64::NEG_INFINITY };
        let b = if b.is_finite() { *b } else { f64::NEG_INFINITY };
        b.total_cmp(&a).then_with(|| b_id.cmp(a_id))
    });
}

/// Whether the query has at least one relevant (grade ≥ 1) document.
pub fn has_relevant(judgments: &Judgments) -> bool {
    judgments.values().any(|&g| g >= 1)
}

fn gain(judgments: &Judgments, id: &str) -> f64 {
    judgments.get(id).map_or(0.0, |&g| f64::from(g.max(0)))
}

/// The ranked list with later duplicates removed, cut to `k`.
fn first_k<S: AsRef<str>>(ranked: &[S], k: usize) -> Vec<&str> {
    let mut seen = HashSet::new();
    ranked
        .iter()
        .map(AsRef::as_ref)
        .filter(|id| seen.insert(*id))
        .take(k)
        .collect()
}

fn discount(rank0: usize) -> f64 {
    // rank0 is 0-based: the first result has discount log2(2) = 1.
    ((rank0 + 2) as f64).log2()
}

/// nDCG at `k` (see the module docs); `None` when the query has no relevant document.
pub fn ndcg_at<S: AsRef<str>>(ranked: &[S], judgments: &Judgments, k: usize) -> Option<f64> {
    if !has_relevant(judgments) {
        return None;
    }
    let dcg: f64 = first_k(ranked, k)
        .iter()
        .enumerate()
        .map(|(i, id)| gain(judgments, id) / discount(i))
        .sum();
    let mut ideal: Vec<f64> = judgments
        .values()
        .map(|&g| f64::from(g.max(0)))
        .filter(|&g| g > 0.0)
        .collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| g / discount(i))
        .sum();
    Some(dcg / idcg)
}

/// Recall at `k`; `None` when the query has no relevant document.
pub fn recall_at<S: AsRef<str>>(ranked: &[S], judgments: &Judgments, k: usize) -> Option<f64> {
    let relevant = judgments.values().filter(|&&g| g >= 1).count();
    if relevant == 0 {
        return None;
    }
    let found = first_k(ranked, k)
        .iter()
        .filter(|id| judgments.get(**id).is_some_and(|&g| g >= 1))
        .count();
    Some(found as f64 / relevant as f64)
}

/// Reciprocal rank of the first relevant result within `k`; `None` when the query has no
/// relevant document.
pub fn mrr_at<S: AsRef<str>>(ranked: &[S], judgments: &Judgments, k: usize) -> Option<f64> {
    if !has_relevant(judgments) {
        return None;
    }
    Some(
        first_k(ranked, k)
            .iter()
            .position(|id| judgments.get(*id).is_some_and(|&g| g >= 1))
            .map_or(0.0, |i| 1.0 / (i + 1) as f64),
    )
}

/// The four figures reported per query and per mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scores {
    pub ndcg_at_10: f64,
    pub recall_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
}

impl Scores {
    /// The scores of one ranked list; `None` when the query has no relevant document.
    pub fn of<S: AsRef<str>>(ranked: &[S], judgments: &Judgments) -> Option<Self> {
        Some(Self {
            ndcg_at_10: ndcg_at(ranked, judgments, NDCG_K)?,
            recall_at_10: recall_at(ranked, judgments, NDCG_K)?,
            recall_at_100: recall_at(ranked, judgments, DEEP_K)?,
            mrr_at_10: mrr_at(ranked, judgments, NDCG_K)?,
        })
    }

    /// The mean of each figure (all zero for no queries).
    pub fn mean<'a>(all: impl IntoIterator<Item = &'a Scores>) -> Self {
        let mut sum = Scores::default();
        let mut n = 0usize;
        for s in all {
            sum.ndcg_at_10 += s.ndcg_at_10;
            sum.recall_at_10 += s.recall_at_10;
            sum.recall_at_100 += s.recall_at_100;
            sum.mrr_at_10 += s.mrr_at_10;
            n += 1;
        }
        if n == 0 {
            return sum;
        }
        let n = n as f64;
        Scores {
            ndcg_at_10: sum.ndcg_at_10 / n,
            recall_at_10: sum.recall_at_10 / n,
            recall_at_100: sum.recall_at_100 / n,
            mrr_at_10: sum.mrr_at_10 / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, i32)]) -> Judgments {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("defined");
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn binary_relevance_by_hand() {
        // Relevant: d1, d3, d9 (never retrieved). Ranked: d2 d1 d4 d3.
        let j = judged(&[("d1", 1), ("d3", 1), ("d9", 1), ("d2", 0)]);
        let ranked = ["d2", "d1", "d4", "d3"];
        // DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3) + 1/log2(4).
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2() + 0.5;
        close(ndcg_at(&ranked, &j, 10), dcg / idcg);
        close(recall_at(&ranked, &j, 10), 2.0 / 3.0);
        close(recall_at(&ranked, &j, 2), 1.0 / 3.0);
        close(mrr_at(&ranked, &j, 10), 0.5);
        close(mrr_at(&ranked, &j, 1), 0.0);
        // The cut applies to the run, not to the ideal: at k = 1 the ideal is 1.
        close(ndcg_at(&ranked, &j, 1), 0.0);
    }

    #[test]
    fn graded_relevance_uses_the_grade_as_gain() {
        // Grades: a=2, b=1, c=0 (judged non-relevant). Ranked: b a c.
        let j = judged(&[("a", 2), ("b", 1), ("c", 0)]);
        let ranked = ["b", "a", "c"];
        // DCG = 1/1 + 2/log2(3); IDCG = 2/1 + 1/log2(3).
        let want = (1.0 + 2.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        close(ndcg_at(&ranked, &j, 10), want);
        close(ndcg_at(&["a", "b"], &j, 10), 1.0);
        // Recall and MRR count any grade ≥ 1 as relevant.
        close(recall_at(&ranked, &j, 1), 0.5);
        close(mrr_at(&ranked, &j, 10), 1.0);
        // A negative grade gains nothing (and is not relevant).
        let neg = judged(&[("a", 1), ("x", -1)]);
        close(ndcg_at(&["x", "a"], &neg, 10), 1.0 / 3f64.log2());
    }

    #[test]
    fn a_query_without_relevant_documents_is_undefined() {
        let none = judged(&[("a", 0), ("b", 0)]);
        assert_eq!(ndcg_at(&["a"], &none, 10), None);
        assert_eq!(recall_at(&["a"], &none, 10), None);
        assert_eq!(mrr_at(&["a"], &none, 10), None);
        assert_eq!(Scores::of(&["a"], &none), None);
        assert_eq!(Scores::of::<&str>(&[], &Judgments::new()), None);
        // An empty run for a query that has relevant documents scores 0, not None.
        let one = judged(&[("a", 1)]);
        assert_eq!(Scores::of::<&str>(&[], &one), Some(Scores::default()));
    }

    #[test]
    fn ties_follow_trec_eval_and_duplicates_count_once() {
        // b and c tie: trec_eval puts the larger id first, so c ranks above b.
        let mut run = vec![
            ("b".to_string(), 1.0),
            ("a".to_string(), 2.0),
            ("c".to_string(), 1.0),
            ("z".to_string(), f64::NAN),
        ];
        rank_run(&mut run);
        let ids: Vec<&str> = run.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b", "z"]);
        let j = judged(&[("b", 1)]);
        close(mrr_at(&ids, &j, 10), 1.0 / 3.0);
        close(ndcg_at(&ids, &j, 10), 1.0 / 4f64.log2());
        // A repeated id neither gains twice nor pushes later ids down.
        close(
            ndcg_at(&["b", "b", "c"], &judged(&[("b", 1), ("c", 1)]), 10),
            1.0,
        );
        close(
            recall_at(&["b", "b"], &judged(&[("b", 1), ("c", 1)]), 2),
            0.5,
        );
    }

    #[test]
    fn means_average_each_figure() {
        let a = Scores {
            ndcg_at_10: 1.0,
            recall_at_10: 0.5,
            recall_at_100: 1.0,
            mrr_at_10: 1.0,
        };
        let b = Scores::default();
        let m = Scores::mean([&a, &b]);
        assert_eq!(m.ndcg_at_10, 0.5);
        assert_eq!(m.recall_at_10, 0.25);
        assert_eq!(Scores::mean([]), Scores::default());
    }
}
