//! What a question asks for, and whether a sentence states that kind of thing: an answer is
//! composed only from sentences that do (a number for "how many days", a rule for "can I", a
//! step for "how do I"); any other sentence about the subject is evidence, not an answer.
//!
//! Read from the question's own interrogative words, in Chinese or English; nothing here knows
//! a knowledge base.

use crate::text::is_cjk;

/// The kind of statement a question (or one part of it) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// A number: a count, duration, amount or share ("几天", "how long", "when").
    Quantity,
    /// A day or a month of the calendar ("几号发", "几月份", "what date"): a duration ("前5天")
    /// does not say it.
    Date,
    /// A rule that says yes or no ("能…吗", "can I").
    YesNo,
    /// A person, role or team ("谁", "who").
    Person,
    /// Steps to take ("怎么", "how do I").
    Procedure,
    /// Anything else ("什么", "what"): a sentence about the subject states it.
    Open,
}

/// The parts of a question, each with the kind it asks for, in the order asked. A question
/// with two interrogatives ("能退吗？运费谁出？") has two parts; one with none has one open part.
pub(super) fn asked_parts(question: &str) -> Vec<(String, Asked)> {
    let mut parts: Vec<(String, Asked)> = Vec::new();
    for clause in clauses(question) {
        if let Some(kind) = kind_of(&clause) {
            // "Can I … and how much …": a kind asked twice is one part.
            if !parts.iter().any(|(_, k)| *k == kind) {
                parts.push((clause, kind));
            }
        }
    }
    if parts.is_empty() {
        parts.push((question.trim().to_string(), Asked::Open));
    }
    parts
}

/// The question's clauses: split at question marks, commas and semicolons (of either script).
fn clauses(question: &str) -> Vec<String> {
    question
        .split(['？', '?', '，', ',', '；', ';', '。'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The kind a clause asks for, `None` when it asks nothing (a statement of circumstance).
fn kind_of(clause: &str) -> Option<Asked> {
    if clause.chars().any(is_cjk) {
        kind_of_chinese(clause)
    } else {
        kind_of_english(&clause.to_lowercase())
    }
}

fn kind_of_chinese(c: &str) -> Option<Asked> {
    // "哪天到账" is as often "when" as "on which date": a quantity, below.
    const DATE: &[&str] = &["几号", "哪号", "几月", "哪个月", "星期几", "周几", "礼拜几"];
    if DATE.iter().any(|w| c.contains(w)) {
        return Some(Asked::Date);
    }
    const QUANTITY: &[&str] = &[
        "几",
        "多少",
        "多久",
        "多长",
        "多大",
        "多高",
        "多远",
        "什么时候",
        "何时",
        "哪天",
        "哪一天",
        "期限",
        "多快",
    ];
    const PERSON: &[&str] = &["谁", "哪个部门", "哪位", "找哪"];
    const PROCEDURE: &[&str] = &["怎么", "如何", "怎样", "流程", "步骤", "手续", "咋"];
    const YES_NO: &[&str] = &[
        "能不能",
        "可不可以",
        "是不是",
        "有没有",
        "行不行",
        "会不会",
        "要不要",
        "算不算",
        "用不用",
        "需不需要",
        "给不给",
        "报不报",
    ];
    if QUANTITY.iter().any(|w| c.contains(w)) {
        return Some(Asked::Quantity);
    }
    if PERSON.iter().any(|w| c.contains(w)) {
        return Some(Asked::Person);
    }
    // "怎么办" asks what to do; "怎么算" asks how a number comes out, a rule as well.
    if PROCEDURE.iter().any(|w| c.contains(w)) {
        return Some(Asked::Procedure);
    }
    let ends_as_question = c.ends_with('吗') || c.ends_with('么') || c.ends_with("吗呢");
    if YES_NO.iter().any(|w| c.contains(w)) || ends_as_question {
        return Some(Asked::YesNo);
    }
    if ["什么", "哪些", "哪个", "哪里", "哪儿", "为什么", "啥"]
        .iter()
        .any(|w| c.contains(w))
    {
        return Some(Asked::Open);
    }
    None
}

fn kind_of_english(c: &str) -> Option<Asked> {
    let words: Vec<&str> = c
        .split(|ch: char| !(ch.is_alphanumeric() || ch == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let first = words.first().copied().unwrap_or("");
    let has = |phrase: &str| {
        let p: Vec<&str> = phrase.split(' ').collect();
        words.windows(p.len()).any(|w| w == p.as_slice())
    };
    const DATE: &[&str] = &[
        "what date",
        "which date",
        "what month",
        "which month",
        "day of the month",
    ];
    if DATE.iter().any(|p| has(p)) {
        return Some(Asked::Date);
    }
    const QUANTITY: &[&str] = &[
        "how many",
        "how much",
        "how long",
        "how often",
        "how soon",
        "how quickly",
        "how far",
        "how old",
        "how big",
        "what time",
        "by when",
        "what percentage",
        "what's the most",
        "what is the most",
        "the most",
        "the maximum",
        "the minimum",
        "what's the limit",
        "what is the limit",
        "a limit",
        "how late",
        "how early",
        "what rate",
    ];
    if QUANTITY.iter().any(|p| has(p)) || first == "when" {
        return Some(Asked::Quantity);
    }
    if matches!(first, "who" | "whom") || has("which team") || has("which department") {
        return Some(Asked::Person);
    }
    const PROCEDURE: &[&str] = &[
        "how do",
        "how can",
        "how should",
        "how to",
        "how does",
        "what do i do",
        "what should i do",
        "what steps",
        "what do i need to do",
        "where do i",
        "where can i",
        "where should i",
    ];
    if PROCEDURE.iter().any(|p| has(p)) {
        return Some(Asked::Procedure);
    }
    const AUXILIARIES: &[&str] = &[
        "can", "could", "may", "might", "do", "does", "did", "is", "are", "am", "was", "were",
        "will", "would", "should", "shall", "must", "have", "has", "had", "isn't", "aren't",
        "don't", "doesn't", "can't",
    ];
    if AUXILIARIES.contains(&first) {
        return Some(Asked::YesNo);
    }
    if matches!(first, "what" | "what's" | "which" | "where" | "why" | "how") {
        return Some(Asked::Open);
    }
    None
}

/// Whether `sentence` states something of the kind asked (its subject is checked elsewhere).
pub(super) fn states(sentence: &str, kind: Asked) -> bool {
    let lower = sentence.to_lowercase();
    match kind {
        Asked::Open => true,
        Asked::Quantity => has_number(sentence),
        Asked::Date => has_date(sentence),
        Asked::YesNo => has_rule(&lower),
        Asked::Person => has_role(&lower),
        Asked::Procedure => has_step(&lower),
    }
}

/// A day or a month of the calendar: a number before 日, 号 or 月 that is no count of days
/// or months ("5日", "15号", "第5个工作日", "3月", not "5天" or "3个月"), a weekday, the start or
/// end of a month or year, or, in English, a month or weekday name or an ordinal day ("the
/// 15th").
fn has_date(s: &str) -> bool {
    const NUMERALS: &str = "0123456789０１２３４５６７８９一二三四五六七八九十廿";
    let chars: Vec<char> = s.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if !matches!(c, '日' | '号' | '月') {
            continue;
        }
        // "7日内", "30日以后": a count of days, written with 日.
        if matches!(chars.get(i + 1), Some('内' | '以' | '后' | '起')) {
            continue;
        }
        let mut before = &chars[..i];
        // "第5个工作日": a working day counted within the month; "5个工作日" alone is a count.
        let counted = *c == '日' && before.ends_with(&['个', '工', '作']);
        if counted {
            before = &before[..before.len() - 3];
        }
        let digits = before
            .iter()
            .rev()
            .take_while(|p| NUMERALS.contains(**p))
            .count();
        if digits > 0 && (!counted || before[..before.len() - digits].ends_with(&['第'])) {
            return true;
        }
    }
    const CHINESE: &[&str] = &[
        "月初", "月底", "月末", "月中", "年初", "年底", "年末", "当天",
    ];
    if CHINESE.iter().any(|w| s.contains(w)) {
        return true;
    }
    // A weekday: 周一, 星期五, 礼拜天 (not 一个星期, a week, nor 每周一次, once a week).
    let weekday = ["周", "星期", "礼拜"].iter().any(|w| {
        s.match_indices(w).any(|(at, _)| {
            let mut after = s[at + w.len()..].chars();
            after.next().is_some_and(|d| "一二三四五六日天".contains(d))
                && !after.next().is_some_and(|n| "次个遍".contains(n))
        })
    });
    if weekday {
        return true;
    }
    const WEEKDAYS: &[&str] = &[
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let lower = s.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    // "may" is far more often the verb.
    let month = |w: &str| w != "may" && crate::memory::learn::MONTHS.contains(&w);
    let ordinal = |w: &str| {
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && ["st", "nd", "rd", "th"].contains(&&w[digits.len()..])
    };
    words
        .iter()
        .any(|w| WEEKDAYS.contains(w) || month(w) || ordinal(w))
        || lower.contains("end of the month")
        || lower.contains("day of the month")
}

/// A digit that counts something (not a label: "Level 5", "第3条", "FIN-07"), or a Chinese
/// numeral followed by a unit ("十天", "两个工作日"), or an English number word.
fn has_number(s: &str) -> bool {
    if counting_digits(s) {
        return true;
    }
    const NUMERALS: &str = "一二两三四五六七八九十百千半";
    const UNITS: &str = "天日月年周个次倍岁元小时分钟工作";
    let chars: Vec<char> = s.chars().collect();
    if chars
        .windows(2)
        .any(|w| NUMERALS.contains(w[0]) && UNITS.contains(w[1]))
    {
        return true;
    }
    const WORDS: &[&str] = &[
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "twenty",
        "thirty",
        "hundred",
        "twice",
        "half",
        "once",
        "weekly",
        "monthly",
        "annually",
        "daily",
        "immediately",
    ];
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| WORDS.contains(&w))
}

/// Whether a run of digits in `s` is a quantity rather than the label of a thing: a number
/// right after a capitalised word ("Level 5", "Zone 1", "Article 12"), after 第 (an ordinal,
/// "第3条"), or inside a code ("FIN-07", "ISO27001") names a level, an article or a form; it
/// says how many or how much of nothing.
fn counting_digits(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == ',') {
            i += 1;
        }
        if !is_label(&chars[..start]) {
            return true;
        }
    }
    false
}

/// Whether the text just before a run of digits makes it a label (see [`counting_digits`]).
fn is_label(before: &[char]) -> bool {
    let Some(&last) = before.last() else {
        return false;
    };
    match last {
        // "第3", "ISO27001".
        '第' => return true,
        c if c.is_ascii_alphabetic() => return true,
        // "FIN-07": a hyphen after a letter or digit ("-5" alone is a number).
        '-' => {
            return before.len() > 1 && before[before.len() - 2].is_ascii_alphanumeric();
        }
        ' ' => {}
        _ => return false,
    }
    // "Level 5": the word before the space is capitalised, not all capitals (a currency,
    // "USD 280"), and not the sentence's first word ("Over 4 hours").
    let head = &before[..before.len() - 1];
    let word: Vec<char> = head
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .copied()
        .collect();
    let first_word = head.len() == word.len();
    !first_word
        && word.last().is_some_and(|c| c.is_ascii_uppercase())
        && word.iter().any(|c| c.is_ascii_lowercase())
}

/// A statement that allows, requires or rules something out.
fn has_rule(lower: &str) -> bool {
    const ZH: &[&str] = &[
        "可以",
        "不得",
        "不能",
        "须",
        "应当",
        "应",
        "不予",
        "不支持",
        "支持",
        "允许",
        "禁止",
        "无需",
        "不需",
        "不再",
        "不受",
        "计入",
        "视为",
        "享受",
        "只",
        "仅",
        "不可",
        "可",
        "按",
        "由",
        "不",
        "免费",
        "承担",
    ];
    const EN: &[&str] = &[
        "can",
        "cannot",
        "can't",
        "may",
        "must",
        "should",
        "not",
        "never",
        "only",
        "allowed",
        "permitted",
        "prohibited",
        "required",
        "requires",
        "need",
        "needs",
        "eligible",
        "acceptable",
        "accepted",
        "entitled",
        "free",
        "no",
        "is",
        "are",
        "pays",
        "covered",
    ];
    if lower.chars().any(is_cjk) {
        ZH.iter().any(|w| lower.contains(w))
    } else {
        lower
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .any(|w| EN.contains(&w))
    }
}

/// A person, role or team named as the one who acts.
fn has_role(lower: &str) -> bool {
    const ZH: &[&str] = &[
        "上级",
        "负责人",
        "经理",
        "部门",
        "人事",
        "服务台",
        "财务",
        "主管",
        "总监",
        "本人",
        "员工",
        "公司",
        "由",
        "客服",
        "团队",
        "领导",
        "审批",
    ];
    const EN: &[&str] = &[
        "manager",
        "head",
        "team",
        "department",
        "desk",
        "hr",
        "it",
        "finance",
        "director",
        "compliance",
        "officer",
        "employee",
        "company",
        "customer",
        "supervisor",
        "president",
        "staff",
        "approval",
        "approve",
        "approves",
        "by",
    ];
    holds_any(lower, ZH, EN)
}

/// An instruction: a step to take, a place to do it, or a form to fill in.
fn has_step(lower: &str) -> bool {
    const ZH: &[&str] = &[
        "申请", "提交", "填写", "上传", "点击", "联系", "报告", "登记", "办理", "拨打", "致电",
        "发送", "转发", "通过", "按", "在「", "选择", "寄", "解绑", "使用", "向", "处理",
    ];
    const EN: &[&str] = &[
        "submit",
        "complete",
        "fill",
        "upload",
        "click",
        "contact",
        "report",
        "call",
        "email",
        "forward",
        "request",
        "use",
        "apply",
        "file",
        "claim",
        "send",
        "order",
        "book",
        "follow",
        "ask",
        "register",
        "attach",
        "return",
        "disconnect",
        "through",
        "via",
        "in",
    ];
    holds_any(lower, ZH, EN)
}

/// Whether the lowercased sentence `lower` holds one of `zh` (a Chinese sentence, as written)
/// or one of the words `en` (an English one, word by word).
fn holds_any(lower: &str, zh: &[&str], en: &[&str]) -> bool {
    if lower.chars().any(is_cjk) {
        zh.iter().any(|w| lower.contains(w))
    } else {
        lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| en.contains(&w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(q: &str) -> Vec<Asked> {
        asked_parts(q).into_iter().map(|(_, k)| k).collect()
    }

    #[test]
    fn the_kind_asked_comes_from_the_question_words() {
        assert_eq!(kinds("我老婆生孩子，我能休几天假？"), [Asked::Quantity]);
        assert_eq!(kinds("耳机拆封了还能退吗？"), [Asked::YesNo]);
        assert_eq!(
            kinds("耳机拆封后有杂音，能退吗？寄回去的运费谁出？"),
            [Asked::YesNo, Asked::Person]
        );
        assert_eq!(kinds("纸质发票丢了怎么办？"), [Asked::Procedure]);
        assert_eq!(
            kinds("How many days of paternity leave do I get?"),
            [Asked::Quantity]
        );
        assert_eq!(
            kinds("Can I accept a gift card from a supplier?"),
            [Asked::YesNo]
        );
        assert_eq!(
            kinds("Who approves a fully remote arrangement?"),
            [Asked::Person]
        );
        assert_eq!(
            kinds("How do I report a phishing email?"),
            [Asked::Procedure]
        );
        // No interrogative at all: one open part.
        assert_eq!(kinds("paternity leave"), [Asked::Open]);
    }

    #[test]
    fn a_sentence_states_the_kind_asked_only_with_its_content() {
        assert!(states(
            "男员工的配偶生育的，享受陪产假10天。",
            Asked::Quantity
        ));
        assert!(!states("陪产假须在配偶产假期间休完。", Asked::Quantity));
        assert!(states(
            "Standard laptops are replaced every 4 years.",
            Asked::Quantity
        ));
        assert!(!states(
            "Leave the room as you found it: wipe the whiteboard.",
            Asked::Quantity
        ));
        // A number that labels a level, an article or a form counts nothing.
        assert!(!states(
            "The final award percentages for Level 5, Level 4 and Level 3 summary ratings will be determined later.",
            Asked::Quantity
        ));
        assert!(!states("依照本法第3条的规定执行。", Asked::Quantity));
        assert!(!states(
            "Fill in form FIN-07 and attach it.",
            Asked::Quantity
        ));
        assert!(states(
            "Zone 1 hotels are capped at USD 280 a night.",
            Asked::Quantity
        ));
        assert!(states(
            "The deposit is -5 percent of the fee.",
            Asked::Quantity
        ));
        assert!(states(
            "Annual leave: 5 days after 1 year.",
            Asked::Quantity
        ));
        assert!(states(
            "Cash and gift cards must never be accepted.",
            Asked::YesNo
        ));
        assert!(states("在「人事通」中提交申请。", Asked::Procedure));
    }

    #[test]
    fn a_question_for_a_day_of_the_calendar_is_stated_by_a_date_not_a_duration() {
        assert_eq!(kinds("工资每个月几号发？"), [Asked::Date]);
        assert_eq!(kinds("年终奖一般几月份发？"), [Asked::Date]);
        assert_eq!(kinds("On what date is salary paid?"), [Asked::Date]);
        // How long, how many months: a quantity still.
        assert_eq!(kinds("病假能休几个月？"), [Asked::Quantity]);
        assert_eq!(kinds("When can I claim it?"), [Asked::Quantity]);
        assert_eq!(kinds("报销款哪天到账？"), [Asked::Quantity]);
        for date in [
            "工资于每月15日发放。",
            "每月第5个工作日生成清单。",
            "年终奖在次年3月发放。",
            "Salaries are paid on the 25th of each month.",
            "Timesheets are due every Friday.",
            "报销款在月底统一支付。",
            "每周五下午提交周报。",
        ] {
            assert!(states(date, Asked::Date), "{date}");
        }
        for not_a_date in [
            "每个自然年度的前5天病假，按本人月工资的100%发放。",
            "须在签收之日起7日内申请。",
            "财务审核通过后5个工作日内转入工资卡。",
            "连续病假超过3个月的，按长期病假处理。",
            "Report it within 4 hours.",
            "演练每周一次，持续一个星期。",
        ] {
            assert!(!states(not_a_date, Asked::Date), "{not_a_date}");
        }
    }
}
