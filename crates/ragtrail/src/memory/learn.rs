//! Facts an asker states about themselves in a question, recognised by a few fixed patterns:
//! a grade ("我是B类员工", "I'm a grade B employee"), a base city ("我常驻成都", "I'm based in
//! Singapore"), a start date ("我2023年7月入职", "我去年7月入职", "I started on 2023-07-01",
//! "I joined last July"; a year said relative to the run's day is resolved against it). Only
//! what the asker says of themselves, never what a document or a model says; remembered only
//! when the operator asks for it (`ask --remember`).

/// Longest value taken from a question, in characters.
const MAX_SAID_CHARS: usize = 40;

/// The (key, value) pairs the question states about the asker, at most one per key. `today`
/// (`YYYY-MM-DD`, the run's day) resolves a year said relative to it ("去年", "last July");
/// without a valid one, such a date is not taken.
pub fn facts_stated(question: &str, today: &str) -> Vec<(String, String)> {
    let today = chrono::NaiveDate::parse_from_str(today, "%Y-%m-%d").ok();
    let mut facts: Vec<(String, String)> = Vec::new();
    let mut add = |key: &str, value: Option<String>| {
        if let Some(v) = value.map(|v| v.trim().to_string())
            && !v.is_empty()
            && v.chars().count() <= MAX_SAID_CHARS
            && !facts.iter().any(|(k, _)| k == key)
        {
            facts.push((key.to_string(), v));
        }
    };
    add("grade", grade_zh(question).or_else(|| grade_en(question)));
    add("base city", city_zh(question).or_else(|| city_en(question)));
    add(
        "start date",
        (start_zh(question, today)).or_else(|| start_en(question, today)),
    );
    facts
}

/// Why a fact a planner proposes (the model's `proposeFact` tool) is not one the question
/// states, or `None` when it is: a key that names a fact (a few words, not a sentence) and a
/// value in the question's own words (case and runs of spaces aside; a Latin value as whole
/// words, so that "B" is not found in "bring"). The model may read "I work out of the Chengdu
/// office" as base city = Chengdu; it may not infer a value the asker never wrote.
pub fn proposal_refusal(question: &str, key: &str, value: &str) -> Option<&'static str> {
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || key.chars().count() > MAX_SAID_CHARS || key.chars().any(char::is_control) {
        return Some("the key must name the fact in a few words, such as `grade` or `base city`");
    }
    if value.is_empty() || value.chars().count() > MAX_SAID_CHARS {
        return Some("the value must be a few words from the question");
    }
    if !says(question, value) {
        return Some(
            "the value is not in the question's words: only what the asker says of themselves is kept",
        );
    }
    None
}

/// Whether `text` holds `value` (lowercased, spaces collapsed), not inside a longer Latin word.
fn says(text: &str, value: &str) -> bool {
    let normal = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let (text, value) = (normal(text), normal(value));
    let latin = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    text.match_indices(value.as_str()).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        // Inside a word: the value starts a Latin word mid-way or ends one early.
        let starts_inside = latin(value.chars().next()) && latin(before);
        let ends_inside = latin(value.chars().next_back()) && latin(after);
        !starts_inside && !ends_inside
    })
}

/// "我是B类员工", "我属于B类": the code and its 类/级.
fn grade_zh(q: &str) -> Option<String> {
    for lead in ["我是", "我属于", "我的级别是", "我的员工级别是"] {
        for (at, _) in q.match_indices(lead) {
            let rest = &q[at + lead.len()..];
            let code: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if code.is_empty() || code.len() > 3 {
                continue;
            }
            let after = rest[code.len()..].chars().next();
            if let Some(kind @ ('类' | '级')) = after {
                return Some(format!("{}{kind}", code.to_uppercase()));
            }
        }
    }
    None
}

/// "I'm a grade B employee", "I am grade B", "my grade is B".
fn grade_en(q: &str) -> Option<String> {
    let lower = q.to_lowercase();
    for lead in [
        "i'm a grade ",
        "i am a grade ",
        "i'm grade ",
        "i am grade ",
        "my grade is ",
        "i'm in grade ",
        "i am in grade ",
    ] {
        if let Some(at) = lower.find(lead) {
            let code: String = q[at + lead.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if !code.is_empty() && code.len() <= 3 {
                return Some(code.to_uppercase());
            }
        }
    }
    None
}

/// "我常驻成都", "我的常驻城市是成都", "我在成都工作": the Chinese name that follows.
fn city_zh(q: &str) -> Option<String> {
    let name_after = |rest: &str, stop: &[&str]| -> Option<String> {
        let mut name = String::new();
        for c in rest.chars() {
            if !is_han(c) {
                break;
            }
            name.push(c);
            if stop.iter().any(|s| name.ends_with(s)) {
                let cut = stop.iter().find(|s| name.ends_with(*s))?;
                name.truncate(name.len() - cut.len());
                break;
            }
        }
        let n = name.chars().count();
        (2..=8).contains(&n).then_some(name)
    };
    for lead in ["我的常驻城市是", "我常驻", "我的base在", "我base在"] {
        if let Some(at) = q.find(lead) {
            return name_after(&q[at + lead.len()..], &["工作", "上班", "办公"]);
        }
    }
    let lead = "我在";
    let at = q.find(lead)?;
    let rest = &q[at + lead.len()..];
    let name = name_after(rest, &["工作", "上班", "办公"])?;
    let after = &rest[name.len()..];
    ["工作", "上班", "办公"]
        .iter()
        .any(|w| after.starts_with(w))
        .then_some(name)
}

/// "I'm based in Singapore", "I work in Kuala Lumpur": the capitalised words that follow.
fn city_en(q: &str) -> Option<String> {
    let lower = q.to_lowercase();
    for lead in [
        "i'm based in ",
        "i am based in ",
        "i work in ",
        "i work out of ",
        "my base city is ",
        "my base is ",
    ] {
        if let Some(at) = lower.find(lead) {
            // Capitalised words up to the first punctuation: "Kuala Lumpur." is two words.
            let mut words: Vec<&str> = Vec::new();
            for raw in q[at + lead.len()..].split_whitespace().take(3) {
                let word = raw.trim_end_matches(|c: char| !c.is_alphanumeric());
                if !word.chars().next().is_some_and(char::is_uppercase) {
                    break;
                }
                words.push(word);
                if word.len() < raw.len() {
                    break;
                }
            }
            if !words.is_empty() {
                return Some(words.join(" "));
            }
        }
    }
    None
}

/// "我2023年7月入职", "我是2023年7月1日入职的", "我去年7月入职" (今年, 去年, 前年 against
/// `today`): YYYY-MM or YYYY-MM-DD.
fn start_zh(q: &str, today: Option<chrono::NaiveDate>) -> Option<String> {
    use chrono::Datelike;
    let at = q.find("入职")?;
    let before = &q[..at];
    let year_at = before.rfind('年')?;
    let digits: String = before[..year_at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let year: u32 = if digits.is_empty() {
        // 今年 / 去年 / 前年: the character before 年 says how many years back.
        let back = match before[..year_at].chars().next_back()? {
            '今' => 0,
            '去' => 1,
            '前' => 2,
            _ => return None,
        };
        u32::try_from(today?.year() - back).ok()?
    } else {
        digits.parse().ok()?
    };
    let tail = &before[year_at + '年'.len_utf8()..];
    let (month, tail) = tail.split_once('月')?;
    let day = tail.split_once('日').map(|(d, _)| d.trim());
    let month: u32 = month.trim().parse().ok()?;
    if !(1900..=2200).contains(&year) || !(1..=12).contains(&month) {
        return None;
    }
    Some(match day.and_then(|d| d.parse::<u32>().ok()) {
        Some(d) if (1..=31).contains(&d) => format!("{year:04}-{month:02}-{d:02}"),
        _ => format!("{year:04}-{month:02}"),
    })
}

/// "I started on 2023-07-01", "I joined on 2023-07-01", "I joined last July", "I started in
/// March this year" (against `today`).
fn start_en(q: &str, today: Option<chrono::NaiveDate>) -> Option<String> {
    use chrono::Datelike;
    let lower = q.to_lowercase();
    for lead in ["i started on ", "i joined on ", "my start date is "] {
        if let Some(at) = lower.find(lead) {
            let date: String = q[at + lead.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            if chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").is_ok() {
                return Some(date);
            }
        }
    }
    // A month named with a year relative to today: "last July", "in July last year".
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let said = |w: &[&str]| {
        ["started", "joined"]
            .iter()
            .any(|v| w.windows(2).any(|p| p == ["i", *v]))
    };
    if !said(&words) {
        return None;
    }
    let year = today?.year();
    for (i, w) in words.iter().enumerate() {
        let Some(month) = MONTHS.iter().position(|m| m == w).map(|m| m as u32 + 1) else {
            continue;
        };
        let before = i.checked_sub(1).and_then(|j| words.get(j)).copied();
        let after = (words.get(i + 1).copied(), words.get(i + 2).copied());
        let back = match (before, after) {
            (Some("last"), _) | (_, (Some("last"), Some("year"))) => 1,
            (Some("this"), _) | (_, (Some("this"), Some("year"))) => 0,
            _ => continue,
        };
        return Some(format!("{:04}-{month:02}", year - back));
    }
    None
}

/// The English month names, lowercased, January first (also what an answer's date may name:
/// `agent::offline::asked`).
pub(crate) const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// A Han character (the CJK unified blocks), as place names are written.
fn is_han(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposed_fact_is_kept_only_when_the_question_says_it() {
        let q = "I work out of the Chengdu office — what is the daily meal allowance?";
        assert_eq!(proposal_refusal(q, "base city", "chengdu"), None);
        assert_eq!(
            proposal_refusal("我在成都办公室上班", "base city", "成都"),
            None
        );
        assert_eq!(
            proposal_refusal("I'm grade  B here", "grade", "grade b"),
            None
        );
        // A value the asker never wrote (nor inside a word: "b" of "bring"), an empty one, a
        // key that is a sentence.
        let guessed = proposal_refusal(q, "grade", "B").is_some_and(|r| r.contains("not in"));
        assert!(guessed);
        assert!(proposal_refusal("Can I bring my dog?", "grade", "b").is_some());
        assert!(proposal_refusal(q, "base city", " ").is_some());
        assert!(proposal_refusal(q, &"k".repeat(41), "Chengdu").is_some());
        assert!(proposal_refusal(q, "", "Chengdu").is_some());
    }

    fn said(q: &str) -> Vec<(String, String)> {
        facts_stated(q, "2026-12-05")
    }

    fn pair(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn facts_said_of_oneself_are_recognised() {
        assert_eq!(
            said("我是B类员工，出差住宿标准多少？"),
            [pair("grade", "B类")]
        );
        assert_eq!(
            said("I'm based in Singapore. What is the per diem?"),
            [pair("base city", "Singapore")]
        );
        assert_eq!(
            said("我常驻成都，伙食补贴多少"),
            [pair("base city", "成都")]
        );
        assert_eq!(said("我在成都工作"), [pair("base city", "成都")]);
        assert_eq!(
            said("我2023年7月入职，年假几天？"),
            [pair("start date", "2023-07")]
        );
        assert_eq!(
            said("I'm a grade B employee and I started on 2023-07-01"),
            [pair("grade", "B"), pair("start date", "2023-07-01")]
        );
    }

    #[test]
    fn a_year_said_relative_to_the_run_day_is_resolved_against_it() {
        assert_eq!(
            said("我去年7月入职，年假几天？"),
            [pair("start date", "2025-07")]
        );
        assert_eq!(
            said("我是今年3月1日入职的"),
            [pair("start date", "2026-03-01")]
        );
        assert_eq!(said("我前年9月入职"), [pair("start date", "2024-09")]);
        assert_eq!(
            said("I joined last July. How many days of leave do I get?"),
            [pair("start date", "2025-07")]
        );
        assert_eq!(
            said("I started in March this year"),
            [pair("start date", "2026-03")]
        );
        // Without a day to count from, a relative year is not guessed.
        assert!(facts_stated("我去年7月入职", "").is_empty());
        // A month without a year said, or not about the asker: nothing.
        assert!(said("I started in July").is_empty());
        assert!(said("She joined last July").is_empty());
        assert!(said("我明年7月入职").is_empty());
    }

    #[test]
    fn questions_about_others_or_nothing_say_nothing() {
        assert!(said("出差一天伙食补贴多少？").is_empty());
        assert!(said("B类员工住宿标准多少？").is_empty());
        assert!(said("我在想年假怎么算").is_empty());
        assert!(said("What is the hotel cap in Singapore?").is_empty());
        assert!(said("我是新员工").is_empty());
    }
}
