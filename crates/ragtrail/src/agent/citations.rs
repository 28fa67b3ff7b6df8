//! Citation checks: an answer may cite only chunks returned in this run, and every quote must be
//! found verbatim (up to whitespace) in the chunk it cites.

use std::collections::HashMap;

use super::planner::{ProposedCitation, RefusalReason};
use crate::text::quote_in_text;

/// Longest quote accepted, in characters: a quote is a short extract, not the whole chunk.
pub const MAX_QUOTE_CHARS: usize = 300;

/// The full text of each chunk returned in this run, by id.
pub trait ReturnedTexts {
    fn text_of(&self, chunk_id: &str) -> Option<&str>;
}

impl ReturnedTexts for HashMap<String, String> {
    fn text_of(&self, chunk_id: &str) -> Option<&str> {
        self.get(chunk_id).map(String::as_str)
    }
}

/// Checks every citation against the chunks returned in this run.
pub fn check(citations: &[ProposedCitation], returned: &impl ReturnedTexts) -> Vec<RefusalReason> {
    citations
        .iter()
        .filter_map(|c| {
            let reason = match returned.text_of(&c.chunk_id) {
                None => "this chunk id was not returned by any search in this run".to_string(),
                Some(_) if c.quote.trim().is_empty() => "the citation has no quote".to_string(),
                Some(_) if crate::text::char_len(&c.quote) > MAX_QUOTE_CHARS => {
                    format!("the quote is longer than {MAX_QUOTE_CHARS} characters")
                }
                Some(text) if !quote_in_text(&c.quote, text) => {
                    "the quote is not in the cited chunk".to_string()
                }
                Some(_) => return None,
            };
            Some(RefusalReason {
                chunk_id: c.chunk_id.clone(),
                quote: c.quote.clone(),
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn returned() -> HashMap<String, String> {
        HashMap::from([(
            "c_1".to_string(),
            "高铁票须提供\n报销凭证，截图不予报销。".to_string(),
        )])
    }

    fn cite(id: &str, quote: &str) -> ProposedCitation {
        ProposedCitation {
            chunk_id: id.into(),
            quote: quote.into(),
        }
    }

    #[test]
    fn verbatim_quotes_of_returned_chunks_pass() {
        assert!(check(&[cite("c_1", "高铁票须提供 报销凭证")], &returned()).is_empty());
        assert!(check(&[cite("c_1", "截图不予报销。…")], &returned()).is_empty());
    }

    #[test]
    fn forged_ids_and_quotes_are_refused() {
        let refused = check(
            &[
                cite("c_9", "截图不予报销"),
                cite("c_1", "截图可以报销"),
                cite("c_1", " "),
            ],
            &returned(),
        );
        let reasons: Vec<_> = refused.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(reasons.len(), 3);
        assert!(reasons[0].contains("not returned"));
        assert!(reasons[1].contains("not in the cited chunk"));
        assert!(reasons[2].contains("no quote"));
    }
}
