//! A list quoted whole enough to be read: policies and laws state many rules as a lead-in
//! ("职工有下列情形之一的，应当认定为工伤：", "do the following as quickly as possible:") and
//! the items under it. A lead-in alone says nothing, and an item alone ("(六)在上下班途中…")
//! loses what it is a case of, so each is quoted with the other: the lead-in with the item
//! that best matches the question, an item with its lead-in. Like a table row quoted under its
//! header row, the quote is several lines of the chunk, each verbatim.

use crate::agent::citations::MAX_QUOTE_CHARS;
use crate::text::char_len;

/// An item line longer than this is quoted by its first sentence only.
const MAX_ITEM_CHARS: usize = 220;

/// Whether `line` opens with a list marker: `(一)`, `（1）`, `一、`, `1.`, `1、`, `a)`, `-`,
/// `*`, `•`.
fn is_item(line: &str) -> bool {
    let s = line.trim_start();
    if let Some(rest) = s.strip_prefix(['-', '*', '•', '·']) {
        return rest.starts_with(' ');
    }
    let numeral = |c: char| c.is_ascii_digit() || "一二三四五六七八九十".contains(c);
    if let Some(rest) = s.strip_prefix(['(', '（']) {
        let inside: String = rest
            .chars()
            .take_while(|c| *c != ')' && *c != '）')
            .collect();
        let closed = rest[inside.len()..].starts_with([')', '）']);
        return closed
            && (1..=3).contains(&inside.chars().count())
            && (inside.chars().all(numeral) || inside.chars().all(|c| c.is_ascii_lowercase()));
    }
    let head: String = s.chars().take_while(|c| numeral(*c)).collect();
    let rest = &s[head.len()..];
    if !head.is_empty() && head.chars().count() <= 3 {
        // "1. Follow…", "1、", "一、"; not "3.5 days" or "2024年".
        return rest.starts_with('、')
            || rest.starts_with(". ")
            || rest.starts_with(") ")
            || (head.chars().all(|c| c.is_ascii_digit()) && rest.starts_with('）'));
    }
    false
}

/// Whether `sentence` introduces a list: it ends with a colon. A lead-in states nothing by
/// itself ("The following expenses require receipts:"): never an answer's sentence.
pub(super) fn is_lead_in(sentence: &str) -> bool {
    sentence.trim_end().ends_with([':', '：'])
}

/// The chunk's lines, trimmed; blank lines kept (they end an unmarked list).
fn lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).collect()
}

/// The items under the lead-in on line `at`, with their line numbers: the marked lines that
/// follow (blank lines between them allowed, a marked item's unmarked continuation skipped),
/// else the block of unmarked lines that follows (up to a blank line).
fn items_after<'t>(lines: &[&'t str], at: usize) -> Vec<(usize, &'t str)> {
    let mut next = (at + 1..lines.len()).skip_while(|&i| lines[i].is_empty());
    let Some(first) = next.next() else {
        return Vec::new();
    };
    if is_item(lines[first]) {
        let mut items = vec![(first, lines[first])];
        let mut blank = false;
        for (i, &line) in lines.iter().enumerate().skip(first + 1) {
            if line.is_empty() {
                blank = true;
            } else if is_item(line) {
                items.push((i, line));
                blank = false;
            } else if blank {
                // A paragraph after the list: the list has ended.
                break;
            }
        }
        return items;
    }
    // An unmarked list is the block of lines that follows, up to a blank line.
    (first..lines.len())
        .take_while(|&i| !lines[i].is_empty())
        .map(|i| (i, lines[i]))
        .collect()
}

/// The lead-in over the item on line `at`: the nearest line above that ends with a colon,
/// across marked items, their continuation lines and the blank lines between them; for an
/// unmarked line, within its block or right above it.
fn lead_in_above(lines: &[&str], at: usize) -> Option<usize> {
    let marked = is_item(lines[at]);
    let mut blank = false;
    for i in (0..at).rev() {
        let line = lines[i];
        if line.is_empty() {
            blank = true;
            continue;
        }
        if is_lead_in(line) {
            return Some(i);
        }
        let continues = if marked {
            // Another item, or an item's unmarked continuation line.
            is_item(line) || (i > 0 && is_item(lines[i - 1]))
        } else {
            !blank
        };
        if !continues {
            return None;
        }
        blank = false;
    }
    None
}

/// An item line as quoted: whole when short, else its first sentence.
fn item_quote(line: &str) -> &str {
    if char_len(line) <= MAX_ITEM_CHARS {
        return line;
    }
    super::sentences(line).into_iter().next().unwrap_or(line)
}

/// The whole sentence a clause ending in `；` belongs to, when it is short enough to quote:
/// "财务退单最常见的原因有：抬头或税号错误；" is the first of a run of clauses that say together
/// what the sentence says. `None` for any other sentence, or a whole one too long.
pub(super) fn whole_sentence<'t>(text: &'t str, clause: &str) -> Option<&'t str> {
    let clause = clause.trim();
    if !clause.ends_with('；') {
        return None;
    }
    let at = text.find(clause)?;
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let stops = ['。', '！', '？'];
    // Each stop is three bytes in UTF-8.
    let start = text[line_start..at]
        .rfind(stops)
        .map_or(line_start, |i| line_start + i + 3);
    let end = text[at..line_end]
        .find(stops)
        .map_or(line_end, |i| at + i + 3);
    let whole = text[start..end].trim();
    (whole != clause && char_len(whole) <= MAX_ITEM_CHARS).then_some(whole)
}

/// Whether `sentence`, quoted from `text`, is a lead-in with no list under it in the chunk:
/// a fragment that cannot be quoted.
pub(super) fn bare_lead_in(text: &str, sentence: &str) -> bool {
    if !is_lead_in(sentence) {
        return false;
    }
    let lines = lines(text);
    match lines.iter().position(|l| l.ends_with(sentence.trim())) {
        Some(at) => items_after(&lines, at).is_empty(),
        None => true,
    }
}

/// `sentence` of `text` quoted with its list: a lead-in with the item that adds most to its
/// `score` (else with the list's first items), an item with its lead-in, within the longest
/// quote a citation may have; `None` when the sentence belongs to no list.
/// A line with other lines of the chunk between it and the one before starts with `…`.
pub(super) fn with_list(text: &str, sentence: &str, score: &dyn Fn(&str) -> f64) -> Option<String> {
    let sentence = sentence.trim();
    let lines = lines(text);
    // Lines with only blank lines between them are next to each other.
    let joined = |upper: &str, from: usize, lower: &str, to: usize| {
        let adjacent = lines[from + 1..to].iter().all(|l| l.is_empty());
        let gap = if adjacent { "" } else { "…" };
        format!("{upper}\n{gap}{lower}")
    };
    if is_lead_in(sentence) {
        let at = lines.iter().position(|l| l.ends_with(sentence))?;
        let items = items_after(&lines, at);
        // Scored with the lead-in: the item that adds the question's words it lacks.
        let alone = score(sentence);
        let mut best: Option<(usize, &str, f64)> = None;
        for &(i, item) in &items {
            let s = score(&format!("{sentence}\n{item}"));
            if best.is_none_or(|(_, _, b)| s > b) {
                best = Some((i, item, s));
            }
        }
        let (i, item, s) = best?;
        if s > alone {
            return fits(joined(sentence, at, item_quote(item), i));
        }
        // No item adds the question's words: the list from its start, as much of it as a
        // quote holds, `…` after the last item shown when more follow.
        let mut quote = sentence.to_string();
        let (mut shown, mut previous) = (0, at);
        for &(i, item) in &items {
            let longer = joined(&quote, previous, item_quote(item), i);
            if char_len(&longer) >= MAX_QUOTE_CHARS {
                break;
            }
            (quote, shown, previous) = (longer, shown + 1, i);
        }
        if shown == 0 {
            return None;
        }
        if shown < items.len() {
            quote.push('…');
        }
        return Some(quote);
    }
    let at = lines.iter().position(|l| l.starts_with(sentence))?;
    let above = lead_in_above(&lines, at)?;
    // Only the lead-in's own sentence: the line may open with others ("第十四条 …" is one).
    let lead_in = super::sentences(lines[above])
        .into_iter()
        .last()
        .unwrap_or(lines[above]);
    fits(joined(lead_in, above, sentence, at))
}

/// A quote the citation check accepts ([`MAX_QUOTE_CHARS`]): else the sentence is quoted
/// alone.
fn fits(quote: String) -> Option<String> {
    (char_len(&quote) <= MAX_QUOTE_CHARS).then_some(quote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces chunk lines are made of: markers, lead-ins, clauses, blank lines.
    const PIECES: &[&str] = &[
        "(一)",
        "（2）",
        "1. ",
        "一、",
        "- ",
        "须提供下列材料：",
        "do the following:",
        "报销单",
        "；",
        "。",
        "Receipts are kept.",
        "\n",
        "\n\n",
        "：",
        "金额500元以上",
        "a) ",
        " ",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the chunk's shape, every quote made of a sentence of it is the chunk's own,
        /// line by line, and fits the citation check.
        #[test]
        fn every_list_quote_is_verbatim_and_fits(
            pieces in prop::collection::vec(0..PIECES.len(), 1..40),
            weighted in prop::collection::vec(0..PIECES.len(), 0..3),
        ) {
            let text: String = pieces.iter().map(|&i| PIECES[i]).collect();
            let words: Vec<&str> = weighted.iter().map(|&i| PIECES[i].trim()).collect();
            let score = |line: &str| words.iter().filter(|w| !w.is_empty() && line.contains(*w)).count() as f64;
            for sentence in super::super::sentences(&text) {
                let whole = whole_sentence(&text, sentence);
                if let Some(w) = whole {
                    prop_assert!(text.contains(w));
                    prop_assert!(w.contains(sentence.trim()));
                }
                let quoted = with_list(&text, whole.unwrap_or(sentence), &score);
                if let Some(q) = quoted {
                    prop_assert!(crate::text::quote_in_text(&q, &text), "{q:?} not in {text:?}");
                    prop_assert!(char_len(&q) <= MAX_QUOTE_CHARS);
                }
                let _ = bare_lead_in(&text, sentence);
            }
        }
    }

    const LAW: &str = "第十四条 职工有下列情形之一的，应当认定为工伤：\n\n\
        (一)在工作时间和工作场所内，因工作原因受到事故伤害的；\n\n\
        (六)在上下班途中，受到非本人主要责任的交通事故伤害的；\n\n\
        第十五条 职工有下列情形之一的，视同工伤：\n\n\
        (一)在工作时间和工作岗位，突发疾病死亡的；";

    const STEPS: &str = "For lost work laptops, phones, etc., do the following as quickly as possible:\n\n\
        1. Follow the GSA-wide steps.\n2. Inform your team.\nYour access may be removed.\n3. Inform IT.\n\n\
        If your equipment is returned to you, do not use it.";

    const PLAIN: &str = "The following expenses need no receipt, provided that each is under $75:\n\n\
        Airplane wifi\nLaundry expenses, if official travel is at least 4 nights\n\n\
        Everything else needs a receipt.";

    fn words(w: &'static [&'static str]) -> impl Fn(&str) -> f64 {
        move |line: &str| w.iter().filter(|x| line.contains(*x)).count() as f64
    }

    #[test]
    fn list_markers_are_told_from_numbers_that_open_a_sentence() {
        for item in [
            "(一)矿山井下作业；",
            "（12）其他",
            "一、总则：",
            "1. Follow",
            "2、报销",
            "- item",
            "(a) first",
            "3） 第三",
        ] {
            assert!(is_item(item), "{item}");
        }
        for not in [
            "3.5 days of leave",
            "2024年11月1日之前",
            "(注)见附件",
            "-5 degrees",
            "第一条 总则",
            "1.5倍工资",
        ] {
            assert!(!is_item(not), "{not}");
        }
    }

    #[test]
    fn a_lead_in_is_quoted_with_the_item_that_best_matches() {
        let quote = with_list(
            LAW,
            "第十四条 职工有下列情形之一的，应当认定为工伤：",
            &words(&["上下班"]),
        );
        assert_eq!(
            quote.as_deref(),
            Some(
                "第十四条 职工有下列情形之一的，应当认定为工伤：\n…(六)在上下班途中，受到非本人主要责任的交通事故伤害的；"
            )
        );
        // No item adds the question's words: the list from its start, as much as fits.
        let quote = with_list(
            STEPS,
            "For lost work laptops, phones, etc., do the following as quickly as possible:",
            &words(&[]),
        );
        assert_eq!(
            quote.as_deref(),
            Some(
                "For lost work laptops, phones, etc., do the following as quickly as possible:\n1. Follow the GSA-wide steps.\n2. Inform your team.\n…3. Inform IT."
            )
        );
        // A long list: its first items, and `…` for the rest.
        let long: String = std::iter::once("须提供下列材料：".to_string())
            .chain(
                (1..=12)
                    .map(|n| format!("{n}. 第{n}项材料的名称与份数，须加盖公章并由经办人签字确认")),
            )
            .collect::<Vec<_>>()
            .join("\n");
        let quote = with_list(&long, "须提供下列材料：", &words(&[])).unwrap_or_default();
        assert!(quote.starts_with("须提供下列材料：\n1. 第1项"), "{quote}");
        assert!(quote.ends_with('…') && !quote.contains("12. "), "{quote}");
        assert!(char_len(&quote) <= MAX_QUOTE_CHARS);
        assert!(crate::text::quote_in_text(&quote, &long));
        // An unmarked list: the lines of the lead-in's block.
        let quote = with_list(
            PLAIN,
            "The following expenses need no receipt, provided that each is under $75:",
            &words(&["Laundry"]),
        );
        assert_eq!(
            quote.as_deref(),
            Some(
                "The following expenses need no receipt, provided that each is under $75:\n…Laundry expenses, if official travel is at least 4 nights"
            )
        );
    }

    #[test]
    fn an_item_is_quoted_with_its_own_lead_in() {
        let quote = with_list(
            LAW,
            "(一)在工作时间和工作岗位，突发疾病死亡的；",
            &words(&[]),
        );
        assert_eq!(
            quote.as_deref(),
            Some(
                "第十五条 职工有下列情形之一的，视同工伤：\n(一)在工作时间和工作岗位，突发疾病死亡的；"
            )
        );
        let quote = with_list(STEPS, "3. Inform IT.", &words(&[]));
        assert_eq!(
            quote.as_deref(),
            Some(
                "For lost work laptops, phones, etc., do the following as quickly as possible:\n…3. Inform IT."
            )
        );
        let quote = with_list(PLAIN, "Airplane wifi", &words(&[]));
        assert_eq!(
            quote.as_deref(),
            Some(
                "The following expenses need no receipt, provided that each is under $75:\nAirplane wifi"
            )
        );
        // Every line of the quote is the chunk's own.
        assert!(crate::text::quote_in_text(
            quote.as_deref().unwrap_or_default(),
            PLAIN
        ));
    }

    #[test]
    fn a_clause_is_quoted_as_the_whole_sentence_it_belongs_to() {
        let text = "首段。财务退单最常见的原因有：抬头或税号错误；应开专票而开了普票；重复报销。其后一句。\n\
            (一)劳务报酬所得，属于一次性收入的，以取得该项收入为一次；属于连续性收入的，以一个月内取得的收入为一次。";
        assert_eq!(
            whole_sentence(text, "财务退单最常见的原因有：抬头或税号错误；"),
            Some("财务退单最常见的原因有：抬头或税号错误；应开专票而开了普票；重复报销。")
        );
        assert_eq!(
            whole_sentence(text, "应开专票而开了普票；"),
            Some("财务退单最常见的原因有：抬头或税号错误；应开专票而开了普票；重复报销。")
        );
        assert_eq!(
            whole_sentence(
                text,
                "(一)劳务报酬所得，属于一次性收入的，以取得该项收入为一次；"
            ),
            Some(
                "(一)劳务报酬所得，属于一次性收入的，以取得该项收入为一次；属于连续性收入的，以一个月内取得的收入为一次。"
            )
        );
        // A whole sentence, a clause that ends its line, a sentence too long to quote.
        assert_eq!(whole_sentence(text, "其后一句。"), None);
        assert_eq!(
            whole_sentence(
                LAW,
                "(一)在工作时间和工作场所内，因工作原因受到事故伤害的；"
            ),
            None
        );
        let long = format!("{}；{}。", "甲".repeat(150), "乙".repeat(150));
        assert_eq!(
            whole_sentence(&long, &format!("{}；", "甲".repeat(150))),
            None
        );
    }

    #[test]
    fn sentences_outside_a_list_and_lone_lead_ins() {
        assert_eq!(
            with_list(
                STEPS,
                "If your equipment is returned to you, do not use it.",
                &words(&[])
            ),
            None
        );
        assert_eq!(
            with_list(PLAIN, "Everything else needs a receipt.", &words(&[])),
            None
        );
        assert!(bare_lead_in("附录：\n\n", "附录："));
        // A list too long for a quote with its lead-in: the sentence is quoted alone.
        let wide = format!("须提供下列材料：\n(一){}", "材".repeat(MAX_QUOTE_CHARS));
        assert_eq!(with_list(&wide, "须提供下列材料：", &words(&["材"])), None);
        assert!(bare_lead_in("须提供以下材料：", "须提供以下材料："));
        assert!(!bare_lead_in(
            LAW,
            "第十四条 职工有下列情形之一的，应当认定为工伤："
        ));
        assert!(!bare_lead_in(
            LAW,
            "(一)在工作时间和工作场所内，因工作原因受到事故伤害的；"
        ));
    }
}
