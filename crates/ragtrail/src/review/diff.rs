//! A word diff of two chunk texts, for people: `kept [-removed-]{+added+} kept`.
//!
//! Words are runs of letters and digits; each CJK character is a word of its own (Chinese has
//! no spaces, and a changed character should not mark a whole sentence), and so is each
//! punctuation mark. Whitespace is kept as written.

/// Longest common subsequence table above this many cells: the changed middle is shown as one
/// replacement instead (never slow, still exact about what was there and what is).
const MAX_CELLS: usize = 4_000_000;

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F | 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Space,
    Word,
    Single,
}

fn kind(c: char) -> Kind {
    if c.is_whitespace() {
        Kind::Space
    } else if is_cjk(c) || !c.is_alphanumeric() {
        Kind::Single
    } else {
        Kind::Word
    }
}

/// The text cut into words, spaces and single characters; concatenated they give it back.
fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut current: Option<Kind> = None;
    for (i, c) in s.char_indices() {
        let k = kind(c);
        if current.is_some_and(|p| p != k || k == Kind::Single) {
            out.push(&s[start..i]);
            start = i;
        }
        current = Some(k);
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Op {
    Same,
    Removed,
    Added,
}

/// `old` changed into `new`, word by word: removed words in `[-…-]`, added ones in `{+…+}`.
/// Identical texts give the text itself.
pub fn word_diff(old: &str, new: &str) -> String {
    let a = tokens(old);
    let b = tokens(new);
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (mid_a, mid_b) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<(Op, &str)> = a[..prefix].iter().map(|t| (Op::Same, *t)).collect();
    ops.extend(middle(mid_a, mid_b));
    ops.extend(a[a.len() - suffix..].iter().map(|t| (Op::Same, *t)));
    render(&ops)
}

/// The edit script of the changed middle: a longest common subsequence when small enough.
fn middle<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, &'a str)> {
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_CELLS || n == 0 || m == 0 {
        let mut ops: Vec<(Op, &str)> = a.iter().map(|t| (Op::Removed, *t)).collect();
        ops.extend(b.iter().map(|t| (Op::Added, *t)));
        return ops;
    }
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let width = m + 1;
    let mut lcs = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::with_capacity(n + m);
    while i < n && j < m {
        if a[i] == b[j] {
            ops.push((Op::Same, a[i]));
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * width + j] >= lcs[i * width + j + 1] {
            ops.push((Op::Removed, a[i]));
            i += 1;
        } else {
            ops.push((Op::Added, b[j]));
            j += 1;
        }
    }
    ops.extend(a[i..].iter().map(|t| (Op::Removed, *t)));
    ops.extend(b[j..].iter().map(|t| (Op::Added, *t)));
    ops
}

/// Runs of removed and added words between unchanged ones, removed first. A space alone
/// between two changes joins them, so `[-a b-]` reads as one change, not two.
fn render(ops: &[(Op, &str)]) -> String {
    let mut out = String::new();
    let mut removed = String::new();
    let mut added = String::new();
    let flush = |out: &mut String, removed: &mut String, added: &mut String| {
        if !removed.is_empty() {
            out.push_str(&format!("[-{removed}-]"));
            removed.clear();
        }
        if !added.is_empty() {
            out.push_str(&format!("{{+{added}+}}"));
            added.clear();
        }
    };
    for (k, &(op, text)) in ops.iter().enumerate() {
        match op {
            Op::Removed => removed.push_str(text),
            Op::Added => added.push_str(text),
            Op::Same => {
                let inside_change = (!removed.is_empty() || !added.is_empty())
                    && text.trim().is_empty()
                    && ops.get(k + 1).is_some_and(|(next, _)| *next != Op::Same);
                if inside_change {
                    removed.push_str(text);
                    added.push_str(text);
                } else {
                    flush(&mut out, &mut removed, &mut added);
                    out.push_str(text);
                }
            }
        }
    }
    flush(&mut out, &mut removed, &mut added);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_are_marked_removed_and_added() {
        assert_eq!(
            word_diff(
                "Employees earn 10 days of annual leave.",
                "Employees earn 12 days of annual leave."
            ),
            "Employees earn [-10-]{+12+} days of annual leave."
        );
        assert_eq!(word_diff("same text", "same text"), "same text");
        assert_eq!(word_diff("a b", "a b c"), "a b{+ c+}");
    }

    #[test]
    fn chinese_is_diffed_per_character() {
        assert_eq!(
            word_diff(
                "高铁票须提供铁路电子客票报销凭证，截图不予报销。",
                "高铁票须提供铁路电子客票报销凭证，截图可以报销。"
            ),
            "高铁票须提供铁路电子客票报销凭证，截图[-不予-]{+可以+}报销。"
        );
    }

    #[test]
    fn tokens_give_the_text_back() {
        let s = "住宿 600元, max  3 nights\n第二行";
        assert_eq!(tokens(s).concat(), s);
    }
}
