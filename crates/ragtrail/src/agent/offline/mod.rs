//! The offline heuristic planner: no network, deterministic, the default and the baseline.
//!
//! - Round 1 searches the question's content words (segmented, stop words dropped), rarest first.
//! - Later rounds follow what the best hits introduce and was not searched yet: names in
//!   《…》/“…”/"…" quotes and form codes such as `FIN-07` (policies point at each other that
//!   way), then names in prose (capitalised runs such as "Shirley Temple": the bridge of a
//!   multi-hop question) with the question words the naming hit lacks, else the headings of the
//!   best hits.
//! - It answers when the evidence covers the question (IDF-weighted key-term coverage of one
//!   returned chunk, the same measure as `searchDocs`' sufficiency) and no reference or name is
//!   left to follow, or when a round brought nothing new; it gives up when nothing covers the
//!   question.
//! - The answer is extractive: the returned sentences that best match the question, each with
//!   its citation and a verbatim quote; a chunk beyond the best one is cited only when it adds
//!   key terms (in its text or its heading) or answers a reference the others delegated.
//!
//! Nothing here knows the sample knowledge base: only text, term rarity and the hits.

use std::collections::{HashMap, HashSet};

use super::planner::{
    Observation, Planner, PlannerAction, PlannerContext, PlannerError, PlannerStep,
    ProposedCitation,
};
use crate::search::SearchHit;
use crate::search::sufficiency::{
    Sufficiency, SufficiencyThresholds, covered, covered_by, decide, idf, key_terms,
};
use crate::text::{self, char_len, is_stop_term};

/// Round-1 keywords at most: every content word the validator allows. A question's commoner
/// words often name the section that answers (golden set evidence recall 0.814 with the six
/// rarest, 0.838 with eight; HotpotQA joint recall after round 3 0.680 -> 0.738; BENCHMARKS.md).
const FIRST_ROUND_KEYWORDS: usize = super::MAX_KEYWORDS;
/// Names searched together when following the prose of the best hits: the bridge of a
/// multi-hop question is often not the best-scoring name of its sentence, and one search of
/// five hits has room for several (HotpotQA joint recall after round 3: 0.777 with one, 0.835
/// with two or three, 0.825 with four; BENCHMARKS.md).
const NAMES_PER_SEARCH: usize = 3;
/// Sentences in an extractive answer at most.
const ANSWER_SENTENCES: usize = 5;
/// Longest sentence quoted, in characters.
const MAX_SENTENCE_CHARS: usize = 220;
/// Chunks cited at most.
const MAX_CITED_CHUNKS: usize = 3;
/// Share of the question's (IDF-weighted) key terms a further chunk must add to be cited too.
const MIN_CITATION_GAIN: f64 = 0.2;
/// Weight of the best single sentence's key-term coverage in a chunk's citation score (the rest
/// is the whole chunk's). Golden set: citation precision 0.745 at 0, 0.773 at 0.3, 0.782 from
/// 0.4 to 0.7, 0.736 at 1 (BENCHMARKS.md).
const SENTENCE_SHARE: f64 = 0.5;

#[derive(Default)]
pub struct OfflinePlanner {
    thresholds: SufficiencyThresholds,
    question_words: Vec<(String, f64)>,
    /// Topic words carried over from the previous turn of a conversation (said in the reason).
    carried: Vec<String>,
    searched_terms: HashSet<String>,
    seen_chunks: HashSet<String>,
    followed: HashSet<String>,
    /// The question's nouns no chunk mentions ([`unknown_nouns`]); fixed for the run, so
    /// found once, with the question words.
    unknown_nouns: Vec<String>,
}

impl OfflinePlanner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_thresholds(thresholds: SufficiencyThresholds) -> Self {
        Self {
            thresholds,
            ..Self::default()
        }
    }
}

fn analysed(word: &str) -> Vec<String> {
    text::terms(word)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !is_stop_term(t))
        .collect()
}

/// The question's content words with their weight (the rarest analysed term in each).
fn question_words(question: &str, ctx: &PlannerContext<'_>) -> Vec<(String, f64)> {
    let mut seen = HashSet::new();
    // HMM on: it finds words the dictionary lacks (年假), which the index matches by bigrams.
    let tokens: Vec<String> = text::jieba()
        .cut(question, true)
        .into_iter()
        .map(|t| t.word.trim().to_string())
        .collect();
    let repaired = text::repaired_words(&tokens, &|t: &str| ctx.lookup.doc_freq(t));
    let mut words: Vec<(String, f64)> = tokens
        .into_iter()
        .chain(repaired)
        .filter(|w| !w.is_empty() && seen.insert(w.to_lowercase()))
        .filter_map(|w| {
            let terms = analysed(&w);
            // Rarest *known* term: a word the index has never seen cannot retrieve anything,
            // so it goes last (df 0 ⇒ weight 0), not first.
            let n = ctx.lookup.num_chunks();
            let weight = terms
                .iter()
                .map(|t| match ctx.lookup.doc_freq(t) {
                    0 => 0.0,
                    df => idf(df, n),
                })
                .fold(0.0, f64::max);
            let latin_letter = w.chars().all(|c| c.is_ascii_alphabetic()) && w.len() < 2;
            (!terms.is_empty() && !latin_letter).then_some((w, weight))
        })
        .collect();
    // Single characters are weak keywords; keep them only if no longer word the index knows is
    // left (a word it has never seen retrieves nothing: "东西坏了能换吗" still has 坏 and 换).
    if words
        .iter()
        .any(|(w, weight)| char_len(w) > 1 && *weight > 0.0)
    {
        words.retain(|(w, _)| char_len(w) > 1 || w.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    words.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    words
}

/// The question's common nouns that no chunk mentions: words of two or more CJK characters that
/// jieba's dictionary tags as nouns (`n`) and none of whose index terms occurs in any chunk the
/// run may see ("洗衣服", "月薪"). A question about a thing the knowledge base never names
/// cannot be answered from it, however well its other words are covered. `mentions` answers
/// under the run's access context, so the rule reveals nothing about other tenants' documents.
/// Proper names (`nr`, `ns`, …) are left out: a rule for "other cities" covers a city it does
/// not list. Words the HMM made up (not in the dictionary, "能报") are segmentation noise, and a
/// word with a known part ("坐飞机": 飞机) is something the knowledge base does talk about.
/// Chinese only: English has no part-of-speech tagger here.
fn unknown_nouns(question: &str, mentions: &dyn Fn(&str) -> bool) -> Vec<String> {
    let jieba = text::jieba();
    let mut out: Vec<String> = Vec::new();
    for tag in jieba.tag(question, true) {
        let word = tag.word.trim();
        if tag.tag != "n"
            || char_len(word) < 2
            || !word.chars().all(text::is_cjk)
            || !jieba.has_word(word)
            || out.iter().any(|w| w == word)
        {
            continue;
        }
        if !analysed(word).is_empty() && !mentions(word) {
            out.push(word.to_string());
        }
    }
    out
}

/// A greeting or thanks, and nothing else.
fn is_small_talk(question: &str) -> bool {
    const PHRASES: &[&str] = &[
        "你好",
        "您好",
        "嗨",
        "哈喽",
        "早上好",
        "下午好",
        "晚上好",
        "谢谢",
        "谢谢你",
        "谢谢您",
        "多谢",
        "感谢",
        "好的谢谢",
        "hi",
        "hello",
        "hey",
        "good morning",
        "good afternoon",
        "good evening",
        "thanks",
        "thank you",
        "thanks a lot",
        "thx",
        "ok thanks",
    ];
    let normalized: String = question
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| {
            !c.is_ascii_punctuation() && !matches!(c, '！' | '，' | '。' | '？' | '～' | '~')
        })
        .collect();
    let normalized = normalized.trim();
    PHRASES.contains(&normalized)
}

fn is_thanks(question: &str) -> bool {
    let q = question.to_lowercase();
    ["谢", "感谢", "thank", "thx"].iter().any(|w| q.contains(w))
}

/// Whether a question leans on the previous turn: short, or pointing back ("那…呢", "this").
fn refers_back(question: &str) -> bool {
    let q = question.trim().to_lowercase();
    const MARKERS: &[&str] = &[
        "那",
        "这个",
        "这些",
        "它",
        "其",
        "上面",
        "刚才",
        "呢",
        "what about",
        "how about",
        "that",
        "this",
        "those",
        "these",
        " it",
        "the same",
    ];
    let cjk = q.chars().filter(|c| text::is_cjk(*c)).count();
    let short = if cjk > 0 {
        cjk <= 12
    } else {
        q.split_whitespace().count() <= 6
    };
    short || MARKERS.iter().any(|m| q.contains(m))
}

/// The references of `text` named in a sentence that shares a question word, each with whether
/// it is strong (see [`references_with_strength`]) and the sentence's question-term weight. A
/// reference in a sentence about something else leads away from the question ("submit it in
/// 易报" sends a question about hotel rates to the expense system).
fn references_near_question(
    text: &str,
    weights: &HashMap<String, f64>,
) -> Vec<(String, bool, f64)> {
    let mut out = Vec::new();
    for sentence in sentences(text) {
        let sentence_terms: HashSet<String> =
            text::terms(sentence).into_iter().map(|t| t.text).collect();
        let score: f64 = weights
            .iter()
            .filter(|(t, _)| sentence_terms.contains(*t))
            .map(|(_, w)| w)
            .sum();
        if score > 0.0 {
            out.extend(
                references_with_strength(sentence)
                    .into_iter()
                    .map(|(r, strong)| (r, strong, score)),
            );
        }
    }
    out
}

/// Names a chunk points at: 《…》, “…”, 「…」, "…" quotes and codes like `FIN-07`, with whether
/// each is a document title (《…》) or a code: by convention those point at another rule or
/// form, while quotes often just name a term or a system.
fn references_with_strength(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (open, close) in [('《', '》'), ('“', '”'), ('「', '」'), ('"', '"')] {
        let mut rest = text;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            // American punctuation puts a sentence's comma or period inside the quotes
            // ("The Apprentice," he said): not part of the name.
            let name = after[..j]
                .trim()
                .trim_end_matches([',', '.', ';', ':', '，', '。', '；', '：']);
            let n = char_len(name);
            if (2..=24).contains(&n) && !name.contains('\n') {
                out.push((name.to_string(), open == '《'));
            }
            rest = &after[j + close.len_utf8()..];
        }
    }
    // Form and document codes: two or more capitals, a dash, digits (FIN-07, HR-12).
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_uppercase() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_uppercase() {
                i += 1;
            }
            if i - start >= 2
                && i + 1 < bytes.len()
                && bytes[i] == b'-'
                && bytes[i + 1].is_ascii_digit()
            {
                let mut end = i + 1;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                out.push((text[start..end].to_string(), true));
                i = end;
                continue;
            }
        }
        i += 1;
    }
    let mut seen = HashSet::new();
    out.retain(|(r, _)| seen.insert(r.clone()));
    out
}

/// Words that may join the capitalised words of one name ("Bank of England", "Kiss and Tell").
const NAME_JOINERS: &[&str] = &["of", "and", "the", "de", "von", "van", "for", "in", "&"];

/// Names in Latin-script prose: runs of capitalised words (joiners allowed inside), cut at
/// clause punctuation. Prose names the next thing to look up this way ("… portrayed by Shirley
/// Temple") far more often than in quotes.
fn names(sentence: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let flush = |run: &mut Vec<&str>, out: &mut Vec<String>| {
        while run.last().is_some_and(|w| NAME_JOINERS.contains(w)) {
            run.pop();
        }
        if !run.is_empty() {
            out.push(run.join(" "));
        }
        run.clear();
    };
    let mut run_start = 0;
    for (i, raw) in sentence.split_whitespace().enumerate() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let capital = word.chars().next().is_some_and(|c| c.is_ascii_uppercase());
        if capital || (!run.is_empty() && NAME_JOINERS.contains(&word)) {
            if run.is_empty() {
                run_start = i;
            }
            run.push(word);
        } else {
            // Every sentence starts with a capital: a lone first word is no name ("Complete the …").
            let capitals = run.iter().filter(|w| !NAME_JOINERS.contains(w)).count();
            if run_start == 0 && capitals == 1 {
                run.clear();
            }
            flush(&mut run, &mut out);
        }
        if raw.ends_with([',', '.', ';', ':', ')', '"', '?', '!']) {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    // Weekdays and months are capitalised too, but name no thing to look up.
    const CALENDAR: &[&str] = &[
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    out.retain(|n| char_len(n) <= 40 && !CALENDAR.contains(&n.as_str()));
    out
}

/// Sentences (and table rows) of a chunk, trimmed, separator rows dropped.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let end = i + c.len_utf8();
        let boundary = matches!(c, '。' | '！' | '？' | '；' | '\n')
            || (matches!(c, '.' | '!' | '?') && text[end..].starts_with(char::is_whitespace));
        if boundary {
            out.push(text[start..end].trim());
            start = end;
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| char_len(s) >= 4 && !s.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')));
    out
}

/// The next search's names (each with the titlePath it came from, best first) and the question
/// words the best name's chunk lacks.
struct NamesToFollow {
    names: Vec<(String, String)>,
    lacking: Vec<String>,
}

struct Scored<'a> {
    chunk: String,
    sentence: &'a str,
    score: f64,
    round: u32,
}

impl OfflinePlanner {
    /// The question with the topic words carried over from the previous turn, if any.
    fn effective_question(&self, ctx: &PlannerContext<'_>) -> String {
        if self.carried.is_empty() {
            ctx.question.to_string()
        } else {
            format!("{} {}", self.carried.join(" "), ctx.question)
        }
    }

    fn weights(&self) -> HashMap<String, f64> {
        let mut w = HashMap::new();
        for (word, weight) in &self.question_words {
            for t in analysed(word) {
                w.entry(t).or_insert(*weight);
            }
        }
        w
    }

    /// The `searchDocs` sufficiency decision, applied to the question's key terms and every
    /// chunk returned so far (a later round's keywords come from the hits themselves, so their
    /// own coverage says nothing about the question).
    fn question_sufficiency(&self, ctx: &PlannerContext<'_>) -> Sufficiency {
        let keys = key_terms(
            &[self.effective_question(ctx)],
            &|t: &str| ctx.lookup.doc_freq(t),
            ctx.lookup.num_chunks(),
        );
        let per_hit: Vec<HashSet<String>> = all_hits(ctx)
            .filter_map(|(h, _)| {
                let text = ctx.lookup.returned_chunk_text(&h.chunk_id)?;
                let terms: HashSet<String> = text::terms(&h.title_path)
                    .into_iter()
                    .chain(text::terms(text))
                    .map(|t| t.text)
                    .collect();
                Some(covered(
                    &keys,
                    &terms,
                    &format!("{}\n{}", h.title_path, text).to_lowercase(),
                ))
            })
            .collect();
        let mut sufficiency = decide(&keys, &per_hit, self.thresholds);
        if !self.unknown_nouns.is_empty() {
            let mentions = format!(
                "no chunk of the knowledge base mentions {}",
                self.unknown_nouns.join(", ")
            );
            // The coverage bar was met: its "bar 35%" would read as a pass.
            sufficiency.reason = if sufficiency.sufficient {
                format!(
                    "{mentions} (the best hit covers {:.0}% of the question's key terms)",
                    sufficiency.coverage * 100.0
                )
            } else {
                format!("{mentions}; {}", sufficiency.reason)
            };
            sufficiency.sufficient = false;
        }
        sufficiency
    }

    fn next_keywords(&self, ctx: &PlannerContext<'_>) -> Option<(Vec<String>, String)> {
        let Some(Observation::Hits { hits, .. }) = ctx.rounds.last() else {
            return None;
        };
        let top_question: Vec<String> = self
            .question_words
            .iter()
            .take(2)
            .map(|(w, _)| w.clone())
            .collect();
        let own_titles: HashSet<String> = hits
            .iter()
            .filter_map(|h| {
                h.title_path
                    .split(crate::knowledge::TITLE_SEPARATOR)
                    .next()
                    .map(str::to_string)
            })
            .collect();
        // 1. A rule, document or form the best hits point at; among several, the one named in
        //    the sentence that matches the question best (then the better-ranked hit).
        let weights = self.weights();
        let mut best: Option<(f64, String, &str)> = None;
        for hit in hits.iter().take(3) {
            let Some(text) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
                continue;
            };
            for (reference, strong, score) in references_near_question(text, &weights) {
                let score = if strong { score + 100.0 } else { score };
                if !self.unfollowed(&reference) || own_titles.contains(&reference) {
                    continue;
                }
                if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                    best = Some((score, reference, hit.title_path.as_str()));
                }
            }
        }
        if let Some((_, reference, from)) = best {
            let mut keywords = vec![reference.clone()];
            keywords.extend(top_question.iter().filter(|w| **w != reference).cloned());
            return Some((
                keywords,
                format!("follow the reference to {reference} in {from}"),
            ));
        }
        // 2. Names the best hits introduce, with the question words the best one's chunk lacks.
        if let Some(follow) = self.names_to_follow(ctx) {
            // "follow the names A, B in T1; C in T2"
            let mut by_source: Vec<(&str, Vec<&str>)> = Vec::new();
            for (name, from) in &follow.names {
                match by_source.iter_mut().find(|(f, _)| f == from) {
                    Some((_, names)) => names.push(name),
                    None => by_source.push((from, vec![name])),
                }
            }
            let named: Vec<String> = by_source
                .iter()
                .map(|(from, names)| format!("{} in {from}", names.join(", ")))
                .collect();
            let reason = format!(
                "follow the name{} {}",
                if follow.names.len() > 1 { "s" } else { "" },
                named.join("; ")
            );
            let mut keywords: Vec<String> = follow.names.into_iter().map(|(n, _)| n).collect();
            keywords.extend(follow.lacking);
            return Some((keywords, reason));
        }
        // 3. Headings of the best hits that were not searched.
        let mut fresh = Vec::new();
        for hit in hits.iter().take(3) {
            for part in hit
                .title_path
                .split(crate::knowledge::TITLE_SEPARATOR)
                .skip(1)
            {
                let terms = analysed(part);
                if !terms.is_empty()
                    && terms.iter().any(|t| !self.searched_terms.contains(t))
                    && !fresh.contains(&part.to_string())
                    && char_len(part) <= 20
                {
                    fresh.push(part.to_string());
                }
            }
        }
        if fresh.is_empty() {
            return None;
        }
        fresh.truncate(3);
        let mut keywords = fresh.clone();
        keywords.extend(top_question);
        keywords.truncate(super::MAX_KEYWORDS);
        Some((
            keywords,
            format!(
                "broaden with the headings of the best hits: {}",
                fresh.join(", ")
            ),
        ))
    }

    /// The names the best hits of every round introduce that are the likeliest next lookups, at
    /// most [`NAMES_PER_SEARCH`], best first: each taken from a sentence sharing (IDF-weighted)
    /// question terms, not already in the question, not the title of a chunk already seen, not
    /// followed before; a rarer name scores a little higher. Returned with the question words
    /// the best name's chunk lacks (what the next chunk must hold).
    fn names_to_follow(&self, ctx: &PlannerContext<'_>) -> Option<NamesToFollow> {
        let question: HashSet<String> = self
            .question_words
            .iter()
            .flat_map(|(w, _)| analysed(w))
            .collect();
        let n = ctx.lookup.num_chunks();
        let weight = |t: &str| match ctx.lookup.doc_freq(t) {
            0 => 0.0,
            df => idf(df, n),
        };
        let mut seen_titles: HashSet<String> = HashSet::new();
        let mut best_hits: Vec<&SearchHit> = Vec::new();
        for o in ctx.rounds {
            if let Observation::Hits { hits, .. } = o {
                seen_titles.extend(hits.iter().map(|h| h.title_path.to_lowercase()));
                best_hits.extend(hits.iter().take(3));
            }
        }
        let term_set = |text: &str| -> HashSet<String> {
            text::terms(text).into_iter().map(|t| t.text).collect()
        };
        // The IDF weight of the question terms found in any of `sets`.
        let shared = |sets: &[&HashSet<String>]| -> f64 {
            question
                .iter()
                .filter(|t| sets.iter().any(|s| s.contains(*t)))
                .map(|t| weight(t))
                .sum()
        };
        let mut scored: Vec<(f64, String, &SearchHit)> = Vec::new();
        for hit in best_hits {
            let Some(body) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
                continue;
            };
            let title = term_set(&hit.title_path);
            // The title names part of the question and the chunk leaves another part open.
            let subject_with_a_gap = shared(&[&title]) > 0.0 && {
                let body = term_set(body);
                !question
                    .iter()
                    .all(|t| title.contains(t) || body.contains(t))
            };
            for sentence in sentences(body) {
                let candidates = names(sentence);
                if candidates.is_empty() {
                    continue;
                }
                // The bridge of a multi-hop question is where the prose meets the question: a
                // name in a sentence sharing none of its words leads elsewhere — unless the
                // chunk is about the question's subject and leaves a gap: prose names its
                // subject once and then says "he" or "the company", and the title is that
                // subject. The title's words count for every sentence of its chunk.
                let own = term_set(sentence);
                if shared(&[&own]) <= 0.0 && !subject_with_a_gap {
                    continue;
                }
                let overlap = shared(&[&own, &title]);
                for name in candidates {
                    let terms = analysed(&name);
                    if terms.is_empty()
                        || terms.iter().all(|t| question.contains(t))
                        || terms.iter().all(|t| self.searched_terms.contains(t))
                        || seen_titles.contains(&name.to_lowercase())
                        || self.followed.contains(&name)
                    {
                        continue;
                    }
                    let rarity = terms.iter().map(|t| weight(t)).fold(0.0, f64::max);
                    scored.push((overlap + 0.1 * rarity, name, hit));
                }
            }
        }
        // Best first; among equals, the first found (earlier rounds, better hits, earlier text).
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut names: Vec<(String, &SearchHit)> = Vec::new();
        for (_, name, hit) in scored {
            if names.len() == NAMES_PER_SEARCH {
                break;
            }
            if !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                names.push((name, hit));
            }
        }
        let &(_, hit) = names.first()?;
        let hit_terms: HashSet<String> = ctx
            .lookup
            .returned_chunk_text(&hit.chunk_id)
            .map(|body| {
                text::terms(&format!("{}\n{}", hit.title_path, body))
                    .into_iter()
                    .map(|t| t.text)
                    .collect()
            })
            .unwrap_or_default();
        let lacking: Vec<String> = self
            .question_words
            .iter()
            .filter(|(w, _)| {
                let terms = analysed(w);
                !terms.is_empty() && terms.iter().all(|t| !hit_terms.contains(t))
            })
            .map(|(w, _)| w.clone())
            .take(3)
            .collect();
        Some(NamesToFollow {
            names: names
                .into_iter()
                .map(|(name, hit)| (name, hit.title_path.clone()))
                .collect(),
            lacking,
        })
    }

    fn pending_reference(&self, ctx: &PlannerContext<'_>) -> bool {
        // Prose that names something new where it meets the question is the bridge of a
        // multi-hop question: one chunk covering the question's words does not end it.
        if self.names_to_follow(ctx).is_some() {
            return true;
        }
        let Some(Observation::Hits { hits, .. }) = ctx.rounds.last() else {
            return false;
        };
        let own_titles: HashSet<&str> = hits
            .iter()
            .filter_map(|h| h.title_path.split(crate::knowledge::TITLE_SEPARATOR).next())
            .collect();
        // Any reference counts here, even one far from the question's words: the best hits
        // delegating part of the rule elsewhere is reason enough for another round (which
        // reference is then searched is chosen by its sentence; following only references near
        // the question's words here too ended 7 golden questions a round earlier and lost one
        // expected section).
        hits.iter().take(2).any(|hit| {
            ctx.lookup
                .returned_chunk_text(&hit.chunk_id)
                .is_some_and(|text| {
                    references_with_strength(text)
                        .iter()
                        .any(|(r, _)| self.unfollowed(r) && !own_titles.contains(r.as_str()))
                })
        })
    }

    /// Whether a reference is still worth a search: not followed, and naming something new.
    fn unfollowed(&self, reference: &str) -> bool {
        let terms = analysed(reference);
        !self.followed.contains(reference)
            && !terms.is_empty()
            && terms.iter().any(|t| !self.searched_terms.contains(t))
    }

    fn answer(&self, ctx: &PlannerContext<'_>) -> PlannerAction {
        let weights = self.weights();
        let keys = key_terms(
            &[self.effective_question(ctx)],
            &|t: &str| ctx.lookup.doc_freq(t),
            ctx.lookup.num_chunks(),
        );
        let total: f64 = keys
            .iter()
            .map(|k| k.weight)
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        // Which chunks to cite: the one covering the question best (a heading naming the
        // question's words counts extra), then others nearly as good only when they cover key
        // terms the cited ones do not, or answer a reference that a cited chunk names.
        struct Candidate<'h> {
            hit: &'h SearchHit,
            round: u32,
            score: f64,
            /// The reference a later round followed, when this chunk's title names it.
            reference: Option<String>,
            present: HashSet<String>,
            in_title: HashSet<String>,
            /// Each sentence of the text with its analysed terms (scored again for the answer).
            sentences: Vec<(&'h str, HashSet<String>)>,
        }
        let share = |present: &HashSet<String>| {
            keys.iter()
                .filter(|k| present.contains(&k.term))
                .map(|k| k.weight)
                .sum::<f64>()
                / total
        };
        let mut candidates: Vec<Candidate<'_>> = all_hits(ctx)
            .filter_map(|(hit, round)| {
                let text = ctx.lookup.returned_chunk_text(&hit.chunk_id)?;
                let title_terms: HashSet<String> = text::terms(&hit.title_path)
                    .into_iter()
                    .map(|t| t.text)
                    .collect();
                let sentences: Vec<(&str, HashSet<String>)> = sentences(text)
                    .into_iter()
                    .map(|sentence| {
                        let terms = text::terms(sentence).into_iter().map(|t| t.text).collect();
                        (sentence, terms)
                    })
                    .collect();
                let text_terms: HashSet<String> =
                    text::terms(text).into_iter().map(|t| t.text).collect();
                let lower = format!("{}\n{}", hit.title_path, text).to_lowercase();
                let present = covered_by(
                    &keys,
                    |t| text_terms.contains(t) || title_terms.contains(t),
                    &lower,
                );
                let in_title = covered(&keys, &title_terms, &hit.title_path.to_lowercase());
                // A sentence that holds the question's terms together is stronger evidence than
                // the same terms scattered over a long chunk: half the text score comes from the
                // best sentence (with the headings it stands under).
                let best_sentence = sentences
                    .iter()
                    .map(|(sentence, terms)| {
                        let lower = format!("{}\n{}", hit.title_path, sentence).to_lowercase();
                        let in_sentence = |t: &str| terms.contains(t) || title_terms.contains(t);
                        share(&covered_by(&keys, in_sentence, &lower))
                    })
                    .fold(0.0, f64::max);
                let score = (1.0 - SENTENCE_SHARE) * share(&present)
                    + SENTENCE_SHARE * best_sentence
                    + 0.6 * share(&in_title);
                let reference = match ctx.rounds.get(round as usize - 1) {
                    Some(Observation::Hits { keywords, .. }) if round > 1 => keywords
                        .first()
                        .filter(|k| hit.title_path.to_lowercase().contains(&k.to_lowercase()))
                        .cloned(),
                    _ => None,
                };
                Some(Candidate {
                    hit,
                    round,
                    score,
                    reference,
                    present,
                    in_title,
                    sentences,
                })
            })
            .collect();
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.round.cmp(&b.round)));
        let best = candidates.first().map(|c| c.score).unwrap_or(0.0);
        let mut chosen: Vec<&Candidate<'_>> = Vec::new();
        let mut cited_terms: HashSet<String> = HashSet::new();
        let mut cited_title_terms: HashSet<String> = HashSet::new();
        for c in candidates
            .iter()
            .filter(|c| c.score >= 0.85 * best && c.score > 0.0)
        {
            if chosen.len() == MAX_CITED_CHUNKS {
                break;
            }
            // New key terms in its text, or in its heading (a section named for a part of the
            // question the cited headings do not name).
            let fresh: HashSet<String> = c.present.difference(&cited_terms).cloned().collect();
            let fresh_title: HashSet<String> =
                c.in_title.difference(&cited_title_terms).cloned().collect();
            if chosen.is_empty()
                || share(&fresh) >= MIN_CITATION_GAIN
                || share(&fresh_title) >= MIN_CITATION_GAIN
            {
                cited_terms.extend(c.present.iter().cloned());
                cited_title_terms.extend(c.in_title.iter().cloned());
                chosen.push(c);
            }
        }
        // A followed reference answers the part of the question a cited chunk delegated to it,
        // whatever its own words; a reference named only by an uncited chunk answers nothing.
        for c in &candidates {
            if chosen.len() == MAX_CITED_CHUNKS {
                break;
            }
            let Some(reference) = &c.reference else {
                continue;
            };
            let delegated = chosen.iter().any(|d| {
                ctx.lookup
                    .returned_chunk_text(&d.hit.chunk_id)
                    .is_some_and(|t| t.to_lowercase().contains(&reference.to_lowercase()))
            });
            let already = chosen.iter().any(|d| d.hit.chunk_id == c.hit.chunk_id);
            if delegated && !already {
                chosen.push(c);
            }
        }
        let mut scored: Vec<Scored<'_>> = Vec::new();
        for c in &chosen {
            let (hit, round) = (c.hit, c.round);
            let round_terms: HashSet<String> = match ctx.rounds.get(round as usize - 1) {
                Some(Observation::Hits { keywords, .. }) => {
                    keywords.iter().flat_map(|k| analysed(k)).collect()
                }
                _ => HashSet::new(),
            };
            let before = scored.len();
            for &(sentence, ref terms) in &c.sentences {
                if char_len(sentence) > MAX_SENTENCE_CHARS {
                    continue;
                }
                let q: f64 = weights
                    .iter()
                    .filter(|(t, _)| terms.contains(*t))
                    .map(|(_, w)| w)
                    .sum();
                let r = round_terms.iter().filter(|t| terms.contains(*t)).count() as f64;
                if q + r > 0.0 {
                    scored.push(Scored {
                        chunk: hit.chunk_id.clone(),
                        sentence,
                        score: q + 0.5 * r,
                        round,
                    });
                }
            }
            // A chosen chunk in other words than the question (a followed reference): its
            // opening sentence states what it is about.
            if scored.len() == before
                && let Some(&(first, _)) = c
                    .sentences
                    .iter()
                    .find(|(s, _)| char_len(s) <= MAX_SENTENCE_CHARS)
            {
                scored.push(Scored {
                    chunk: hit.chunk_id.clone(),
                    sentence: first,
                    score: 0.1,
                    round,
                });
            }
        }
        scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.round.cmp(&b.round)));
        let mut picked: Vec<&Scored<'_>> = Vec::new();
        // The best sentence of every round first (a followed reference answers part of the
        // question in other words), then the best remaining ones.
        for round in 1..=ctx.rounds.len() as u32 {
            if let Some(s) = scored
                .iter()
                .find(|s| s.round == round && !picked.iter().any(|p| p.sentence == s.sentence))
            {
                picked.push(s);
            }
        }
        for s in &scored {
            if picked.len() >= ANSWER_SENTENCES {
                break;
            }
            let per_chunk = picked.iter().filter(|p| p.chunk == s.chunk).count();
            if per_chunk < 2 && !picked.iter().any(|p| p.sentence == s.sentence) {
                picked.push(s);
            }
        }
        picked.truncate(ANSWER_SENTENCES);
        if picked.is_empty() {
            return PlannerAction::GiveUp {
                reason: "no_relevant_hits".to_string(),
            };
        }
        picked.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut order: Vec<String> = Vec::new();
        let mut citations = Vec::new();
        let mut lines = Vec::new();
        for s in &picked {
            let n = match order.iter().position(|c| *c == s.chunk) {
                Some(i) => i + 1,
                None => {
                    order.push(s.chunk.clone());
                    citations.push(ProposedCitation {
                        chunk_id: s.chunk.clone(),
                        quote: s.sentence.to_string(),
                    });
                    order.len()
                }
            };
            lines.push(format!("{} [{n}]", s.sentence));
        }
        let chinese = ctx.question.chars().any(text::is_cjk);
        let mut text = String::from(if chinese {
            "根据知识库："
        } else {
            "According to the knowledge base: "
        });
        text.push_str(&lines[0]);
        for line in &lines[1..] {
            text.push_str("\n- ");
            text.push_str(line);
        }
        PlannerAction::Answer { text, citations }
    }
}

/// Every hit returned so far, with the round that returned it (first time only).
fn all_hits<'a>(ctx: &'a PlannerContext<'_>) -> impl Iterator<Item = (&'a SearchHit, u32)> + 'a {
    let mut seen = HashSet::new();
    ctx.rounds
        .iter()
        .filter_map(|o| match o {
            Observation::Hits { round, hits, .. } => Some(hits.iter().map(move |h| (h, *round))),
            _ => None,
        })
        .flatten()
        .filter(move |(h, _)| seen.insert(h.chunk_id.clone()))
}

impl Planner for OfflinePlanner {
    fn kind(&self) -> &'static str {
        "offline"
    }

    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let step = |action| {
            Ok(PlannerStep {
                actions: vec![action],
                ..PlannerStep::default()
            })
        };
        if ctx.searches_done == 0 && observations.is_empty() && is_small_talk(ctx.question) {
            let chinese = ctx.question.chars().any(text::is_cjk);
            let text = match (chinese, is_thanks(ctx.question)) {
                (true, true) => "不客气！还有其他制度方面的问题吗？",
                (true, false) => "你好！请问想了解哪方面的制度？",
                (false, true) => "You're welcome! Anything else about the policies?",
                (false, false) => "Hello! What would you like to know about the policies?",
            };
            return step(PlannerAction::Reply {
                text: text.to_string(),
            });
        }
        if self.question_words.is_empty() && ctx.searches_done == 0 {
            self.question_words = question_words(ctx.question, ctx);
            if let Some(previous) = ctx.history.iter().rev().find(|t| !t.keywords.is_empty())
                && refers_back(ctx.question)
            {
                // A follow-up that omits its topic ("需要提供什么证明？") searches with the previous
                // turn's topic words in front.
                let own: HashSet<String> = self
                    .question_words
                    .iter()
                    .flat_map(|(w, _)| analysed(w))
                    .collect();
                let top = self.question_words.first().map(|w| w.1).unwrap_or(1.0) + 1.0;
                let carried: Vec<String> = previous
                    .keywords
                    .first()
                    .into_iter()
                    .flatten()
                    .filter(|k| analysed(k).iter().any(|t| !own.contains(t)))
                    .take(2)
                    .cloned()
                    .collect();
                for (i, word) in carried.iter().enumerate() {
                    self.question_words.insert(i, (word.clone(), top));
                }
                self.carried = carried;
            }
            self.unknown_nouns = unknown_nouns(&self.effective_question(ctx), &|word: &str| {
                ctx.lookup.mentions(word)
            });
        }
        // A refused answer is not retried with the same evidence.
        if observations
            .iter()
            .any(|o| matches!(o, Observation::CitationsRefused { .. }))
        {
            return step(PlannerAction::GiveUp {
                reason: "refused_citations".to_string(),
            });
        }
        let mut new_evidence = false;
        for o in observations {
            if let Observation::Hits { keywords, hits, .. } = o {
                for k in keywords {
                    self.searched_terms.extend(analysed(k));
                    self.followed.insert(k.clone());
                }
                for h in hits {
                    new_evidence |= self.seen_chunks.insert(h.chunk_id.clone());
                }
            }
        }
        if ctx.searches_done == 0 {
            if self.question_words.is_empty() {
                return step(PlannerAction::GiveUp {
                    reason: "the question has no content words to search".to_string(),
                });
            }
            let keywords: Vec<String> = self
                .question_words
                .iter()
                .take(FIRST_ROUND_KEYWORDS)
                .map(|(w, _)| w.clone())
                .collect();
            return step(PlannerAction::Search {
                keywords,
                reason: if self.carried.is_empty() {
                    "content words of the question, rarest first".to_string()
                } else {
                    format!(
                        "content words of the question, rarest first, with the previous turn's topic carried over: {}",
                        self.carried.join(", ")
                    )
                },
                top_k: None,
                query: None,
            });
        }
        let sufficiency = self.question_sufficiency(ctx);
        let covered = sufficiency.sufficient;
        // The decision the user sees: about the question and every hit so far, not only the
        // last search's own keywords.
        let give_up = || PlannerAction::GiveUp {
            reason: format!("no_relevant_hits: {}", sufficiency.reason),
        };
        let last_had_hits =
            matches!(ctx.rounds.last(), Some(Observation::Hits { hits, .. }) if !hits.is_empty());
        if ctx.answer_only || !new_evidence || (covered && !self.pending_reference(ctx)) {
            return step(if covered && (last_had_hits || ctx.searches_done > 1) {
                self.answer(ctx)
            } else {
                give_up()
            });
        }
        match self.next_keywords(ctx) {
            Some((keywords, reason)) => step(PlannerAction::Search {
                keywords,
                reason,
                top_k: None,
                query: None,
            }),
            None if covered => step(self.answer(ctx)),
            None => step(give_up()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn references(text: &str) -> Vec<String> {
        references_with_strength(text)
            .into_iter()
            .map(|(r, _)| r)
            .collect()
    }

    #[test]
    fn unknown_nouns_are_dictionary_nouns_no_chunk_mentions_in_any_part() {
        // The knowledge base mentions every word except those with 衣, 薪 or 拉萨 in them.
        let mentions = |w: &str| !(w.contains('衣') || w.contains('薪') || w.contains("拉萨"));
        assert_eq!(
            unknown_nouns("出差时酒店洗衣服的钱能报销吗？", &mentions),
            ["洗衣服"]
        );
        assert_eq!(
            unknown_nouns("P5职级的月薪范围是多少？", &mentions),
            ["月薪"]
        );
        // A place name: a rule for "other cities" still covers it.
        assert!(unknown_nouns("去拉萨出差住宿标准是多少？", &mentions).is_empty());
        // A noun the knowledge base mentions (the index finds 坐飞机 through its part 飞机).
        assert!(unknown_nouns("坐飞机能订什么舱位？", &mentions).is_empty());
        // Nothing unknown at all.
        assert!(unknown_nouns("洗衣服的钱能报销吗？", &|_: &str| true).is_empty());
    }

    #[test]
    fn references_are_found_in_quotes_and_codes() {
        let r = references(
            "详见《铁路电子客票报销规定》，超标须填写FIN-07“费用超标说明单”。See \"Travel Policy\".",
        );
        assert_eq!(
            r,
            vec![
                "铁路电子客票报销规定",
                "费用超标说明单",
                "Travel Policy",
                "FIN-07"
            ]
        );
        assert!(references("no refs, A-1 is too short, XFIN-").is_empty());
        assert_eq!(
            references("He hosted \"The Apprentice,\" then \"Dragons' Den.\""),
            vec!["The Apprentice", "Dragons' Den"]
        );
    }

    #[test]
    fn names_are_capitalised_runs_not_sentence_openers() {
        assert_eq!(
            names("She was portrayed by Shirley Temple in Kiss and Tell, a film."),
            vec!["Shirley Temple in Kiss and Tell"]
        );
        assert_eq!(
            names("Complete the self-assessment in HR Connect within 30 days."),
            vec!["HR Connect"]
        );
        assert_eq!(
            names("The Bank of England was founded."),
            vec!["The Bank of England"]
        );
        assert!(names("出差 报销 须在30天内提交").is_empty());
        assert_eq!(
            names("Staffed 24 hours, Monday to Friday, by Ann Lee."),
            vec!["Ann Lee"]
        );
    }

    #[test]
    fn sentences_split_and_drop_table_separators() {
        let s = sentences(
            "第一句。第二句！\n| 城市 | 标准 |\n| --- | --- |\n| 一线 | 600元 |\nEnd. Next one",
        );
        assert_eq!(
            s,
            vec![
                "第一句。",
                "第二句！",
                "| 城市 | 标准 |",
                "| 一线 | 600元 |",
                "End.",
                "Next one"
            ]
        );
    }
}
