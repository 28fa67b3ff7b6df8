//! Reading the question: its content words and their weight, the nouns no chunk mentions,
//! small talk, and whether it leans on the previous turn.

use std::collections::{HashMap, HashSet};

use super::{OfflinePlanner, analysed};
use crate::agent::PlannerContext;
use crate::search::sufficiency::{KeyTerm, idf, key_terms};
use crate::text::{self, char_len};

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

/// The question's key terms as the verdict weighs them: `searchDocs`' key terms, with the
/// words jieba's HMM made up and no chunk mentions replaced by their dictionary words.
fn verdict_keys(question: &str, ctx: &PlannerContext<'_>) -> Vec<KeyTerm> {
    let doc_freq = |t: &str| ctx.lookup.doc_freq(t);
    let n = ctx.lookup.num_chunks();
    let mut seen = HashSet::new();
    let mut keys = Vec::new();
    for key in key_terms(&[question.to_string()], &doc_freq, n) {
        let replaced = match made_up_pieces(&key.term, &|w: &str| ctx.lookup.mentions(w)) {
            Some(pieces) => key_terms(&pieces, &doc_freq, n),
            None => vec![key],
        };
        keys.extend(replaced.into_iter().filter(|k| seen.insert(k.term.clone())));
    }
    keys
}

/// A word jieba's HMM joined from pieces its dictionary lacks as a whole ("最多能", "能报",
/// "没休") and that no chunk mentions: segmentation noise, which can only ever count against
/// the evidence. Its dictionary words of two or more characters stand for it; most such words
/// have none (能 + 报) and drop out. `None` for any other word.
fn made_up_pieces(term: &str, mentions: &dyn Fn(&str) -> bool) -> Option<Vec<String>> {
    let jieba = text::jieba();
    if char_len(term) < 2 || !term.chars().all(text::is_cjk) || jieba.has_word(term) {
        return None;
    }
    if mentions(term) {
        return None;
    }
    Some(
        jieba
            .cut(term, false)
            .into_iter()
            .map(|t| t.word.to_string())
            .filter(|w| char_len(w) >= 2)
            .collect(),
    )
}

/// The reply to a greeting or thanks (and nothing else), in the question's language.
pub(super) fn small_talk_reply(question: &str) -> Option<&'static str> {
    if !is_small_talk(question) {
        return None;
    }
    let chinese = question.chars().any(text::is_cjk);
    Some(match (chinese, is_thanks(question)) {
        (true, true) => "不客气！还有其他制度方面的问题吗？",
        (true, false) => "你好！请问想了解哪方面的制度？",
        (false, true) => "You're welcome! Anything else about the policies?",
        (false, false) => "Hello! What would you like to know about the policies?",
    })
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

impl OfflinePlanner {
    /// Reads the question on the run's first turn: its content words, with the previous turn's
    /// topic words in front when it leans on that turn, and its nouns no chunk mentions.
    pub(super) fn read_question(&mut self, ctx: &PlannerContext<'_>) {
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
        let unknown = unknown_nouns(&self.effective_question(ctx), &|word: &str| {
            ctx.lookup.mentions(word)
        });
        (self.everyday_unknown, self.unknown_nouns) =
            unknown.into_iter().partition(|w| text::is_everyday_word(w));
        self.verdict_keys = verdict_keys(&self.effective_question(ctx), ctx);
    }

    /// The question with the topic words carried over from the previous turn, if any.
    pub(super) fn effective_question(&self, ctx: &PlannerContext<'_>) -> String {
        if self.carried.is_empty() {
            ctx.question.to_string()
        } else {
            format!("{} {}", self.carried.join(" "), ctx.question)
        }
    }

    pub(super) fn weights(&self) -> HashMap<String, f64> {
        let mut w = HashMap::new();
        for (word, weight) in &self.question_words {
            for t in analysed(word) {
                w.entry(t).or_insert(*weight);
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Everyday words and rare ones, as counted in jieba's dictionary.
        // Nothing unknown at all.
        assert!(unknown_nouns("洗衣服的钱能报销吗？", &|_: &str| true).is_empty());
    }

    #[test]
    fn made_up_words_no_chunk_mentions_stand_for_their_dictionary_words() {
        let nowhere = |_: &str| false;
        // Only the dictionary words of two or more characters stand for a made-up word: 报销
        // for 报销完, nothing for 能报 (能 + 报) or 最多能 (最 + 多 + 能).
        assert_eq!(
            made_up_pieces("报销完", &nowhere),
            Some(vec!["报销".to_string()])
        );
        assert_eq!(made_up_pieces("能报", &nowhere), Some(Vec::new()));
        assert_eq!(made_up_pieces("最多能", &nowhere), Some(Vec::new()));
        // A dictionary word, a word the knowledge base uses (年假 is matched by its bigrams),
        // and a Latin word stay as they are.
        assert_eq!(made_up_pieces("报销", &nowhere), None);
        assert_eq!(made_up_pieces("最多能", &|_: &str| true), None);
        assert_eq!(made_up_pieces("globex", &nowhere), None);
    }
}
