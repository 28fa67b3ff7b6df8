//! The extractive answer: which returned chunks to cite, and their sentences that best match
//! the question, each with its citation and a verbatim quote.

use std::collections::{HashMap, HashSet};

use super::asked::{self, asked_parts};
use super::lists;
use super::{
    EVIDENCE_SPREAD, MAX_CITED_CHUNKS, MAX_EVIDENCE, MAX_SENTENCE_CHARS, MAX_STANDOUT_CITED,
    MEANING_WEIGHT, MIN_CITATION_GAIN, OfflinePlanner, SENTENCE_SHARE, STANDOUT_BAR, SUBJECT_SHARE,
    all_hits, analysed, sentences, weight_held,
};
use crate::agent::citations::MAX_QUOTE_CHARS;
use crate::agent::{Observation, PlannerAction, PlannerContext, ProposedCitation};
use crate::search::SearchHit;
use crate::search::sufficiency::{KeyTerm, covered, covered_by, idf};
use crate::text::{self, char_len};

/// The question's key terms, to measure how much of the question a set of terms covers.
pub(super) struct QuestionKeys {
    pub(super) keys: Vec<KeyTerm>,
    /// Their summed weight (never 0).
    total: f64,
}

impl QuestionKeys {
    pub(super) fn new(keys: Vec<KeyTerm>) -> Self {
        let total: f64 = keys
            .iter()
            .map(|k| k.weight)
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        Self { keys, total }
    }

    /// The share of the key terms' weight that `present` holds.
    fn share(&self, present: &HashSet<String>) -> f64 {
        self.keys
            .iter()
            .filter(|k| present.contains(&k.term))
            .map(|k| k.weight)
            .sum::<f64>()
            / self.total
    }
}

/// A returned chunk that may be cited.
pub(super) struct Candidate<'h> {
    pub(super) hit: &'h SearchHit,
    round: u32,
    pub(super) score: f64,
    /// The reference a later round followed, when this chunk's title names it.
    reference: Option<String>,
    /// Key terms in its text or heading.
    present: HashSet<String>,
    /// Key terms in its heading.
    in_title: HashSet<String>,
    /// Each sentence of the text with its analysed terms (scored again for the answer).
    sentences: Vec<(&'h str, HashSet<String>)>,
}

/// A sentence of a cited chunk, scored against the question.
struct Scored<'a> {
    chunk: String,
    /// The titlePath of its chunk: the headings it stands under.
    title: &'a str,
    sentence: &'a str,
    score: f64,
    round: u32,
}

impl OfflinePlanner {
    /// The answer, when for every part of the question a returned sentence states what it asks
    /// (`asked::states`) about its subject (the sentence with its headings covers
    /// [`SUBJECT_SHARE`] of the part's key terms): those sentences, one per part, each with its
    /// citation. Otherwise the best passages as evidence; gives up when no sentence matches.
    pub(super) fn answer(&self, ctx: &PlannerContext<'_>) -> PlannerAction {
        let weights = self.weights();
        let passage_keys = self.passage_keys(ctx);
        let keys = QuestionKeys::new(passage_keys.clone());
        let candidates = candidates(ctx, &keys);
        let chosen = chosen(ctx, &candidates, &keys);
        let scored = scored_sentences(ctx, &weights, &chosen);
        let parts = asked_parts(ctx.question);
        // Only a compound the knowledge base writes as one (纸质发票), not two nouns that
        // merely meet in the question (乘意险 | 公司给报吗: a topic, then who pays).
        let compounds: Vec<(String, String)> = compounds(&self.effective_question(ctx))
            .into_iter()
            .filter(|(_, whole)| ctx.lookup.writes(whole))
            .collect();
        // A sentence that points to another rule ("见《铁路客票规定》") states nothing itself;
        // the rule it points to, once followed, answers for it and inherits its subject.
        let followed: Vec<(&str, String)> = chosen
            .iter()
            .filter_map(|c| Some((c.hit.chunk_id.as_str(), c.reference.clone()?)))
            .collect();
        // What later rounds followed, found or not ("《员工手册》" the knowledge base lacks),
        // named as a reference is named: in 《》 or “” quotes.
        let searched: Vec<&str> = ctx
            .rounds
            .iter()
            .skip(1)
            .filter_map(|o| match o {
                Observation::Hits { keywords, .. } => keywords.first().map(String::as_str),
                _ => None,
            })
            .collect();
        let delegates = |sentence: &str| {
            searched.iter().any(|r| {
                sentence.contains(&format!("《{r}》")) || sentence.contains(&format!("“{r}”"))
            })
        };
        // The best-covering chunk first (its heading may name what is asked: 证明材料), then
        // its sentences best first: a sentence merely sharing the question's words in a
        // weaker chunk ("提供虚假病假证明的…") comes later.
        let rank = |s: &Scored<'_>| {
            chosen
                .iter()
                .position(|c| c.hit.chunk_id == s.chunk)
                .unwrap_or(usize::MAX)
        };
        let mut in_order: Vec<&Scored<'_>> = scored.iter().collect();
        in_order.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.score.total_cmp(&a.score)));
        let mut stating: Vec<&Scored<'_>> = Vec::new();
        for (clause, kind) in &parts {
            let part = if parts.len() == 1 {
                QuestionKeys::new(passage_keys.clone())
            } else {
                part_keys(clause, &passage_keys)
            };
            let share = |s: &Scored<'_>| subject_share(s, &part, &self.written, &compounds);
            let inherited = |s: &Scored<'_>| {
                followed
                    .iter()
                    .filter(|(chunk, _)| *chunk == s.chunk)
                    .flat_map(|(_, r)| {
                        scored
                            .iter()
                            .filter(move |d| d.sentence.contains(r.as_str()))
                    })
                    .map(share)
                    .fold(0.0, f64::max)
            };
            let found = in_order.iter().copied().find(|s| {
                !delegates(s.sentence)
                    && !lists::is_lead_in(s.sentence)
                    && asked::states(s.sentence, *kind)
                    && share(s).max(inherited(s)) >= SUBJECT_SHARE
            });
            match found {
                Some(s) => {
                    if !stating.iter().any(|p| p.sentence == s.sentence) {
                        stating.push(s);
                    }
                }
                None => {
                    return self
                        .evidence(ctx, "evidence: no passage states the answer".to_string())
                        .unwrap_or(PlannerAction::GiveUp {
                            reason: "no_relevant_hits".to_string(),
                        });
                }
            }
        }
        answer_text(ctx, &weights, &stating)
    }
}

impl OfflinePlanner {
    /// The key terms passages are read with for the answer: the verdict's, and each of the
    /// question's single characters (`characters`) that a returned passage writes inside its
    /// words (丢 in 丢失), weighted by the commonest two-character term holding it there (a
    /// floor on how many chunks write it: 丢失 is rare, 请假 is not). A character no passage
    /// writes stays out, as it says nothing about them. "手机丢了怎么办" is then not answered
    /// by a rule about changing phones.
    pub(super) fn passage_keys(&self, ctx: &PlannerContext<'_>) -> Vec<KeyTerm> {
        let mut keys = self.verdict_keys.clone();
        if self.characters.is_empty() {
            return keys;
        }
        let n = ctx.lookup.num_chunks();
        let texts: Vec<&str> = all_hits(ctx)
            .flat_map(|(hit, _)| {
                [
                    Some(hit.title_path.as_str()),
                    ctx.lookup.returned_chunk_text(&hit.chunk_id),
                ]
            })
            .flatten()
            .collect();
        for k in &self.characters {
            let Some(c) = k.term.chars().next() else {
                continue;
            };
            let pairs: HashSet<String> = texts.iter().flat_map(|t| pairs_with(t, c)).collect();
            let df = pairs.iter().map(|p| ctx.lookup.doc_freq(p)).max();
            if let Some(df) = df.filter(|df| *df > 0) {
                keys.push(KeyTerm {
                    weight: idf(df, n),
                    ..k.clone()
                });
            }
        }
        keys
    }
}

/// The two-character CJK pairs of `text` that hold `c`, each an index term (a word of the
/// dictionary, or a bigram the analyser adds).
fn pairs_with(text: &str, c: char) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    for (i, &x) in chars.iter().enumerate() {
        if x != c {
            continue;
        }
        if let Some(&p) = i.checked_sub(1).and_then(|j| chars.get(j))
            && text::is_cjk(p)
        {
            out.push(format!("{p}{c}"));
        }
        if let Some(&n) = chars.get(i + 1)
            && text::is_cjk(n)
        {
            out.push(format!("{c}{n}"));
        }
    }
    out
}

/// The key terms of one part of a question: those its clause contains (all of them when it
/// names none, "运费谁出" leaning on the first part's subject).
fn part_keys(clause: &str, keys: &[KeyTerm]) -> QuestionKeys {
    let lower = clause.to_lowercase();
    let terms: HashSet<String> = text::terms(clause).into_iter().map(|t| t.text).collect();
    let own: Vec<KeyTerm> = keys
        .iter()
        .filter(|k| terms.contains(&k.term) || lower.contains(&k.term))
        .cloned()
        .collect();
    QuestionKeys::new(if own.is_empty() { keys.to_vec() } else { own })
}

/// The share of `keys` a sentence covers together with the headings it stands under; a key
/// standing for an everyday word is covered by any of its written words (孩子: 子女 or 生育), and
/// the first noun of a compound (`compounds`: 纸质 of 纸质发票, a compound the knowledge base
/// writes) only where the two are written together.
fn subject_share(
    s: &Scored<'_>,
    keys: &QuestionKeys,
    written: &[(String, Vec<String>, String)],
    compounds: &[(String, String)],
) -> f64 {
    let terms: HashSet<String> = text::terms(s.title)
        .into_iter()
        .chain(text::terms(s.sentence))
        .map(|t| t.text)
        .collect();
    let lower = format!("{}\n{}", s.title, s.sentence).to_lowercase();
    let mut present = covered(&keys.keys, &terms, &lower);
    for (_, words, key) in written {
        let said = words.iter().any(|w| {
            let w = w.to_lowercase();
            lower.contains(&w) || analysed(&w).iter().all(|t| terms.contains(t))
        });
        if said {
            present.insert(key.clone());
        }
    }
    // A modifier counts only beside its noun: 纸质 in 纸质车票 is no part of 纸质发票.
    for (modifier, whole) in compounds {
        if !lower.contains(whole.as_str()) {
            present.remove(modifier);
        }
    }
    keys.share(&present)
}

/// The question's Chinese noun pairs written together (纸质发票: 纸质, then 发票), each as the
/// first noun and the two together.
fn compounds(question: &str) -> Vec<(String, String)> {
    let tagged = text::jieba().tag(question, true);
    tagged
        .windows(2)
        .filter(|w| {
            w.iter().all(|t| {
                t.tag.starts_with('n') && !t.word.is_empty() && t.word.chars().all(text::is_cjk)
            })
        })
        .map(|w| (w[0].word.to_string(), format!("{}{}", w[0].word, w[1].word)))
        .collect()
}

impl OfflinePlanner {
    /// The passages to give as evidence when no sentence states the answer, best first (at most
    /// [`MAX_EVIDENCE`], [`evidence_order`]), each quoted by its best whole sentence, a table row
    /// with its header row; `None` when no sentence matches.
    pub(super) fn evidence(
        &self,
        ctx: &PlannerContext<'_>,
        reason: String,
    ) -> Option<PlannerAction> {
        let weights = self.weights();
        let keys = QuestionKeys::new(self.passage_keys(ctx));
        // A subject found only in the other language's words: a passage without them shares
        // the question's other words, not its subject.
        let candidates: Vec<Candidate<'_>> = candidates(ctx, &keys)
            .into_iter()
            .filter(|c| {
                self.crossed.is_empty() || self.crossed.iter().any(|k| c.present.contains(k))
            })
            .collect();
        let mut citations: Vec<ProposedCitation> = Vec::new();
        for c in evidence_order(ctx, &candidates) {
            if citations.len() == MAX_EVIDENCE {
                break;
            }
            if let Some(s) = scored_sentences(ctx, &weights, &[c]).first() {
                citations.push(quoted(ctx, &weights, s));
            }
        }
        (!citations.is_empty()).then_some(PlannerAction::Evidence { reason, citations })
    }
}

/// The candidates worth showing as evidence, best first. With a model embedder, each covering
/// chunk ranks by its share of the best one's coverage plus how far its meaning stands from the
/// best-standing one's, in standard deviations of the question's similarity over the knowledge
/// base ([`MEANING_WEIGHT`] per deviation): among passages that share the question's words,
/// the one about what was asked is the one closest in meaning. Without one (the hashing
/// embedder, a store without vectors), by coverage alone, those within [`EVIDENCE_SPREAD`] of
/// the best.
fn evidence_order<'c, 'h>(
    ctx: &PlannerContext<'_>,
    candidates: &'c [Candidate<'h>],
) -> Vec<&'c Candidate<'h>> {
    let best = candidates.first().map_or(0.0, |c| c.score);
    let covering = candidates.iter().filter(|c| c.score > 0.0);
    let meaning: Option<Vec<(&Candidate<'_>, f64)>> = covering
        .clone()
        .map(|c| Some((c, ctx.lookup.question_standout(&c.hit.chunk_id)?)))
        .collect();
    match meaning {
        Some(mut ranked) if !ranked.is_empty() => {
            let top = ranked.iter().map(|(_, z)| *z).fold(f64::MIN, f64::max);
            let rank = |c: &Candidate<'_>, z: f64| c.score / best + MEANING_WEIGHT * (z - top);
            ranked.sort_by(|a, b| rank(b.0, b.1).total_cmp(&rank(a.0, a.1)));
            ranked.into_iter().map(|(c, _)| c).collect()
        }
        _ => covering
            .filter(|c| c.score >= EVIDENCE_SPREAD * best)
            .collect(),
    }
}

/// Whether a sentence can be quoted as a claim: not a heading, not itself a question, not a
/// bare address (a URL or an e-mail address with nothing said about it), not a fragment of a
/// few words.
fn quotable(sentence: &str) -> bool {
    let s = sentence.trim();
    if s.starts_with('#') || s.ends_with('?') || s.ends_with('？') {
        return false;
    }
    let words: Vec<&str> = s.split_whitespace().collect();
    let bare_address = words.len() <= 2
        && words
            .iter()
            .any(|w| w.contains("://") || w.contains('@') || w.starts_with("www."));
    if bare_address {
        return false;
    }
    if s.chars().any(text::is_cjk) {
        s.chars().filter(|c| text::is_cjk(*c)).count() >= 4
    } else {
        s.starts_with('|') || words.len() >= 4
    }
}

/// A scored sentence as a citation: a clause ending in `；` as its whole sentence, a table row
/// quoted with its table's header row, a list's lead-in with its item that best matches the
/// question (`weights`), an item with its lead-in.
fn quoted(
    ctx: &PlannerContext<'_>,
    weights: &HashMap<String, f64>,
    s: &Scored<'_>,
) -> ProposedCitation {
    let score = |line: &str| -> f64 {
        let terms: HashSet<String> = text::terms(line).into_iter().map(|t| t.text).collect();
        weight_held(weights, &terms)
    };
    let quote = ctx
        .lookup
        .returned_chunk_text(&s.chunk)
        .and_then(|text| {
            let whole = lists::whole_sentence(text, s.sentence);
            let sentence = whole.unwrap_or(s.sentence);
            with_header_row(text, sentence)
                .or_else(|| lists::with_list(text, sentence, &score))
                .or_else(|| whole.map(str::to_string))
        })
        // A long row under its header row is quoted alone rather than refused as too long.
        .filter(|q| char_len(q) <= MAX_QUOTE_CHARS)
        .unwrap_or_else(|| s.sentence.to_string());
    ProposedCitation {
        chunk_id: s.chunk.clone(),
        quote,
    }
}

/// A table row with its table's header row above it (`None` for a sentence outside a table,
/// or the header row itself): a row's cells mean nothing without their column names.
fn with_header_row(text: &str, row: &str) -> Option<String> {
    if !row.starts_with('|') {
        return None;
    }
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| *l == row)?;
    let start = lines[..at]
        .iter()
        .rposition(|l| !l.starts_with('|'))
        .map_or(0, |i| i + 1);
    let header = lines[start];
    (start < at).then(|| format!("{header}\n{row}"))
}

impl OfflinePlanner {
    /// Evidence from the passages that stand out for the question by meaning when its words do
    /// not cover it (everyday words, another language): the returned chunks whose similarity
    /// to the question is [`STANDOUT_BAR`] standard deviations above the knowledge base's, best
    /// first, each quoted by its sentence that best matches the question (else its opening).
    pub(super) fn standout_evidence(&self, ctx: &PlannerContext<'_>) -> Option<PlannerAction> {
        let mut standing: Vec<(f64, &SearchHit, u32)> = all_hits(ctx)
            .filter_map(|(hit, round)| {
                let z = ctx.lookup.question_standout(&hit.chunk_id)?;
                (z >= STANDOUT_BAR).then_some((z, hit, round))
            })
            .collect();
        standing.sort_by(|a, b| b.0.total_cmp(&a.0));
        standing.truncate(MAX_STANDOUT_CITED);
        let best = standing.first()?.0;
        let keys = QuestionKeys::new(self.passage_keys(ctx));
        let weights = self.weights();
        let candidates = candidates(ctx, &keys);
        let mut citations = Vec::new();
        for (_, hit, _) in &standing {
            let Some(c) = candidates.iter().find(|c| c.hit.chunk_id == hit.chunk_id) else {
                continue;
            };
            if let Some(s) = scored_sentences(ctx, &weights, &[c]).first() {
                citations.push(quoted(ctx, &weights, s));
            }
        }
        (!citations.is_empty()).then(|| PlannerAction::Evidence {
            reason: format!(
                "evidence: the passage's meaning stands out for the question ({best:.1} standard deviations above the knowledge base's similarity), though its words do not cover it"
            ),
            citations,
        })
    }
}

/// Every returned chunk scored by how well it covers the question, best first: its text, its
/// best sentence, and its heading naming the question's words.
pub(super) fn candidates<'h>(
    ctx: &'h PlannerContext<'_>,
    keys: &QuestionKeys,
) -> Vec<Candidate<'h>> {
    let mut candidates: Vec<Candidate<'_>> = all_hits(ctx)
        .filter_map(|(hit, round)| {
            let text = ctx.lookup.returned_chunk_text(&hit.chunk_id)?;
            let title_terms: HashSet<String> = text::terms(&hit.title_path)
                .into_iter()
                .map(|t| t.text)
                .collect();
            let sentences: Vec<(&str, HashSet<String>)> = sentences(text)
                .into_iter()
                .filter(|s| quotable(s) && !lists::bare_lead_in(text, s))
                .map(|sentence| {
                    let terms = text::terms(sentence).into_iter().map(|t| t.text).collect();
                    (sentence, terms)
                })
                .collect();
            // The titlePath's and the text's terms: the store's cached analysis.
            let chunk_terms = ctx
                .lookup
                .returned_chunk_terms(&hit.chunk_id, &hit.title_path)?;
            let present = covered_by(
                &keys.keys,
                |t| chunk_terms.contains(t),
                chunk_terms.lowercase(),
            );
            let in_title = covered(&keys.keys, &title_terms, &hit.title_path.to_lowercase());
            // A sentence that holds the question's terms together is stronger evidence than
            // the same terms scattered over a long chunk: half the text score comes from the
            // best sentence (with the headings it stands under).
            let best_sentence = sentences
                .iter()
                .map(|(sentence, terms)| {
                    let lower = format!("{}\n{}", hit.title_path, sentence).to_lowercase();
                    let in_sentence = |t: &str| terms.contains(t) || title_terms.contains(t);
                    keys.share(&covered_by(&keys.keys, in_sentence, &lower))
                })
                .fold(0.0, f64::max);
            let score = (1.0 - SENTENCE_SHARE) * keys.share(&present)
                + SENTENCE_SHARE * best_sentence
                + 0.6 * keys.share(&in_title);
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
    candidates
}

/// Which chunks to cite: the one covering the question best (a heading naming the question's
/// words counts extra), then others nearly as good only when they cover key terms the cited
/// ones do not, or answer a reference that a cited chunk names.
fn chosen<'c, 'h>(
    ctx: &PlannerContext<'_>,
    candidates: &'c [Candidate<'h>],
    keys: &QuestionKeys,
) -> Vec<&'c Candidate<'h>> {
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
            || keys.share(&fresh) >= MIN_CITATION_GAIN
            || keys.share(&fresh_title) >= MIN_CITATION_GAIN
        {
            cited_terms.extend(c.present.iter().cloned());
            cited_title_terms.extend(c.in_title.iter().cloned());
            chosen.push(c);
        }
    }
    // A followed reference answers the part of the question a cited chunk delegated to it,
    // whatever its own words; a reference named only by an uncited chunk answers nothing.
    for c in candidates {
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
    chosen
}

/// The sentences of the chosen chunks that share the question's words or their round's
/// keywords, best first (a chunk with none gives its opening sentence, scored low).
fn scored_sentences<'h>(
    ctx: &PlannerContext<'_>,
    weights: &HashMap<String, f64>,
    chosen: &[&Candidate<'h>],
) -> Vec<Scored<'h>> {
    let mut scored: Vec<Scored<'_>> = Vec::new();
    for c in chosen {
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
            let q = weight_held(weights, terms);
            let r = round_terms.iter().filter(|t| terms.contains(*t)).count() as f64;
            if q + r > 0.0 {
                scored.push(Scored {
                    chunk: hit.chunk_id.clone(),
                    title: &hit.title_path,
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
                title: &hit.title_path,
                sentence: first,
                score: 0.1,
                round,
            });
        }
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.round.cmp(&b.round)));
    scored
}

/// The answer text: one line per sentence with its citation number, in the question's
/// language; each chunk cited once, quoting its first sentence in the answer.
fn answer_text(
    ctx: &PlannerContext<'_>,
    weights: &HashMap<String, f64>,
    picked: &[&Scored<'_>],
) -> PlannerAction {
    let question = ctx.question;
    let mut order: Vec<String> = Vec::new();
    let mut citations = Vec::new();
    let mut lines = Vec::new();
    for s in picked {
        let n = match order.iter().position(|c| *c == s.chunk) {
            Some(i) => i + 1,
            None => {
                order.push(s.chunk.clone());
                citations.push(quoted(ctx, weights, s));
                order.len()
            }
        };
        lines.push(format!("{} [{n}]", s.sentence));
    }
    let chinese = question.chars().any(text::is_cjk);
    let lead = if chinese {
        "根据知识库："
    } else {
        "According to the knowledge base: "
    };
    let text = format!("{lead}{}", lines.join("\n- "));
    PlannerAction::Answer { text, citations }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_nouns_written_together_make_a_compound_its_modifier_belongs_to() {
        let found = compounds("纸质发票弄丢了，还能报销吗？");
        assert!(
            found.contains(&("纸质".to_string(), "纸质发票".to_string())),
            "{found:?}"
        );
        // A verb between them, or Latin words, make none.
        assert!(compounds("发票丢了").iter().all(|(m, _)| m != "丢"));
        assert!(compounds("Can I expense a paper invoice?").is_empty());
    }
}
