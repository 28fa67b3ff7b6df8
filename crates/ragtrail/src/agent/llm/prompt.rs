//! The system prompt (`prompts/system.md`) and the other fixed texts the model reads.

/// The system prompt template: `{today}` and `{max_searches}` are filled in per run.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../../prompts/system.md");

/// The system prompt for a run.
pub fn system_prompt(today: &str, max_searches: u32) -> String {
    SYSTEM_TEMPLATE
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
    let zh = crate::text::Lang::of(question) == crate::text::Lang::Zh;
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
pub fn answer_now(searches_done: u32, max_searches: u32) -> String {
    format!(
        "No searches are left ({searches_done} of {max_searches} used). Do not call searchDocs again: \
         answer now with submitAnswer, citing the hits you have, or call reportNoEvidence."
    )
}

/// Sent after a reply that had neither text nor a tool call.
pub const EMPTY_REPLY: &str = "Your last reply was empty: it had neither a tool call nor text. \
    Call searchDocs to search, submitAnswer to answer with citations, or reportNoEvidence.";

/// Sent with the refusal of a plain-text answer (a reply without a tool call).
pub const USE_SUBMIT_ANSWER: &str = "Your last reply was plain text, not a tool call. To answer, \
    call submitAnswer with citations (chunkId and a verbatim quote from a hit); to search, call \
    searchDocs; if the knowledge base lacks the answer, call reportNoEvidence.";

/// Answers a `reportNoEvidence` call made before any search, with the hits of the search made
/// instead.
pub const GIVE_UP_OVERRIDDEN: &str = "reportNoEvidence is not accepted before any search: the \
    question's own words were searched instead, and these are the hits. Answer with submitAnswer \
    citing them, search with other keywords, or call reportNoEvidence again if they do not help.";

/// Earlier turns of a conversation sent with a new question.
pub const HISTORY_TURNS: usize = 4;

/// How an earlier turn's answer is shown to the model: the answer and the keywords it searched.
pub fn earlier_answer(turn: &crate::agent::conversation::PriorTurn) -> String {
    let keywords: Vec<String> = turn
        .keywords
        .iter()
        .map(|k| format!("[{}]", k.join(", ")))
        .collect();
    let answer = crate::text::truncate_chars(&turn.answer, 600);
    if keywords.is_empty() {
        answer.to_string()
    } else {
        format!("{answer}\n(keywords searched: {})", keywords.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_none_is_left() {
        let p = system_prompt("2026-11-30", 3);
        assert!(p.contains("Today's date is 2026-11-30."), "{p}");
        assert!(p.contains("at most 3 searches"), "{p}");
        assert!(!p.contains("{today}"));
        assert!(!p.contains("{max_searches}"));
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
