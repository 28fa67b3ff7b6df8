//! What goes back to the model after its calls, in the question's language: plain text, not
//! JSON, so that a small model reads the passages rather than the syntax around them.
//!
//! A search's tool message ([`RoundMessage`]) is one line about the search (its round, its
//! keywords, the searches left), the numbered passages (each hit's two or three sentences most
//! about the question and the keywords, about 2,000 characters a round: see
//! [`crate::agent::passages`]), a line saying whether they look enough to answer, and how to
//! cite them by number. Refusals say what was wrong and what to do next.

use crate::agent::planner::{Observation, RefusalReason};
use crate::search::sufficiency::Sufficiency;
use crate::text::Lang;

/// One search's tool message, kept in parts so the context budget can leave out its
/// lowest-ranked passages and still say which ones it left out.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundMessage {
    pub round: u32,
    lang: Lang,
    head: String,
    /// (number, chunk id, the passage as shown), best hit first.
    passages: Vec<(usize, String, String)>,
    tail: String,
}

impl RoundMessage {
    /// A search's message: `passages` are (number, chunk id, block) as shown.
    pub fn new(
        lang: Lang,
        round: u32,
        keywords: &[String],
        searches_left: u32,
        sufficiency: &Sufficiency,
        passages: Vec<(usize, String, String)>,
    ) -> Self {
        let head = match (lang, passages.len()) {
            (Lang::En, 0) => format!(
                "Search {round} (keywords: {}) found nothing. {}",
                keywords.join(", "),
                searches_left_text(lang, searches_left)
            ),
            (Lang::En, n) => format!(
                "Search {round} (keywords: {}) found {n} passage{}. {}",
                keywords.join(", "),
                if n == 1 { "" } else { "s" },
                searches_left_text(lang, searches_left)
            ),
            (Lang::Zh, 0) => format!(
                "第{round}次检索（关键词：{}）没有找到结果。{}",
                keywords.join("、"),
                searches_left_text(lang, searches_left)
            ),
            (Lang::Zh, n) => format!(
                "第{round}次检索（关键词：{}）找到{n}段。{}",
                keywords.join("、"),
                searches_left_text(lang, searches_left)
            ),
        };
        let tail = match passages.first() {
            None => match lang {
                Lang::En => "Try other terms: synonyms, the documents' own wording, or the other \
                             language."
                    .to_string(),
                Lang::Zh => "换用其他词检索：同义词、文件里的说法，或另一种语言。".to_string(),
            },
            Some((first, _, _)) => {
                let verdict = verdict(lang, sufficiency);
                match lang {
                    Lang::En => format!(
                        "{verdict}\nTo answer, call submitAnswer with the numbers of the passages \
                         it comes from, e.g. \"citations\": [{first}]."
                    ),
                    Lang::Zh => format!(
                        "{verdict}\n回答时调用 submitAnswer，写上依据的段落编号，例如 \"citations\": [{first}]。"
                    ),
                }
            }
        };
        Self {
            round,
            lang,
            head,
            passages,
            tail,
        }
    }

    /// How many passages the message shows in full.
    pub fn passages(&self) -> usize {
        self.passages.len()
    }

    /// The chunk id of the `i`th passage (0 is the best).
    pub fn chunk_id(&self, i: usize) -> Option<&str> {
        self.passages.get(i).map(|(_, id, _)| id.as_str())
    }

    /// The message with its first `kept` passages, and a line naming the numbers of the others.
    pub fn render(&self, kept: usize) -> String {
        let mut parts = vec![self.head.clone()];
        parts.extend(self.passages.iter().take(kept).map(|(_, _, b)| b.clone()));
        let left_out: Vec<String> = (self.passages.iter().skip(kept))
            .map(|(n, _, _)| format!("[{n}]"))
            .collect();
        if !left_out.is_empty() {
            parts.push(match self.lang {
                Lang::En => format!(
                    "Passages {} of this search were left out to fit the model's context; they \
                     can still be cited by number.",
                    left_out.join(", ")
                ),
                Lang::Zh => format!(
                    "为了放进模型的上下文，这次检索的段落 {} 没有显示；仍可按编号引用。",
                    left_out.join("、")
                ),
            });
        }
        parts.push(self.tail.clone());
        parts.join("\n\n")
    }
}

fn searches_left_text(lang: Lang, left: u32) -> String {
    match (lang, left) {
        (Lang::En, 0) => "No searches are left.".to_string(),
        (Lang::En, 1) => "1 search left.".to_string(),
        (Lang::En, n) => format!("{n} searches left."),
        (Lang::Zh, 0) => "检索次数已用完。".to_string(),
        (Lang::Zh, n) => format!("还可检索{n}次。"),
    }
}

/// Whether the passages look enough to answer, and the key terms no passage has.
fn verdict(lang: Lang, s: &Sufficiency) -> String {
    let missing = match lang {
        Lang::En => s.missing_terms.join(", "),
        Lang::Zh => s.missing_terms.join("、"),
    };
    match (lang, s.sufficient, missing.is_empty()) {
        (Lang::En, true, _) => "These passages look enough to answer.".to_string(),
        (Lang::En, false, true) => "These passages may not answer the question.".to_string(),
        (Lang::En, false, false) => {
            format!("These passages may not answer the question; none has: {missing}.")
        }
        (Lang::Zh, true, _) => "这些段落看来足以回答。".to_string(),
        (Lang::Zh, false, true) => "这些段落可能不够回答这个问题。".to_string(),
        (Lang::Zh, false, false) => {
            format!("这些段落可能不够回答这个问题；没有段落包含：{missing}。")
        }
    }
}

/// The message for an observation other than a search's hits. `number_of` gives the passage
/// number a chunk was shown under, for refused citations.
pub fn observation_text(
    lang: Lang,
    obs: &Observation,
    searches_left: u32,
    number_of: &dyn Fn(&str) -> Option<usize>,
) -> String {
    let left = searches_left_text(lang, searches_left);
    match obs {
        // Searches are shown by `RoundMessage`; this is only a fallback.
        Observation::Hits { round, .. } => match lang {
            Lang::En => format!("Search {round} was run. {left}"),
            Lang::Zh => format!("第{round}次检索已完成。{left}"),
        },
        Observation::Repeated {
            keywords,
            first_round,
        } => match lang {
            Lang::En => format!(
                "Not searched: the keywords {} were already searched in search {first_round}. \
                 Use different keywords, or answer from the passages you have. {left}",
                keywords.join(", ")
            ),
            Lang::Zh => format!(
                "没有检索：关键词 {} 在第{first_round}次检索时已经用过。请换用其他关键词，\
                 或根据已有的段落回答。{left}",
                keywords.join("、")
            ),
        },
        Observation::Rejected { message } => match lang {
            Lang::En => format!("Not carried out: {message}. {left}"),
            Lang::Zh => format!("没有执行：{message}。{left}"),
        },
        Observation::FactProposed {
            key,
            value,
            kept,
            message,
        } => match (lang, kept) {
            (Lang::En, true) => format!("Noted: {key} = {value}. Go on with the question. {left}"),
            (Lang::En, false) => format!("Not noted ({key} = {value}): {message}. {left}"),
            (Lang::Zh, true) => format!("已记下：{key} = {value}。请继续回答问题。{left}"),
            (Lang::Zh, false) => format!("没有记下（{key} = {value}）：{message}。{left}"),
        },
        Observation::CitationsRefused { refused } => citations_refused(lang, refused, number_of),
    }
}

/// The refusal of an answer whose citations failed the checks: each citation, by passage number
/// where it has one, and why.
fn citations_refused(
    lang: Lang,
    refused: &[RefusalReason],
    number_of: &dyn Fn(&str) -> Option<usize>,
) -> String {
    let lines: Vec<String> = refused
        .iter()
        .map(|r| {
            if r.chunk_id.is_empty() {
                return match lang {
                    Lang::En => "- the answer cites no passage".to_string(),
                    Lang::Zh => "- 回答没有引用任何段落".to_string(),
                };
            }
            let which = match number_of(&r.chunk_id) {
                Some(n) => format!("[{n}]"),
                None => r.chunk_id.clone(),
            };
            let quote = crate::text::truncate_chars(&r.quote, 80);
            match lang {
                Lang::En => format!("- {which} \"{quote}\": {}", r.reason),
                Lang::Zh => format!("- {which} “{quote}”：{}", refusal_reason_zh(&r.reason)),
            }
        })
        .collect();
    match lang {
        Lang::En => format!(
            "The answer was refused:\n{}\nCite only the numbers of passages shown to you, e.g. \
             \"citations\": [1] (a quote, if you give one, copied character for character from \
             that passage), then call submitAnswer again; or call reportNoEvidence.",
            lines.join("\n")
        ),
        Lang::Zh => format!(
            "回答被拒绝：\n{}\n只能引用给你看过的段落编号，例如 \"citations\": [1]（如果写 quote，\
             必须从该段落逐字复制），然后再调用 submitAnswer；或者调用 reportNoEvidence。",
            lines.join("\n")
        ),
    }
}

/// The citation checks' reasons (`agent::citations`) in Chinese; an unknown one as written.
fn refusal_reason_zh(reason: &str) -> String {
    if reason.contains("was not returned") {
        "本次检索没有返回这个段落".to_string()
    } else if reason.contains("has no quote") {
        "没有引文".to_string()
    } else if reason.contains("is longer than") {
        format!(
            "引文太长（最多{}个字）",
            crate::agent::citations::MAX_QUOTE_CHARS
        )
    } else if reason.contains("not in the cited chunk") {
        "引文不在这个段落中".to_string()
    } else {
        reason.to_string()
    }
}

/// Sent in place of a call the loop did not carry out.
pub fn not_run(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "This call was not carried out.",
        Lang::Zh => "这个调用没有执行。",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sufficiency(sufficient: bool, missing: &[&str]) -> Sufficiency {
        Sufficiency {
            sufficient,
            missing_terms: missing.iter().map(|s| s.to_string()).collect(),
            ..Sufficiency::default()
        }
    }

    #[test]
    fn a_round_is_told_in_the_questions_language_and_trimmed_passages_are_named() {
        let passages = vec![
            (
                1,
                "c_a".to_string(),
                "[1] 手册 / 年假\n员工每年享有十天年假。".to_string(),
            ),
            (
                2,
                "c_b".to_string(),
                "[2] 手册 / 病假\n病假须附医院证明。".to_string(),
            ),
        ];
        let keywords = ["年假".to_string(), "天数".to_string()];
        let zh = RoundMessage::new(
            Lang::Zh,
            1,
            &keywords,
            2,
            &sufficiency(false, &["天数"]),
            passages.clone(),
        );
        let full = zh.render(2);
        assert!(
            full.starts_with("第1次检索（关键词：年假、天数）找到2段。还可检索2次。"),
            "{full}"
        );
        assert!(
            full.contains("[2] 手册 / 病假\n病假须附医院证明。"),
            "{full}"
        );
        assert!(full.contains("没有段落包含：天数"), "{full}");
        assert!(full.contains("\"citations\": [1]"), "{full}");
        let trimmed = zh.render(1);
        assert!(!trimmed.contains("病假须附"), "{trimmed}");
        assert!(trimmed.contains("段落 [2] 没有显示"), "{trimmed}");
        assert_eq!(zh.chunk_id(1), Some("c_b"));

        let en = RoundMessage::new(Lang::En, 2, &keywords, 0, &sufficiency(true, &[]), passages);
        let full = en.render(2);
        assert!(
            full.starts_with(
                "Search 2 (keywords: 年假, 天数) found 2 passages. No searches are left."
            ),
            "{full}"
        );
        assert!(full.contains("look enough to answer"), "{full}");
        let none = RoundMessage::new(Lang::En, 3, &keywords, 1, &sufficiency(false, &[]), vec![]);
        assert!(none.render(0).contains("found nothing. 1 search left."));
        assert!(none.render(0).contains("Try other terms"));
    }

    #[test]
    fn refused_citations_name_their_passage_numbers() {
        let refused = Observation::CitationsRefused {
            refused: vec![RefusalReason {
                chunk_id: "c_b".into(),
                quote: "病假不用证明".into(),
                reason: "the quote is not in the cited chunk".into(),
            }],
        };
        let number = |id: &str| (id == "c_b").then_some(2);
        let zh = observation_text(Lang::Zh, &refused, 1, &number);
        assert!(
            zh.contains("- [2] “病假不用证明”：引文不在这个段落中"),
            "{zh}"
        );
        let en = observation_text(Lang::En, &refused, 1, &number);
        assert!(
            en.contains("- [2] \"病假不用证明\": the quote is not in the cited chunk"),
            "{en}"
        );
    }
}
