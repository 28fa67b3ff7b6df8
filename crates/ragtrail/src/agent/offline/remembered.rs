//! The asker's remembered facts (`PlannerContext::memory`) in the offline planner.
//!
//! - A fact the question states itself, with the same value or another of its kind ("A类",
//!   another place name), is left out: the question wins for the run. A fact the question
//!   states of the asker with nothing remembered under its key ("我常驻成都，…") stands for
//!   the run the same way.
//! - The others are searched once, after the question's own round, by their values: the
//!   passages that name a value (the table row of a grade, the sentence listing a city under
//!   its category) come back beside the ones that answer.
//! - A fact bears on the question only through the documents: its value, or the label the
//!   documents put it under ("二类城市：…成都…" puts 成都 under 二类城市), names a row or a
//!   column of a table in a passage that answers the question. Then the answer is that row's
//!   cell, and says which facts chose it. A fact whose value or label no such table names is
//!   not used, whatever its key says. Nothing here knows a grade or a city.

use std::collections::HashSet;

use super::answer::{QuestionKeys, candidates};
use super::{OfflinePlanner, all_hits, analysed};
use crate::agent::{MemoryUse, PlannerAction, PlannerContext, ProposedCitation};
use crate::memory::{Fact, FactSource};
use crate::text::{self, Lang, char_len};

/// Values searched at most in the memory round.
const MAX_SEARCHED_FACTS: usize = 3;
/// A passage answers the question when it covers this share of the best passage's score.
const ANSWERING_SHARE: f64 = 0.6;
/// Longest label (the words before a colon a value is listed under), in characters.
const MAX_LABEL_CHARS: usize = 12;
/// Longest table header, in characters (a longer text before a colon is prose).
const MAX_HEADER_CHARS: usize = 40;
/// Longest sentence quoted to show where a value is listed.
const MAX_LINK_CHARS: usize = 220;

/// What the planner knows about the asker's facts in this run.
#[derive(Default)]
pub(super) struct Remembered {
    /// Facts the question does not state, in the memory's order, then the values the question
    /// states instead of remembered ones (flagged `true`: they stand for the run only).
    candidates: Vec<(Fact, bool)>,
    /// Keys of the facts the question states.
    stated: Vec<String>,
    /// Keys of the facts whose values were searched.
    searched: Vec<String>,
    /// The memory round was planned (once per run).
    search_planned: bool,
    /// The memory round was searched.
    search_ran: bool,
}

/// A place a fact's value is named: the label it stands under, and the sentence that puts
/// it there when the label is not the value itself.
struct Link {
    label: String,
    sentence: Option<(String, String)>,
}

/// One answer cell chosen by remembered facts.
struct Chosen {
    chunk: String,
    row: String,
    /// The row's cell a fact named ("二类城市", "B类").
    label: String,
    /// The column header and the cell under it; `None`: the whole row.
    cell: Option<(String, String)>,
    /// Each fact that chose the row or the column (`true`: stated in the question), with its
    /// link.
    used: Vec<(Fact, bool, Link)>,
}

impl Remembered {
    /// Sorts the asker's facts by what the question says.
    pub(super) fn read(question: &str, today: &str, memory: &[Fact]) -> Self {
        let mut r = Self::default();
        let mut instead = Vec::new();
        for fact in memory {
            match states(question, fact) {
                Stated::No => r.candidates.push((fact.clone(), false)),
                Stated::Same => r.stated.push(fact.key.clone()),
                Stated::Other(value) => {
                    r.stated.push(fact.key.clone());
                    let said = Fact {
                        value,
                        ..fact.clone()
                    };
                    instead.push((said, true));
                }
            }
        }
        // What the question says of the asker stands for the run even when nothing is
        // remembered under its key.
        for (key, value) in crate::memory::learn::facts_stated(question, today) {
            if memory.iter().any(|f| f.key.eq_ignore_ascii_case(&key)) {
                continue;
            }
            r.stated.push(key.clone());
            let said = Fact {
                key,
                value,
                // Not kept: it lives for this run only.
                source: FactSource::Said {
                    run_id: String::new(),
                },
                set_at: String::new(),
            };
            instead.push((said, true));
        }
        r.candidates.extend(instead);
        r
    }

    /// The facts' values were searched.
    pub(super) fn searched_any(&self) -> bool {
        self.search_ran
    }

    /// The account for the trace: what was searched, used and stated.
    pub(super) fn account(&self, used: Vec<String>) -> MemoryUse {
        MemoryUse {
            searched: self.searched.clone(),
            used,
            stated: self.stated.clone(),
        }
    }
}

impl OfflinePlanner {
    /// The memory round, once, after the question's own: the values (remembered, or stated by
    /// the question instead) the knowledge base mentions. `None` when there is nothing to
    /// search or it was searched.
    pub(super) fn memory_search(&mut self, ctx: &PlannerContext<'_>) -> Option<PlannerAction> {
        // A question whose subject no passage names is refused whatever the asker's facts.
        if self.remembered.search_planned || ctx.answer_only || !self.unknown_nouns.is_empty() {
            return None;
        }
        self.remembered.search_planned = true;
        let facts: Vec<(Fact, bool)> = (self.remembered.candidates.iter())
            .filter(|(f, _)| ctx.lookup.mentions(&f.value))
            .take(MAX_SEARCHED_FACTS)
            .cloned()
            .collect();
        if facts.is_empty() {
            return None;
        }
        // The values alone: the question's words would bring back the passages its own
        // round found, and crowd out the ones naming the values.
        let keywords: Vec<String> = facts.iter().map(|(f, _)| f.value.clone()).collect();
        self.remembered.search_ran = true;
        self.remembered.searched = (facts.iter())
            .filter(|(_, said)| !said)
            .map(|(f, _)| f.key.clone())
            .collect();
        // The reason is shown to the asker (`--rounds`): in the question's language.
        let lang = Lang::of(ctx.question);
        let named: Vec<String> = facts
            .iter()
            .map(|(f, said)| {
                let whose = match (lang, *said) {
                    (Lang::En, true) => "stated in the question",
                    (Lang::En, false) => "remembered",
                    (Lang::Zh, true) => "问题中所说",
                    (Lang::Zh, false) => "已记住的",
                };
                match lang {
                    Lang::En => format!("{} = {} ({whose})", f.key, f.value),
                    Lang::Zh => format!("{} = {}（{whose}）", f.key, f.value),
                }
            })
            .collect();
        Some(PlannerAction::Search {
            keywords,
            reason: match lang {
                Lang::En => format!(
                    "the asker's facts, to find the table rows they choose: {}",
                    named.join(", ")
                ),
                Lang::Zh => format!("提问者的信息，用来找出相应的表格行：{}", named.join("；")),
            },
            top_k: None,
            query: None,
            lexical: true,
        })
    }

    /// The answer remembered facts decide, with the keys of the facts used: a table row in
    /// a passage that answers the question, named by a fact's value or label, and the cell
    /// of the column the question asks for (or a fact names). `None` when no fact bears.
    pub(super) fn remembered_answer(
        &self,
        ctx: &PlannerContext<'_>,
    ) -> Option<(PlannerAction, Vec<String>)> {
        if self.remembered.candidates.is_empty() {
            return None;
        }
        let chosen = self.choose_cell(ctx)?;
        let lang = Lang::of(ctx.question);
        // Each fact as the reply names it: "常驻城市 成都（属二类城市）", "base city Singapore
        // (listed under Zone 1)"; what the question says is named by its value alone.
        let named = |said: bool| -> Vec<String> {
            (chosen.used.iter())
                .filter(|(_, s, _)| *s == said)
                .map(|(f, _, link)| {
                    let name = if said {
                        f.value.clone()
                    } else {
                        format!("{} {}", key_name(&f.key, lang), f.value)
                    };
                    if link.label.to_lowercase().contains(&f.value.to_lowercase()) {
                        name
                    } else {
                        match lang {
                            Lang::Zh => format!("{name}（属{}）", link.label),
                            Lang::En => format!("{name} (listed under {})", link.label),
                        }
                    }
                })
                .collect()
        };
        let (remembered, said) = (named(false), named(true));
        let mut basis = Vec::new();
        if !remembered.is_empty() {
            basis.push(match lang {
                Lang::Zh => format!("你记住的{}", remembered.join("、")),
                Lang::En => format!("what you told me ({})", remembered.join("; ")),
            });
        }
        if !said.is_empty() {
            basis.push(match lang {
                Lang::Zh => format!("问题中的{}", said.join("、")),
                Lang::En => format!("what the question says ({})", said.join("; ")),
            });
        }
        let sep = lang.pick(": ", "：");
        let stated = match &chosen.cell {
            Some((header, cell)) => {
                format!(
                    "{}{}{header}{sep}{cell}",
                    chosen.label,
                    lang.pick(", ", "，")
                )
            }
            None => chosen.row.clone(),
        };
        let mut text = match lang {
            Lang::Zh => format!("根据知识库，按{}：{stated} [1]", basis.join("、")),
            Lang::En => format!(
                "According to the knowledge base, going by {}: {stated} [1]",
                basis.join(" and ")
            ),
        };
        let mut citations = vec![ProposedCitation {
            chunk_id: chosen.chunk.clone(),
            quote: chosen.row.clone(),
        }];
        for (_, _, link) in &chosen.used {
            let Some((chunk, sentence)) = &link.sentence else {
                continue;
            };
            if citations.iter().any(|c| c.quote == *sentence) {
                continue;
            }
            citations.push(ProposedCitation {
                chunk_id: chunk.clone(),
                quote: sentence.clone(),
            });
            text.push_str(&format!("\n- {sentence} [{}]", citations.len()));
        }
        let used = (chosen.used.iter())
            .filter(|(_, said, _)| !said)
            .map(|(f, _, _)| f.key.clone())
            .collect();
        Some((PlannerAction::Answer { text, citations }, used))
    }

    /// The row and cell remembered facts choose, from the passages that answer the question.
    fn choose_cell(&self, ctx: &PlannerContext<'_>) -> Option<Chosen> {
        let keys = QuestionKeys::new(self.verdict_keys.clone());
        let ranked = candidates(ctx, &keys);
        let best = ranked.first()?.score;
        let links: Vec<(&Fact, bool, Vec<Link>)> = (self.remembered.candidates.iter())
            .map(|(f, said)| (f, *said, links_of(ctx, &f.value)))
            .collect();
        let names = |cell: &str| -> Option<usize> {
            links
                .iter()
                .position(|(_, _, ls)| ls.iter().any(|l| names_cell(&l.label, cell)))
        };
        for c in ranked
            .iter()
            .filter(|c| c.score > 0.0 && c.score >= ANSWERING_SHARE * best)
        {
            let Some(text) = ctx.lookup.returned_chunk_text(&c.hit.chunk_id) else {
                continue;
            };
            for line in text.lines().map(str::trim) {
                let Some(cells) = row_cells(line) else {
                    continue;
                };
                // A fact names the row: one of its cells is the fact's value or label.
                let Some((row_at, row_fact)) = cells
                    .iter()
                    .enumerate()
                    .find_map(|(i, (_, v))| Some((i, names(v)?)))
                else {
                    continue;
                };
                let mut used = vec![row_fact];
                // A fact names a column; else the column whose header holds the question's words.
                let by_fact = cells
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != row_at)
                    .find_map(|(i, (h, _))| Some((i, names(h)?)));
                let column = match by_fact {
                    Some((i, fact)) => {
                        if !used.contains(&fact) {
                            used.push(fact);
                        }
                        Some(i)
                    }
                    None => asked_column(&cells, row_at, &keys),
                };
                let cell = column.map(|i| (cells[i].0.to_string(), cells[i].1.to_string()));
                let used = used
                    .into_iter()
                    .map(|i| {
                        let (fact, said, ls) = &links[i];
                        let cells_here: Vec<&str> =
                            cells.iter().flat_map(|(h, v)| [*h, *v]).collect();
                        let link = ls
                            .iter()
                            .find(|l| cells_here.iter().any(|x| names_cell(&l.label, x)))
                            .map(|l| Link {
                                label: l.label.clone(),
                                sentence: l.sentence.clone(),
                            })
                            .unwrap_or(Link {
                                label: fact.value.clone(),
                                sentence: None,
                            });
                        ((*fact).clone(), *said, link)
                    })
                    .collect();
                return Some(Chosen {
                    chunk: c.hit.chunk_id.clone(),
                    row: line.to_string(),
                    // The named cell, or the value it lists ("Singapore" of a countries cell).
                    label: match names(cells[row_at].1).and_then(|i| {
                        links[i]
                            .2
                            .iter()
                            .find(|l| names_cell(&l.label, cells[row_at].1))
                    }) {
                        Some(l) => l.label.clone(),
                        None => cells[row_at].1.to_string(),
                    },
                    cell,
                    used,
                });
            }
        }
        None
    }
}

/// The column of a row the question asks for: the header holding the most of the question's
/// key-term weight (not the row's own label cell); `None` when no header holds any.
fn asked_column(cells: &[(&str, &str)], row_at: usize, keys: &QuestionKeys) -> Option<usize> {
    let weight = |header: &str| -> f64 {
        let lower = header.to_lowercase();
        let terms: HashSet<String> = analysed(header).into_iter().collect();
        keys.keys
            .iter()
            .filter(|k| lower.contains(&k.term) || terms.contains(&k.term))
            .map(|k| k.weight)
            .sum()
    };
    cells
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != row_at)
        .map(|(i, (h, _))| (i, weight(h)))
        .filter(|(_, w)| *w > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i)
}

/// Where the returned passages name `value`: the value itself; the table cell holding it
/// ("B类" for B); the label before a colon of a sentence listing it ("二类城市：…成都…"),
/// with that sentence.
fn links_of(ctx: &PlannerContext<'_>, value: &str) -> Vec<Link> {
    let mut links = vec![Link {
        label: value.to_string(),
        sentence: None,
    }];
    let mut seen: HashSet<String> = HashSet::from([value.to_lowercase()]);
    for (hit, _) in all_hits(ctx) {
        let Some(text) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            if !contains_token(line, value) {
                continue;
            }
            if let Some(cells) = row_cells(line) {
                for (_, cell) in cells {
                    let cell = cell.trim();
                    if contains_token(cell, value)
                        && char_len(cell) <= MAX_LABEL_CHARS
                        && seen.insert(cell.to_lowercase())
                    {
                        links.push(Link {
                            label: cell.to_string(),
                            sentence: None,
                        });
                    }
                }
                continue;
            }
            let Some((label, rest)) = split_label(line) else {
                continue;
            };
            if contains_token(rest, value)
                && !contains_token(label, value)
                && char_len(line) <= MAX_LINK_CHARS
                && seen.insert(label.to_lowercase())
            {
                links.push(Link {
                    label: label.to_string(),
                    sentence: Some((hit.chunk_id.clone(), line.to_string())),
                });
            }
        }
    }
    links
}

/// `label：rest` or `label: rest`, with a short label.
fn split_label(line: &str) -> Option<(&str, &str)> {
    let (label, rest) = line.split_once('：').or_else(|| line.split_once(": "))?;
    let label = label.trim();
    (!label.is_empty() && char_len(label) <= MAX_LABEL_CHARS && !rest.trim().is_empty())
        .then_some((label, rest))
}

/// A table row as the knowledge reader renders it (`Header：cell，Header：cell`, or
/// `Header: cell, Header: cell`): its (header, cell) pairs, at least two. A part without a
/// colon continues the cell before it (a cell listing "Japan, Singapore, Hong Kong").
fn row_cells(line: &str) -> Option<Vec<(&str, &str)>> {
    let (sep, colon) = if line.contains('：') {
        ("，", "：")
    } else {
        (", ", ": ")
    };
    let mut starts = vec![0];
    starts.extend(line.match_indices(sep).map(|(at, _)| at + sep.len()));
    // (header, value start, value end) as byte offsets into the line.
    let mut cells: Vec<(&str, usize, usize)> = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts
            .get(i + 1)
            .map_or(line.len(), |next| next - sep.len());
        let part = &line[start..end];
        match part.find(colon) {
            Some(at) if char_len(part[..at].trim()) <= MAX_HEADER_CHARS => {
                cells.push((part[..at].trim(), start + at + colon.len(), end));
            }
            _ => cells.last_mut()?.2 = end,
        }
    }
    let cells: Vec<(&str, &str)> = cells
        .into_iter()
        .map(|(h, from, to)| (h, line[from..to].trim()))
        .collect();
    (cells.len() >= 2 && cells.iter().all(|(h, v)| !h.is_empty() && !v.is_empty())).then_some(cells)
}

/// Whether a fact's label names a table cell: the cell is the label, or a list holding it
/// ("Japan, Singapore, Hong Kong" names Singapore).
fn names_cell(label: &str, cell: &str) -> bool {
    let cell = cell.trim();
    label.eq_ignore_ascii_case(cell)
        || (["、", ", ", "，"].iter().any(|s| cell.contains(s)) && contains_token(cell, label))
}

/// Whether `text` holds `value` as a whole: ASCII letters and digits at its edges must not
/// run on into the text's ("B" is in "B类", not in "BTW"); case is ignored.
pub(super) fn contains_token(text: &str, value: &str) -> bool {
    let (text, value) = (text.to_lowercase(), value.to_lowercase());
    if value.is_empty() {
        return false;
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let first_alnum = alnum(value.chars().next());
    let last_alnum = alnum(value.chars().last());
    text.match_indices(&value).any(|(at, _)| {
        let before = text[..at].chars().last();
        let after = text[at + value.len()..].chars().next();
        !((first_alnum && alnum(before)) || (last_alnum && alnum(after)))
    })
}

/// What the question says of a remembered fact.
enum Stated {
    /// Nothing: the memory decides.
    No,
    /// The same value.
    Same,
    /// Another value of its kind: this one, for the run.
    Other(String),
}

/// Whether the question states the fact for itself: its value, or another value of its kind
/// (a grade of the same shape, "A类" for "B类"; another place name for a place).
fn states(question: &str, fact: &Fact) -> Stated {
    let value = fact.value.trim();
    if contains_token(question, value) {
        return Stated::Same;
    }
    match other_code(question, value, &fact.key).or_else(|| other_place(question, value)) {
        Some(other) => Stated::Other(other),
        None => Stated::No,
    }
}

/// The shape of a short code: letters as `A`, digits as `9` ("P5" is "A9").
fn shape(code: &str) -> String {
    code.chars()
        .map(|c| match c {
            c if c.is_ascii_alphabetic() => 'A',
            c if c.is_ascii_digit() => '9',
            c => c,
        })
        .collect()
}

/// A code of the value's shape other than the value ("A类" against "B类", "P6" against
/// "P5"). A bare letter counts only when something marks it as one of its kind: a character
/// of another script right after it ("A类"), or the fact's key in the question ("grade A").
fn other_code(question: &str, value: &str, key: &str) -> Option<String> {
    let core: String = value
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    if core.is_empty() || core.len() > 3 {
        return None;
    }
    let suffix = &value[core.len()..];
    if char_len(suffix) > 2 {
        return None;
    }
    let chars: Vec<char> = question.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        if token.eq_ignore_ascii_case(&core) || shape(&token) != shape(&core) {
            continue;
        }
        let rest: String = chars[i..].iter().collect();
        let marked = if suffix.is_empty() {
            core.len() > 1
                || rest.chars().next().is_some_and(text::is_cjk)
                || question.to_lowercase().contains(&key.to_lowercase())
        } else {
            rest.starts_with(suffix)
        };
        if marked && token != "I" {
            return Some(format!("{token}{suffix}"));
        }
    }
    None
}

/// Another place name than the value, when the value is one: jieba's place tag for Chinese,
/// a capitalised name after "in", "to" or "at" for English.
fn other_place(question: &str, value: &str) -> Option<String> {
    if value.chars().all(text::is_cjk) {
        let is_place = |w: &str| {
            text::jieba()
                .tag(w, true)
                .iter()
                .any(|t| t.tag == "ns" && t.word == w)
        };
        if !is_place(value) {
            return None;
        }
        return text::jieba()
            .tag(question, true)
            .into_iter()
            .find(|t| t.tag == "ns" && t.word != value)
            .map(|t| t.word.to_string());
    }
    if !value.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        return None;
    }
    let words: Vec<&str> = question.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        let name = w[1].trim_matches(|c: char| !c.is_alphanumeric());
        (matches!(w[0].to_lowercase().as_str(), "in" | "to" | "at")
            && name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && !value.starts_with(name))
        .then(|| name.to_string())
    })
}

/// A fact's key as the reply names it in the question's language (the keys `--remember`
/// writes have Chinese names; any other key is shown as set).
fn key_name(key: &str, lang: Lang) -> String {
    const NAMES: &[(&str, &str)] = &[
        ("grade", "员工级别"),
        ("base city", "常驻城市"),
        ("start date", "入职日期"),
        ("work pattern", "工作方式"),
    ];
    match lang {
        Lang::Zh => NAMES
            .iter()
            .find(|(en, _)| en.eq_ignore_ascii_case(key))
            .map_or_else(|| key.to_string(), |(_, zh)| zh.to_string()),
        Lang::En => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::FactSource;

    fn fact(key: &str, value: &str) -> Fact {
        Fact {
            key: key.to_string(),
            value: value.to_string(),
            source: FactSource::Asker,
            set_at: "2026-12-05T00:00:00Z".to_string(),
        }
    }

    #[test]
    fn values_are_found_whole() {
        assert!(contains_token("类别：B类，适用人员：经理", "B"));
        assert!(contains_token("例如杭州、南京、成都、武汉", "成都"));
        assert!(!contains_token("BTW the ABC rule", "B"));
        assert!(contains_token("staff based in singapore", "Singapore"));
    }

    #[test]
    fn a_question_stating_a_fact_wins() {
        let grade = fact("grade", "B类");
        let bare = fact("grade", "B");
        let city = fact("base city", "成都");
        let other = |q: &str, f: &Fact| match states(q, f) {
            Stated::Other(v) => Some(v),
            _ => None,
        };
        let no = |q: &str, f: &Fact| matches!(states(q, f), Stated::No);
        assert!(matches!(
            states("我是B类员工，住宿标准多少", &grade),
            Stated::Same
        ));
        assert_eq!(other("A类员工住宿标准多少", &grade).as_deref(), Some("A类"));
        assert_eq!(other("A类员工住宿标准多少", &bare).as_deref(), Some("A"));
        assert_eq!(
            other("What is the hotel cap for grade A?", &bare).as_deref(),
            Some("A")
        );
        assert!(no("What is the hotel cap? I travel a lot", &bare));
        assert!(no("出差一天伙食补贴多少？", &grade));
        assert_eq!(
            other("去北京出差一天伙食补贴多少？", &city).as_deref(),
            Some("北京")
        );
        assert!(no("出差一天伙食补贴多少？", &city));
        let singapore = fact("base city", "Singapore");
        assert_eq!(
            other("What is the per diem in Tokyo?", &singapore).as_deref(),
            Some("Tokyo")
        );
        assert!(no("What is the per diem?", &singapore));
    }

    #[test]
    fn table_rows_are_read_as_the_reader_renders_them() {
        assert_eq!(
            row_cells("城市类别：二类城市，伙食补贴（每天）：100元，市内交通补贴（每天）：50元"),
            Some(vec![
                ("城市类别", "二类城市"),
                ("伙食补贴（每天）", "100元"),
                ("市内交通补贴（每天）", "50元")
            ])
        );
        assert_eq!(
            row_cells("二类城市：除一类城市以外的省会城市，以及苏州、东莞，例如成都。"),
            None
        );
        assert_eq!(
            row_cells("Grade: B, Hotel cap: 650"),
            Some(vec![("Grade", "B"), ("Hotel cap", "650")])
        );
        // A cell listing several values stays one cell, and names each of them.
        let row = "Zone: Zone 1, Countries and regions: Japan, Singapore, Hong Kong, Lodging cap per night (USD): 280";
        let cells = row_cells(row).expect("row");
        assert_eq!(
            cells,
            [
                ("Zone", "Zone 1"),
                ("Countries and regions", "Japan, Singapore, Hong Kong"),
                ("Lodging cap per night (USD)", "280")
            ]
        );
        assert!(names_cell("Singapore", cells[1].1));
        assert!(!names_cell("Singapore", "Singapore dollars"));
        assert!(names_cell("二类城市", "二类城市"));
    }
}
