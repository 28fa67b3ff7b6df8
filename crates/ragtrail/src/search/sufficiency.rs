//! Is there evidence at all? Fused scores cannot say: RRF depends only on ranks, and BM25 finds
//! *something* for any common word. The decision instead asks how much of the keywords' meaning
//! the hits cover: every key term (stop words dropped) is weighted by its rarity in the index
//! (BM25's IDF; a term the index has never seen weighs the most), and a hit covers the terms
//! that occur in its titlePath or text. A hit list whose best coverage stays under the bar is
//! reported as insufficient, with the key terms nothing covered.

use serde::{Deserialize, Serialize};

/// Thresholds of the decision, calibrated on the golden set (see BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SufficiencyThresholds {
    /// Minimum IDF-weighted share of the key terms found in one hit.
    pub min_coverage: f64,
}

impl Default for SufficiencyThresholds {
    fn default() -> Self {
        Self { min_coverage: 0.35 }
    }
}

/// The decision and why, returned with every `searchDocs` result (and recorded in traces).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, rename_all = "camelCase")]
pub struct Sufficiency {
    pub sufficient: bool,
    pub reason: String,
    /// Best IDF-weighted key-term coverage of a single hit, 0..=1.
    pub coverage: f64,
    /// IDF-weighted share of the key terms found in any hit.
    #[serde(default)]
    pub union_coverage: f64,
    /// Key terms that no hit contains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_terms: Vec<String>,
}

/// A key term of the query and its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyTerm {
    /// The word (lowercased); what [`covered`] looks for.
    pub term: String,
    pub weight: f64,
    /// The analysed index terms of the word.
    pub parts: Vec<String>,
}

/// BM25's inverse document frequency.
pub fn idf(df: u64, n: u64) -> f64 {
    let (df, n) = (df as f64, n as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The content words of `keywords` (jieba words, HMM on so that words the dictionary lacks stay
/// whole; stop words dropped), each weighted by the IDF of its rarest part in the index.
pub fn key_terms(keywords: &[String], doc_freq: &dyn Fn(&str) -> u64, n: u64) -> Vec<KeyTerm> {
    let words: Vec<Vec<ContentWord>> = keywords.iter().map(|k| content_words(k)).collect();
    key_terms_of(&words, doc_freq, n)
}

/// A content word of a keyword: what [`KeyTerm::term`] would be, and its analysed parts.
#[derive(Debug, Clone)]
pub(crate) struct ContentWord {
    pub term: String,
    pub parts: Vec<String>,
}

/// The content words of one keyword, each once, in order (see [`key_terms`]).
pub(crate) fn content_words(keyword: &str) -> Vec<ContentWord> {
    let mut out: Vec<ContentWord> = Vec::new();
    for word in crate::text::jieba().cut(keyword, true) {
        let word = word.word.trim().to_lowercase();
        // Spaces and punctuation (about half of a sentence's jieba words) analyse to nothing:
        // the analyser keeps only words with a letter or digit, and bigrams of CJK characters.
        // A stop word is dropped whatever its terms. Neither is analysed.
        if !word
            .chars()
            .any(|c| c.is_alphanumeric() || crate::text::is_cjk(c))
            || crate::text::is_stop_term(&word)
        {
            continue;
        }
        let parts: Vec<String> = crate::text::terms(&word)
            .into_iter()
            .map(|t| t.text)
            .collect();
        if parts.is_empty()
            || crate::text::is_stop_term(&word)
            || parts.iter().all(|p| crate::text::is_stop_term(p))
        {
            continue;
        }
        let term = if parts.len() == 1 {
            parts[0].clone()
        } else {
            word
        };
        if out.iter().all(|w| w.term != term) {
            out.push(ContentWord { term, parts });
        }
    }
    out
}

/// [`key_terms`] of keywords already split into their content words (one list per keyword):
/// each word once, first keyword first, weighted by rarity.
pub(crate) fn key_terms_of(
    words: &[Vec<ContentWord>],
    doc_freq: &dyn Fn(&str) -> u64,
    n: u64,
) -> Vec<KeyTerm> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for w in words.iter().flatten() {
        if !seen.insert(w.term.as_str()) {
            continue;
        }
        let df = w.parts.iter().map(|p| doc_freq(p)).min().unwrap_or(0);
        out.push(KeyTerm {
            term: w.term.clone(),
            weight: idf(df, n),
            parts: w.parts.clone(),
        });
    }
    out
}

/// The key terms a text contains: a CJK word as written, a Latin word by its analysed terms.
pub fn covered(
    key_terms: &[KeyTerm],
    text_terms: &std::collections::HashSet<String>,
    lowercase_text: &str,
) -> std::collections::HashSet<String> {
    covered_by(key_terms, |t| text_terms.contains(t), lowercase_text)
}

/// [`covered`], with the text's analysed terms given as a membership test.
pub fn covered_by(
    key_terms: &[KeyTerm],
    has_term: impl Fn(&str) -> bool,
    lowercase_text: &str,
) -> std::collections::HashSet<String> {
    key_terms
        .iter()
        .zip(covered_mask(key_terms, has_term, lowercase_text))
        .filter(|(_, covered)| *covered)
        .map(|(k, _)| k.term.clone())
        .collect()
}

/// For each key term in order, whether the text covers it (the rule of [`covered`]): what a
/// search keeps per hit, without copying a term (the copies and their set were a tenth of a
/// `searchDocs` call).
pub(crate) fn covered_mask(
    key_terms: &[KeyTerm],
    has_term: impl Fn(&str) -> bool,
    lowercase_text: &str,
) -> Vec<bool> {
    covered_mask_by(
        key_terms,
        |i, j| has_term(&key_terms[i].parts[j]),
        lowercase_text,
    )
}

/// [`covered_mask`], with the text's analysed terms asked by place: `has_part(i, j)` tells
/// whether the text holds part `j` of key term `i` (a caller that looked each distinct part
/// up once answers from that).
pub(crate) fn covered_mask_by(
    key_terms: &[KeyTerm],
    has_part: impl Fn(usize, usize) -> bool,
    lowercase_text: &str,
) -> Vec<bool> {
    key_terms
        .iter()
        .enumerate()
        .map(|(i, k)| {
            if k.term.chars().any(crate::text::is_cjk) {
                lowercase_text.contains(&k.term)
            } else {
                (0..k.parts.len()).all(|j| has_part(i, j))
            }
        })
        .collect()
}

/// Decides sufficiency from the key terms and, per hit, the set of terms it contains.
pub fn decide(
    key_terms: &[KeyTerm],
    hit_terms: &[std::collections::HashSet<String>],
    thresholds: SufficiencyThresholds,
) -> Sufficiency {
    decide_over(
        key_terms,
        hit_terms.len(),
        |h, i| hit_terms[h].contains(&key_terms[i].term),
        thresholds,
    )
}

/// The judgement stage of a [`super::Searcher`]: [`decide`] over the key terms each found hit
/// covers. Each hit's [`super::FoundHit::covered`] answers for the key term at the same place,
/// which is [`decide`]'s question (does the hit hold this term) because a search's key terms
/// are distinct ([`key_terms_of`] keeps each once).
pub(crate) fn judge(
    key_terms: &[KeyTerm],
    hits: &[super::FoundHit<'_>],
    thresholds: SufficiencyThresholds,
) -> Sufficiency {
    decide_over(
        key_terms,
        hits.len(),
        |h, i| hits[h].covered.get(i).copied().unwrap_or(false),
        thresholds,
    )
}

/// [`decide`] over `hits` hits, `has(h, i)` telling whether hit `h` holds key term `i`.
fn decide_over(
    key_terms: &[KeyTerm],
    hits: usize,
    has: impl Fn(usize, usize) -> bool,
    thresholds: SufficiencyThresholds,
) -> Sufficiency {
    if hits == 0 {
        return Sufficiency {
            sufficient: false,
            reason: "no hits".to_string(),
            coverage: 0.0,
            union_coverage: 0.0,
            missing_terms: key_terms.iter().map(|k| k.term.clone()).collect(),
        };
    }
    let total: f64 = key_terms.iter().map(|k| k.weight).sum();
    if total <= 0.0 {
        return Sufficiency {
            sufficient: false,
            reason: "the keywords have no content words (only stop words)".to_string(),
            coverage: 0.0,
            union_coverage: 0.0,
            missing_terms: Vec::new(),
        };
    }
    let coverage = (0..hits)
        .map(|h| {
            key_terms
                .iter()
                .enumerate()
                .filter(|&(i, _)| has(h, i))
                .map(|(_, k)| k.weight)
                .sum::<f64>()
                / total
        })
        .fold(0.0, f64::max);
    let missing_terms: Vec<String> = key_terms
        .iter()
        .enumerate()
        .filter(|&(i, _)| !(0..hits).any(|h| has(h, i)))
        .map(|(_, k)| k.term.clone())
        .collect();
    let missing_weight: f64 = key_terms
        .iter()
        .filter(|k| missing_terms.contains(&k.term))
        .map(|k| k.weight)
        .sum();
    let union_coverage = 1.0 - missing_weight / total;
    let sufficient = coverage >= thresholds.min_coverage;
    let reason = if sufficient {
        format!(
            "best hit covers {:.0}% of the key terms (bar {:.0}%)",
            coverage * 100.0,
            thresholds.min_coverage * 100.0
        )
    } else if missing_terms.is_empty() {
        format!(
            "no single hit covers enough of the key terms: best {:.0}%, bar {:.0}%",
            coverage * 100.0,
            thresholds.min_coverage * 100.0
        )
    } else {
        format!(
            "best hit covers {:.0}% of the key terms (bar {:.0}%); not found in any hit: {}",
            coverage * 100.0,
            thresholds.min_coverage * 100.0,
            missing_terms.join(", ")
        )
    };
    Sufficiency {
        sufficient,
        reason,
        coverage,
        union_coverage,
        missing_terms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn set(words: &[&str]) -> HashSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn function_words_are_never_key_terms() {
        // 去, 来 and 谁 frame the question; a document need not say them to answer it.
        let keys = key_terms(&["下周去深圳出差，住宿谁来批？".to_string()], &|_| 1, 100);
        let terms: Vec<&str> = keys.iter().map(|k| k.term.as_str()).collect();
        assert!(
            terms.contains(&"深圳") && terms.contains(&"出差"),
            "{terms:?}"
        );
        for word in ["去", "来", "谁"] {
            assert!(!terms.contains(&word), "{word} in {terms:?}");
        }
    }

    fn kt(term: &str, weight: f64) -> KeyTerm {
        KeyTerm {
            term: term.into(),
            weight,
            parts: vec![term.into()],
        }
    }

    #[test]
    fn key_terms_keep_unknown_words_whole_and_weigh_them_by_rarity() {
        let df = |t: &str| match t {
            "出差" => 50,
            "报销" => 80,
            _ => 0,
        };
        let keys = key_terms(&["出差可以报销洗衣服的钱吗".to_string()], &df, 100);
        let names: Vec<&str> = keys.iter().map(|k| k.term.as_str()).collect();
        assert!(
            names.contains(&"出差") && names.contains(&"报销"),
            "{names:?}"
        );
        assert!(
            !names.contains(&"可以") && !names.contains(&"的"),
            "{names:?}"
        );
        let rare = keys
            .iter()
            .find(|k| k.term.contains('洗'))
            .expect("the laundry word");
        let common = keys
            .iter()
            .find(|k| k.term == "出差")
            .map(|k| k.weight)
            .unwrap_or(f64::MAX);
        assert!(rare.weight > common);
        let text = "出差期间的洗衣服费用可以报销";
        let terms = crate::text::terms(text)
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert!(covered(&keys, &terms, text).contains(&rare.term));
        assert!(!covered(&keys, &terms, "出差报销").contains(&rare.term));
    }

    #[test]
    fn a_rare_missing_term_makes_the_evidence_insufficient() {
        let keys = [kt("出差", 1.0), kt("报销", 0.5), kt("洗衣费", 6.0)];
        let d = decide(
            &keys,
            &[set(&["出差", "报销"])],
            SufficiencyThresholds::default(),
        );
        assert!(!d.sufficient);
        assert_eq!(d.missing_terms, vec!["洗衣费"]);
        assert!(d.reason.contains("洗衣费"));
    }

    #[test]
    fn covering_the_rare_terms_is_enough_even_without_common_ones() {
        let keys = [kt("高铁", 3.0), kt("凭证", 3.0), kt("报销", 0.5)];
        let d = decide(
            &keys,
            &[set(&["高铁", "凭证"]), set(&["报销"])],
            SufficiencyThresholds::default(),
        );
        assert!(d.sufficient, "{d:?}");
        assert!(d.missing_terms.is_empty());
    }

    #[test]
    fn coverage_is_per_hit_not_pooled() {
        let keys = [kt("a", 1.0), kt("b", 1.0)];
        let d = decide(
            &keys,
            &[set(&["a"]), set(&["b"])],
            SufficiencyThresholds { min_coverage: 0.9 },
        );
        assert!(!d.sufficient);
        assert!((d.coverage - 0.5).abs() < 1e-9);
    }

    #[test]
    fn no_hits_and_no_content_words_are_insufficient() {
        assert!(!decide(&[kt("a", 1.0)], &[], SufficiencyThresholds::default()).sufficient);
        assert!(!decide(&[], &[set(&["a"])], SufficiencyThresholds::default()).sufficient);
    }

    /// Texts and keywords from a small vocabulary of Latin and CJK words, so that keys are
    /// covered, half-covered (one part of a multi-part word) and missed.
    const WORDS: [&str; 8] = [
        "hotel", "receipts", "taxi", "covid-19", "报销", "凭证", "高铁", "the",
    ];

    fn words_of(picks: &[usize]) -> String {
        picks
            .iter()
            .map(|&i| WORDS[i % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// [`content_words`] as it was before it skipped words that analyse to nothing: the
    /// oracle the skipping is held to.
    fn content_words_analysing_every_word(keyword: &str) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for word in crate::text::jieba().cut(keyword, true) {
            let word = word.word.trim().to_lowercase();
            let parts: Vec<String> = crate::text::terms(&word)
                .into_iter()
                .map(|t| t.text)
                .collect();
            if parts.is_empty()
                || crate::text::is_stop_term(&word)
                || parts.iter().all(|p| crate::text::is_stop_term(p))
            {
                continue;
            }
            let term = if parts.len() == 1 {
                parts[0].clone()
            } else {
                word
            };
            if out.iter().all(|(t, _)| *t != term) {
                out.push((term, parts));
            }
        }
        out
    }

    proptest::proptest! {
        /// Skipping the words that analyse to nothing (spaces, punctuation, stop words) keeps
        /// every content word, in order, with its parts.
        #[test]
        fn content_words_skip_only_what_analyses_to_nothing(
            pieces in proptest::collection::vec(0usize..24, 0..16),
        ) {
            const PIECES: [&str; 24] = [
                "报销", "凭证", "的", " ", "  ", ".", "。", "，", "・・", "ー", "・", "Hotel",
                "the", "what", "COVID-19", "3.5%", "e.g.", "don't", "\u{3000}", "年假", "\t",
                "？", "a", "Über",
            ];
            let keyword: String = pieces.iter().map(|&i| PIECES[i]).collect();
            let now: Vec<(String, Vec<String>)> = content_words(&keyword)
                .into_iter()
                .map(|w| (w.term, w.parts))
                .collect();
            proptest::prop_assert_eq!(now, content_words_analysing_every_word(&keyword));
        }

        /// What a search keeps per hit (one flag per key term) decides as the sets of terms
        /// did: the same coverage, union coverage, missing terms and reason.
        #[test]
        fn masks_decide_as_the_sets_of_covered_terms(
            keywords in proptest::collection::vec(proptest::collection::vec(0usize..8, 1..4), 1..4),
            texts in proptest::collection::vec(proptest::collection::vec(0usize..8, 0..6), 0..5),
            df in 0u64..5,
        ) {
            let keywords: Vec<String> = keywords.iter().map(|k| words_of(k)).collect();
            let keys = key_terms(&keywords, &|t: &str| df + t.len() as u64 % 3, 10);
            let analysed: Vec<(HashSet<String>, String)> = texts
                .iter()
                .map(|t| {
                    let text = words_of(t);
                    let terms = crate::text::terms(&text).into_iter().map(|t| t.text).collect();
                    (terms, text.to_lowercase())
                })
                .collect();
            let sets: Vec<HashSet<String>> = analysed
                .iter()
                .map(|(terms, lower)| covered(&keys, terms, lower))
                .collect();
            let masks: Vec<Vec<bool>> = analysed
                .iter()
                .map(|(terms, lower)| covered_mask(&keys, |t| terms.contains(t), lower))
                .collect();
            let thresholds = SufficiencyThresholds::default();
            let by_sets = decide(&keys, &sets, thresholds);
            let by_masks = decide_over(&keys, masks.len(), |h, i| masks[h][i], thresholds);
            proptest::prop_assert_eq!(by_sets, by_masks);
        }
    }
}
