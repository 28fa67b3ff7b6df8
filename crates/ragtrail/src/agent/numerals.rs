//! Figures in text: digits as written, Chinese numerals and English number words read as
//! digits, so a figure written one way is found where a passage writes it another.

/// The figures written in digits in `text` (`30`, `1.5`, `2,000`), each as written without
/// thousands separators.
pub fn figures(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let inside_number = !current.is_empty()
            && matches!(c, '.' | ',')
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        if c.is_ascii_digit() {
            current.push(c);
        } else if inside_number {
            if c == '.' {
                current.push('.');
            }
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The value of a Chinese numeral character, or of a unit (十, 百, 千, 万).
fn chinese_digit(c: char) -> Option<u64> {
    Some(match c {
        '零' | '〇' => 0,
        '一' => 1,
        '二' | '两' => 2,
        '三' => 3,
        '四' => 4,
        '五' => 5,
        '六' => 6,
        '七' => 7,
        '八' => 8,
        '九' => 9,
        _ => return None,
    })
}

fn chinese_unit(c: char) -> Option<u64> {
    Some(match c {
        '十' => 10,
        '百' => 100,
        '千' => 1000,
        '万' => 10_000,
        _ => return None,
    })
}

/// The value of a run of Chinese numerals: positional with units (三十七 = 37, 十二 = 12), or
/// digit by digit without them (一九九四 = 1994).
fn chinese_value(run: &[char]) -> u64 {
    if !run.iter().any(|&c| chinese_unit(c).is_some()) {
        return run
            .iter()
            .filter_map(|&c| chinese_digit(c))
            .fold(0, |v, d| v.saturating_mul(10).saturating_add(d));
    }
    let (mut total, mut section, mut digit) = (0u64, 0u64, None::<u64>);
    for &c in run {
        if let Some(d) = chinese_digit(c) {
            digit = Some(d);
        } else if let Some(u) = chinese_unit(c) {
            if u == 10_000 {
                total = total
                    .saturating_add(section.saturating_add(digit.unwrap_or(0)).saturating_mul(u));
                section = 0;
            } else {
                section = section.saturating_add(digit.unwrap_or(1).saturating_mul(u));
            }
            digit = None;
        }
    }
    total
        .saturating_add(section)
        .saturating_add(digit.unwrap_or(0))
}

/// The text with Chinese numerals written in digits (提前三十日 → 提前30日, 十二个月 → 12个月),
/// so a figure the model writes in digits is found where the passage writes it in characters.
/// A lone 一 stays: it is far more often part of a word (一般, 统一) than the number one.
pub fn arabic(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let numeral = |c: char| chinese_digit(c).is_some() || chinese_unit(c).is_some();
        if numeral(chars[i]) {
            let start = i;
            while i < chars.len() && numeral(chars[i]) {
                i += 1;
            }
            let run = &chars[start..i];
            if run == ['一'] || run.iter().all(|&c| chinese_unit(c).is_some() && c != '十') {
                out.extend(run);
            } else {
                out.push_str(&chinese_value(run).to_string());
            }
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// English number words, as a passage writes them.
const ENGLISH_NUMBERS: [(&str, u32); 28] = [
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];

/// The text with English number words written in digits (`four hours` → `4 hours`,
/// `twenty-four` → `24`), so a figure the model writes in digits is found where a passage
/// writes it in words. Only the passages' side is read this way: a word the model writes is
/// never turned into a figure it must support.
pub fn english_digits(text: &str) -> String {
    let value = |w: &str| {
        ENGLISH_NUMBERS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(w))
            .map(|(_, v)| *v)
    };
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let converted = match word.split_once('-') {
            Some((tens, unit)) => match (value(tens), value(unit)) {
                (Some(t), Some(u)) if t >= 20 && t % 10 == 0 && u < 10 => Some(t + u),
                _ => None,
            },
            None => value(word),
        };
        match converted {
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphabetic() || (c == '-' && !word.is_empty()) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_number_words_become_digits() {
        assert_eq!(
            english_digits("accrue four hours of sick leave; two weeks (80 hours)"),
            "accrue 4 hours of sick leave; 2 weeks (80 hours)"
        );
        assert_eq!(
            english_digits("Twenty-four hours, someone, often"),
            "24 hours, someone, often"
        );
        assert_eq!(english_digits("well-known one-off"), "well-known one-off");
    }

    #[test]
    fn chinese_numerals_become_digits() {
        assert_eq!(
            arabic("劳动者提前三十日以书面形式通知"),
            "劳动者提前30日以书面形式通知"
        );
        assert_eq!(arabic("第三十七条，十二个月，两年"), "第37条，12个月，2年");
        assert_eq!(arabic("一九九四年十二月六日"), "1994年12月6日");
        assert_eq!(arabic("一万五千元"), "15000元");
        assert_eq!(arabic("一般统一"), "一般统一");
        assert_eq!(arabic("满一年不足五年"), "满一年不足5年");
    }

    #[test]
    fn figures_are_read_as_written() {
        assert_eq!(
            figures("15 days, 2,000 yuan, 1.5x, 第3条"),
            ["15", "2000", "1.5", "3"]
        );
    }
}
