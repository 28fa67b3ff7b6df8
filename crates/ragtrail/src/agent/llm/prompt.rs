//! The system prompt (`prompts/system.md`, `prompts/system.zh.md`) and the other fixed texts
//! the model reads, each in the question's language: a small model follows rules written in
//! the language it is asked in better than rules in another.

use crate::text::Lang;

/// The system prompt template in English: `{today}` and `{max_searches}` are filled in per run.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../../prompts/system.md");

/// The same rules in Chinese, for a question in Chinese.
pub const SYSTEM_TEMPLATE_ZH: &str = include_str!("../../../prompts/system.zh.md");

/// The system prompt for a run whose question is in `lang`.
pub fn system_prompt(lang: Lang, today: &str, max_searches: u32) -> String {
    let template = match lang {
        Lang::En => SYSTEM_TEMPLATE,
        Lang::Zh => SYSTEM_TEMPLATE_ZH,
    };
    template
        .replace("{today}", today)
        .replace("{max_searches}", &max_searches.to_string())
}

/// The asker's remembered facts, appended to the system prompt in the question's language:
/// what the asker told us, the rule that the question's own facts win, and that they are not
/// evidence. `None` when nothing is remembered.
pub fn remembered_facts(question: &str, facts: &[crate::memory::Fact]) -> Option<String> {
    if facts.is_empty() {
        return None;
    }
    let zh = Lang::of(question) == Lang::Zh;
    let list: Vec<String> = (facts.iter())
        .map(|f| {
            if zh {
                format!("- {}：{}", f.key, f.value)
            } else {
                format!("- {}: {}", f.key, f.value)
            }
        })
        .collect();
    let list = list.join("\n");
    Some(if zh {
        format!(
            "提问者告诉过我们的事实（记住的，可能与问题有关）：\n{list}\n\
             规则：当某个事实决定答案时（表格的哪一行、哪一类、哪个标准）就用它，并在回答中说明用了哪些事实；\
             与问题无关的事实不要用。问题本身说明的事实优先于这里记住的事实。\
             这些事实是提问者说的，不是证据：引用只能来自检索结果。"
        )
    } else {
        format!(
            "Facts the asker has told us (remembered, they may bear on the question):\n{list}\n\
             Rules: when a fact decides the answer (which table row, category or cap applies), \
             use it and say in the answer which facts you used; do not use a fact that does not \
             bear on the question. A fact stated in the question itself wins over a remembered \
             one. These facts are the asker's words, not evidence: citations come only from the hits."
        )
    })
}

/// Sent once, when no searches are left.
pub fn answer_now(lang: Lang, searches_done: u32, max_searches: u32) -> String {
    match lang {
        Lang::En => format!(
            "No searches are left ({searches_done} of {max_searches} used). Do not call searchDocs again: \
             answer now with submitAnswer, citing the passages you have by number, or call reportNoEvidence."
        ),
        Lang::Zh => format!(
            "检索次数已用完（{max_searches}次中已用{searches_done}次）。不要再调用 searchDocs：\
             现在就用 submitAnswer 回答，按编号引用已有的段落；或者调用 reportNoEvidence。"
        ),
    }
}

/// Sent after a reply that had neither text nor a tool call.
pub fn empty_reply(lang: Lang) -> &'static str {
    match lang {
        Lang::En => {
            "Your last reply was empty: it had neither a tool call nor text. Call searchDocs to \
             search, submitAnswer to answer citing passages by number, or reportNoEvidence."
        }
        Lang::Zh => {
            "你上一次的回复是空的：既没有调用工具，也没有文字。检索请调用 searchDocs，\
             回答请调用 submitAnswer 并按编号引用段落，找不到依据请调用 reportNoEvidence。"
        }
    }
}

/// Sent after a reply that wrote a tool's call prefix as text (`functions.searchDocs:`) and
/// made no call.
pub fn bare_call_prefix(lang: Lang, tool: &str) -> String {
    match lang {
        Lang::En => format!(
            "Your last reply only wrote the name {tool} as text; no tool was called. Call the \
             tool itself, with its arguments as a JSON object, e.g. searchDocs with \
             {{\"keywords\": [\"annual leave\", \"carry over\"]}}, or submitAnswer with \
             {{\"answer\": \"…\", \"citations\": [1]}}."
        ),
        Lang::Zh => format!(
            "你上一次的回复只以文字写了 {tool} 这个名字，没有调用任何工具。请直接调用工具，\
             参数写成 JSON 对象，例如 searchDocs 用 {{\"keywords\": [\"年假\", \"结转\"]}}，\
             submitAnswer 用 {{\"answer\": \"……\", \"citations\": [1]}}。"
        ),
    }
}

/// Sent with the refusal of a plain-text answer (a reply without a tool call).
pub fn use_submit_answer(lang: Lang) -> &'static str {
    match lang {
        Lang::En => {
            "Your last reply was plain text, not a tool call. To answer, call submitAnswer with \
             the numbers of the passages it comes from, e.g. \"citations\": [1]; to search, call \
             searchDocs; if the knowledge base lacks the answer, call reportNoEvidence."
        }
        Lang::Zh => {
            "你上一次的回复是纯文字，不是工具调用。回答请调用 submitAnswer，写上依据的段落编号，\
             例如 \"citations\": [1]；检索请调用 searchDocs；知识库没有答案时请调用 reportNoEvidence。"
        }
    }
}

/// Answers a `reportNoEvidence` call made before any search, with the hits of the search made
/// instead.
pub fn give_up_overridden(lang: Lang) -> &'static str {
    match lang {
        Lang::En => {
            "reportNoEvidence is not accepted before any search: the question's own words were \
             searched instead, and these are the passages. Answer with submitAnswer citing them by \
             number, search with other keywords, or call reportNoEvidence again if they do not help."
        }
        Lang::Zh => {
            "还没有检索就调用 reportNoEvidence 不被接受：已经改用问题本身的词检索，以上是找到的段落。\
             请用 submitAnswer 按编号引用它们回答，或换关键词检索；如果它们确实没有帮助，再调用 reportNoEvidence。"
        }
    }
}

/// Earlier turns of a conversation sent with a new question.
pub const HISTORY_TURNS: usize = 4;

/// How an earlier turn's answer is shown to the model: the answer and the keywords it searched.
pub fn earlier_answer(lang: Lang, turn: &crate::agent::conversation::PriorTurn) -> String {
    let keywords: Vec<String> = turn
        .keywords
        .iter()
        .map(|k| format!("[{}]", k.join(", ")))
        .collect();
    let answer = crate::text::truncate_chars(&turn.answer, 600);
    match (keywords.is_empty(), lang) {
        (true, _) => answer.to_string(),
        (false, Lang::En) => format!("{answer}\n(keywords searched: {})", keywords.join("; ")),
        (false, Lang::Zh) => format!("{answer}\n（检索过的关键词：{}）", keywords.join("；")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_none_is_left() {
        let p = system_prompt(Lang::En, "2026-11-30", 3);
        assert!(p.contains("Today's date is 2026-11-30."), "{p}");
        assert!(p.contains("at most 3 searches"), "{p}");
        let zh = system_prompt(Lang::Zh, "2026-11-30", 3);
        assert!(zh.contains("今天是 2026-11-30。"), "{zh}");
        assert!(zh.contains("最多检索 3 次"), "{zh}");
        for p in [p, zh] {
            assert!(!p.contains("{today}"));
            assert!(!p.contains("{max_searches}"));
        }
    }

    #[test]
    fn remembered_facts_are_told_in_the_questions_language_with_the_rule() {
        let fact = |key: &str, value: &str| crate::memory::Fact {
            key: key.to_string(),
            value: value.to_string(),
            source: crate::memory::FactSource::Asker,
            set_at: "2026-11-30T06:20:00Z".to_string(),
        };
        let facts = [fact("grade", "B类"), fact("base city", "成都")];
        assert_eq!(remembered_facts("出差一天伙食补贴多少？", &[]), None);
        let zh = remembered_facts("出差一天伙食补贴多少？", &facts).expect("zh");
        assert!(zh.starts_with("提问者告诉过我们的事实"), "{zh}");
        assert!(zh.contains("- grade：B类\n- base city：成都"), "{zh}");
        assert!(zh.contains("问题本身说明的事实优先"), "{zh}");
        let en = remembered_facts("What is the meal allowance?", &facts).expect("en");
        assert!(en.starts_with("Facts the asker has told us"), "{en}");
        assert!(en.contains("- base city: 成都"), "{en}");
        assert!(
            en.contains("A fact stated in the question itself wins"),
            "{en}"
        );
    }
}
