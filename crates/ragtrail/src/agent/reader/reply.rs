//! Reading the model's reply in the reader mode: `NONE`, or an answer whose sentences cite the
//! numbered passages in brackets (`[2]`, `【2】`, `[1, 3]`). Anything else is unusable, and
//! the caller falls back to the offline planner's reply.

use crate::agent::passages::{bracket_at, strip_markers};

/// What the model said.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// No passage answers.
    None,
    /// An answer: its text with the brackets renumbered `1..` in the order the passages are
    /// first cited, and those passages' numbers as shown (1-based).
    Answer { text: String, cited: Vec<usize> },
    /// Neither: why, for the trace.
    Unusable(String),
}

/// The reply's markers for "no passage answers", in either language.
fn says_none(reply: &str) -> bool {
    let t = reply
        .trim()
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace() || c == '。');
    t.eq_ignore_ascii_case("none") || t.to_ascii_uppercase().starts_with("NONE")
}

/// Reads a reply that cites `shown` numbered passages.
pub fn read(reply: &str, shown: usize) -> Read {
    let reply = reply.trim();
    if reply.is_empty() {
        return Read::Unusable("the reply was empty".to_string());
    }
    if says_none(reply) {
        return Read::None;
    }
    let mut cited: Vec<usize> = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < reply.len() {
        if let Some((end, numbers)) = bracket_at(reply, i) {
            for n in numbers {
                if n == 0 || n > shown {
                    return Read::Unusable(format!(
                        "the reply cites passage {n}, but {shown} were shown"
                    ));
                }
                let k = match cited.iter().position(|&c| c == n) {
                    Some(k) => k,
                    None => {
                        cited.push(n);
                        cited.len() - 1
                    }
                };
                text.push_str(&format!("[{}]", k + 1));
            }
            i = end;
            continue;
        }
        let c = reply[i..].chars().next().unwrap_or(' ');
        text.push(c);
        i += c.len_utf8();
    }
    if cited.is_empty() {
        // "None of the passages…" written out in words is still a "none".
        let lower = reply.to_lowercase();
        if lower.contains("none") || reply.contains("没有") && reply.contains("段落") {
            return Read::None;
        }
        return Read::Unusable("the reply cites no passage".to_string());
    }
    let bare = strip_markers(&text);
    if bare.trim().chars().filter(|c| c.is_alphanumeric()).count() < 2 {
        return Read::Unusable("the reply has citations but no answer".to_string());
    }
    Read::Answer {
        text: text.trim().to_string(),
        cited,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_in_either_form() {
        assert_eq!(read("NONE", 3), Read::None);
        assert_eq!(read(" none. ", 3), Read::None);
        assert_eq!(read("NONE of the passages say.", 3), Read::None);
        assert_eq!(read("None of the passages states it.", 3), Read::None);
        assert_eq!(read("这些段落没有提到这一点。", 3), Read::None);
    }

    #[test]
    fn citations_are_renumbered_in_order_of_first_use() {
        assert_eq!(
            read("Leave is 15 days [3]. It accrues monthly [1][3].", 3),
            Read::Answer {
                text: "Leave is 15 days [1]. It accrues monthly [2][1].".into(),
                cited: vec![3, 1],
            }
        );
        assert_eq!(
            read("年假为十五天【2】，按月累计[1, 2]。", 2),
            Read::Answer {
                text: "年假为十五天[1]，按月累计[2][1]。".into(),
                cited: vec![2, 1],
            }
        );
    }

    #[test]
    fn unusable_replies_say_why() {
        assert_eq!(
            read("Leave is 15 days [4].", 3),
            Read::Unusable("the reply cites passage 4, but 3 were shown".into())
        );
        assert_eq!(
            read("Leave is 15 days.", 3),
            Read::Unusable("the reply cites no passage".into())
        );
        assert_eq!(read("  ", 3), Read::Unusable("the reply was empty".into()));
        assert_eq!(
            read("[1]", 3),
            Read::Unusable("the reply has citations but no answer".into())
        );
        // A bracket that is not a citation stays text.
        assert!(matches!(
            read("See [the handbook] [1].", 1),
            Read::Answer { .. }
        ));
    }

    #[test]
    fn markers_are_stripped() {
        assert_eq!(strip_markers("15 days [1]."), "15 days .");
    }
}
