//! Mining a chunk's text for what it points at: references in quotes and form codes, and names
//! in prose.

use std::collections::{HashMap, HashSet};

use super::{sentences, weight_held};
use crate::text::{self, char_len};

/// The references of `text` named in a sentence that shares a question word, each with whether
/// it is strong (see [`references_with_strength`]) and the sentence's question-term weight. A
/// reference in a sentence about something else leads away from the question ("submit it in
/// 易报" sends a question about hotel rates to the expense system).
pub(super) fn references_near_question(
    text: &str,
    weights: &HashMap<String, f64>,
) -> Vec<(String, bool, f64)> {
    let mut out = Vec::new();
    for sentence in sentences(text) {
        // Most sentences name nothing: look for names before analysing the words.
        let references = references_with_strength(sentence);
        if references.is_empty() {
            continue;
        }
        let sentence_terms: HashSet<String> =
            text::terms(sentence).into_iter().map(|t| t.text).collect();
        let score = weight_held(weights, &sentence_terms);
        if score > 0.0 {
            out.extend(references.into_iter().map(|(r, strong)| (r, strong, score)));
        }
    }
    out
}

/// Names a chunk points at: 《…》, “…”, 「…」, "…" quotes and codes like `FIN-07`, with whether
/// each is a document title (《…》) or a code: by convention those point at another rule or
/// form, while quotes often just name a term or a system.
pub(super) fn references_with_strength(text: &str) -> Vec<(String, bool)> {
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
pub(super) fn names(sentence: &str) -> Vec<String> {
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
    // A name ends where Chinese text begins: in "FIN-07是「易报」中的在线表单" or "Policy》中的
    // 标准配置" the name is the Latin part alone, and the rest is no part of one.
    let pieces = sentence.split_whitespace().flat_map(latin_start);
    for (i, raw) in pieces.enumerate() {
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

/// `word` split where its first CJK character is, when Latin text comes before it ("FIN-07是
/// 「易报」" → "FIN-07", "是「易报」"); else `word` whole.
fn latin_start(word: &str) -> Vec<&str> {
    match word.find(text::is_cjk) {
        Some(at) if at > 0 => vec![&word[..at], &word[at..]],
        _ => vec![word],
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
        // Chinese text ends a name, as a comma would.
        assert_eq!(
            names(
                "超标须填写 FIN-07是「易报」中的在线表单，按 Remote Work and Equipment Policy》中的标准配置向IT部申领"
            ),
            vec!["FIN-07", "Remote Work and Equipment Policy"]
        );
        assert_eq!(
            names("Staffed 24 hours, Monday to Friday, by Ann Lee."),
            vec!["Ann Lee"]
        );
    }
}
