//! The system prompt (`prompts/system.md`) and the other fixed texts the model reads.

/// The system prompt template: `{today}` and `{max_searches}` are filled in per run.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../../prompts/system.md");

/// The system prompt for a run.
pub fn system_prompt(today: &str, max_searches: u32) -> String {
    SYSTEM_TEMPLATE
        .replace("{today}", today)
        .replace("{max_searches}", &max_searches.to_string())
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
}
