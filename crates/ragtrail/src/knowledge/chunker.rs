//! Heading-aware chunking. A chunk never spans two sections; a long section is split on paragraph
//! boundaries under a size cap; a table stays whole unless it alone exceeds the cap, in which case
//! it is split by rows. Chunk text, headings and titles are plain text (see [`super::plain`]):
//! every table row names its header cells, so a split table or a quoted row keeps its header.

use std::collections::HashMap;

use super::plain::{describe_row, heading_id, inline_to_plain, markdown_to_plain};
use super::{Chunk, Document, TITLE_SEPARATOR, chunk_id, sha256_hex};
use crate::text::{SentenceEnds, StopThen, char_len, sentence_spans_with};

/// Size limits, in characters.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimits {
    /// A chunk grows paragraph by paragraph up to this many characters.
    pub max_chars: usize,
}

impl Default for ChunkLimits {
    fn default() -> Self {
        Self { max_chars: 900 }
    }
}

/// One section of a document, as every reader gives it: the heading path, where it points, and
/// its blocks as plain text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Section {
    /// The heading path the chunk id is computed from: the Markdown as written (so ids stay
    /// those of the file), the plain headings elsewhere, plus a place mark where headings do
    /// not tell places apart (a PDF page).
    pub id_headings: Vec<String>,
    /// The heading path as plain text: what titlePaths and anchors show.
    pub headings: Vec<String>,
    /// The `sourceUri` fragment when it is not the last heading's slug (`page=3`).
    pub anchor: Option<String>,
    pub blocks: Vec<Block>,
}

/// Splits a document body into chunks. `markdown` false treats the text as plain paragraphs
/// (a `#` at the start of a line in a .txt file is not a heading).
pub fn chunk_document(
    doc: &Document,
    body: &str,
    markdown: bool,
    limits: ChunkLimits,
) -> Vec<Chunk> {
    chunk_sections(doc, markdown_sections(body, &doc.title, markdown), limits)
}

/// The sections of a Markdown (or plain-text) body, with their blocks rendered to plain text.
pub(super) fn markdown_sections(body: &str, title: &str, markdown: bool) -> Vec<Section> {
    let sections = if markdown {
        split_sections(body, title)
    } else {
        vec![LineSection {
            source_headings: Vec::new(),
            headings: Vec::new(),
            anchor: None,
            lines: body.lines().collect(),
        }]
    };
    sections
        .into_iter()
        .map(|s| Section {
            blocks: blocks(&s.lines, markdown),
            id_headings: s.source_headings,
            headings: s.headings,
            anchor: s.anchor,
        })
        .collect()
}

/// Turns the sections of any reader into chunks: packs each section's blocks under the size cap
/// and names every chunk's place, titlePath and `sourceUri`.
pub(super) fn chunk_sections(
    doc: &Document,
    sections: Vec<Section>,
    limits: ChunkLimits,
) -> Vec<Chunk> {
    let mut anchors: HashMap<String, usize> = HashMap::new();
    let mut chunks = Vec::new();
    for section in sections {
        let texts = pack(&section.blocks, limits.max_chars.max(50));
        if texts.is_empty() {
            continue;
        }
        let anchor = section.anchor.clone().or_else(|| {
            section.headings.last().map(|h| {
                let base = slug(h);
                let seen = anchors.entry(base.clone()).or_insert(0);
                let anchor = if *seen == 0 {
                    base.clone()
                } else {
                    format!("{base}-{seen}")
                };
                *seen += 1;
                anchor
            })
        });
        let source_uri = match &anchor {
            Some(a) => format!("{}#{}", doc.source, a),
            None => doc.source.clone(),
        };
        let title_path = std::iter::once(doc.title.as_str())
            .chain(section.headings.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(TITLE_SEPARATOR);
        for (ordinal, text) in texts.into_iter().enumerate() {
            let ordinal = ordinal as u32;
            chunks.push(Chunk {
                id: chunk_id(&doc.source, &section.id_headings, ordinal),
                source: doc.source.clone(),
                title_path: title_path.clone(),
                headings: section.headings.clone(),
                source_uri: source_uri.clone(),
                ordinal,
                content_hash: sha256_hex(text.as_bytes()),
                text,
                tenant: doc.tenant.clone(),
                roles: doc.roles.clone(),
                version: doc.version.clone(),
                updated: doc.updated.clone(),
                status: doc.status,
            });
        }
    }
    chunks
}

/// A Markdown section before its lines are grouped into blocks.
struct LineSection<'a> {
    source_headings: Vec<String>,
    headings: Vec<String>,
    /// The anchor the section's heading names for itself (`## Set up {#set-up-phase}`).
    anchor: Option<String>,
    lines: Vec<&'a str>,
}

/// The first `# Heading` of a Markdown body, if any: the title of a file without front matter.
pub(super) fn first_h1(body: &str) -> Option<String> {
    let mut fence = None;
    for line in body.lines() {
        if toggle_fence(line, &mut fence) {
            continue;
        }
        if fence.is_none()
            && let Some((1, text)) = heading(line)
        {
            return Some(text);
        }
    }
    None
}

fn split_sections<'a>(body: &'a str, title: &str) -> Vec<LineSection<'a>> {
    let mut sections = vec![LineSection {
        source_headings: Vec::new(),
        headings: Vec::new(),
        anchor: None,
        lines: Vec::new(),
    }];
    // (level, heading as written, heading as plain text)
    let mut stack: Vec<(usize, String, String)> = Vec::new();
    let mut fence = None;
    for line in body.lines() {
        let in_fence_before = fence.is_some();
        let is_fence_line = toggle_fence(line, &mut fence);
        if !in_fence_before
            && !is_fence_line
            && let Some((level, text)) = heading(line)
        {
            stack.retain(|(l, _, _)| *l < level);
            let plain = inline_to_plain(&text);
            // A top-level heading that repeats the title is the title, not a section name.
            let named = !(level == 1 && plain == title);
            let anchor = heading_id(&text).filter(|_| named).map(str::to_string);
            if named {
                stack.push((level, text, plain));
            }
            sections.push(LineSection {
                source_headings: stack.iter().map(|(_, t, _)| t.clone()).collect(),
                headings: stack.iter().map(|(_, _, p)| p.clone()).collect(),
                anchor,
                lines: Vec::new(),
            });
            continue;
        }
        if let Some(section) = sections.last_mut() {
            section.lines.push(line);
        }
    }
    sections
}

/// Tracks ``` and ~~~ fences; returns whether `line` is a fence line.
fn toggle_fence(line: &str, fence: &mut Option<&'static str>) -> bool {
    let t = line.trim_start();
    for marker in ["```", "~~~"] {
        if t.starts_with(marker) {
            match fence {
                Some(open) if *open == marker => *fence = None,
                Some(_) => return false,
                None => *fence = Some(marker),
            }
            return true;
        }
    }
    false
}

/// `## Heading ##` → (2, "Heading").
fn heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None; // indented code, not a heading
    }
    let level = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim().to_string();
    if text.is_empty() {
        None
    } else {
        Some((level, text))
    }
}

/// GitHub-style anchor: lowercase, spaces to `-`, punctuation dropped, letters of any script kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' | '\t' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// A block of a section, as plain text: the one idea of a block every reader shares.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A paragraph (a list is one, one line per item).
    Paragraph(String),
    /// A table, one self-describing line per row (`Header: value, Header: value`): packed
    /// whole, split by rows only when it alone exceeds the cap.
    Table(Vec<String>),
}

impl Block {
    fn text(&self) -> String {
        match self {
            Block::Paragraph(p) => p.clone(),
            Block::Table(rows) => rows.join("\n"),
        }
    }

    /// A list: one line per non-empty item.
    pub fn list(items: &[String]) -> Option<Block> {
        let lines: Vec<&str> = items
            .iter()
            .map(|i| i.trim())
            .filter(|i| !i.is_empty())
            .collect();
        (!lines.is_empty()).then(|| Block::Paragraph(lines.join("\n")))
    }

    /// A table from its header row and body rows, each row naming its header cells as a
    /// Markdown table's rows do; a table with a header only is a line of text.
    pub fn table(header: &[String], rows: &[Vec<String>]) -> Option<Block> {
        let lines: Vec<String> = rows
            .iter()
            .map(|r| describe_row(header, r))
            .filter(|r| !r.is_empty())
            .collect();
        if lines.is_empty() {
            let head = header.join(" ");
            return (!head.trim().is_empty()).then(|| Block::Paragraph(head.trim().to_string()));
        }
        Some(Block::Table(lines))
    }
}

fn is_table_line(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// A section's blocks as plain text: Markdown blocks are rendered (a table to one line per row),
/// and a block left with no text (a lone template tag, an HTML comment) is dropped. Plain-text
/// files are taken as written.
fn blocks(lines: &[&str], markdown: bool) -> Vec<Block> {
    let raw = source_blocks(lines);
    if !markdown {
        return raw;
    }
    raw.into_iter()
        .filter_map(|block| match block {
            Block::Paragraph(p) => {
                Some(Block::Paragraph(markdown_to_plain(&p))).filter(|b| !b.text().is_empty())
            }
            Block::Table(rows) => {
                let rows: Vec<String> = markdown_to_plain(&rows.join("\n"))
                    .lines()
                    .map(str::to_string)
                    .collect();
                Some(Block::Table(rows)).filter(|b| !b.text().is_empty())
            }
        })
        .collect()
}

/// Groups a section's lines into paragraphs, tables and fenced blocks (kept as one paragraph).
fn source_blocks(lines: &[&str]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        let mut fence = None;
        if toggle_fence(line, &mut fence) {
            let start = i;
            i += 1;
            while i < lines.len() && !toggle_fence(lines[i], &mut fence) {
                i += 1;
            }
            i = (i + 1).min(lines.len());
            out.push(Block::Paragraph(
                lines[start..i].join("\n").trim_end().to_string(),
            ));
        } else if is_table_line(line) {
            let start = i;
            while i < lines.len() && is_table_line(lines[i]) {
                i += 1;
            }
            out.push(Block::Table(
                lines[start..i]
                    .iter()
                    .map(|l| l.trim().to_string())
                    .collect(),
            ));
        } else {
            let start = i;
            while i < lines.len()
                && !lines[i].trim().is_empty()
                && !is_table_line(lines[i])
                && !toggle_fence(lines[i], &mut None)
            {
                i += 1;
            }
            out.push(Block::Paragraph(
                lines[start..i].join("\n").trim().to_string(),
            ));
        }
    }
    out
}

/// Packs blocks into chunk texts of at most `max` characters (a single oversized block is split).
fn pack(blocks: &[Block], max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    for block in blocks {
        let text = block.text();
        if char_len(&text) <= max {
            pieces.push(text);
            continue;
        }
        match block {
            Block::Table(rows) => pieces.extend(split_table(rows, max)),
            Block::Paragraph(p) => pieces.extend(split_paragraph(p, max)),
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for piece in pieces {
        if !current.is_empty() && char_len(&current) + 2 + char_len(&piece) > max {
            out.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        current.push_str(&piece);
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// Splits a table by rows (each row names its header cells, so no part loses the header); a row
/// longer than `max` is split like a paragraph.
fn split_table(rows: &[String], max: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for row in rows {
        if char_len(row) > max {
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            parts.extend(split_paragraph(row, max));
            continue;
        }
        if !current.is_empty() && char_len(&current) + 1 + char_len(row) > max {
            parts.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(row);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Where a long paragraph is cut, not the snippet's sentence ends: an ASCII `;` ends no
/// sentence, a Latin stop ends one only before a plain space, and whitespace-only pieces are
/// kept, since the pieces are joined again byte for byte. Chunk ids and content hashes follow
/// these cuts, so they stay as they were.
const PARAGRAPH_SENTENCE_ENDS: SentenceEnds = SentenceEnds {
    semicolon: false,
    stop_then: StopThen::Space,
    keep_blank: true,
    lowercase_continues: false,
};

/// Splits a long paragraph at sentence ends, and a sentence longer than `max` at `max` characters.
fn split_paragraph(p: &str, max: usize) -> Vec<String> {
    let sentences = sentence_spans_with(p, PARAGRAPH_SENTENCE_ENDS)
        .into_iter()
        .map(|(start, end)| &p[start..end]);
    let mut out = Vec::new();
    let mut current = String::new();
    for sentence in sentences {
        let mut sentence = sentence;
        while char_len(sentence) > max {
            let head = crate::text::truncate_chars(sentence, max);
            if !current.trim().is_empty() {
                out.push(std::mem::take(&mut current).trim().to_string());
            }
            out.push(head.trim().to_string());
            sentence = &sentence[head.len()..];
        }
        if char_len(&current) + char_len(sentence) > max && !current.trim().is_empty() {
            out.push(std::mem::take(&mut current).trim().to_string());
        }
        current.push_str(sentence);
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::DocStatus;

    fn doc(source: &str, title: &str) -> Document {
        Document {
            source: source.into(),
            title: title.into(),
            tenant: "default".into(),
            roles: vec![],
            version: None,
            updated: None,
            status: DocStatus::Active,
            content_hash: String::new(),
        }
    }

    #[test]
    fn title_paths_follow_headings_in_both_languages() {
        let body = "开头说明。\n\n## 交通费\n\n### 火车票\n\n高铁票须提供报销凭证。\n\n## Hotels\n\nKeep the invoice.\n";
        let chunks = chunk_document(
            &doc("finance/travel.md", "差旅制度"),
            body,
            true,
            ChunkLimits::default(),
        );
        let paths: Vec<_> = chunks.iter().map(|c| c.title_path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "差旅制度",
                "差旅制度 / 交通费 / 火车票",
                "差旅制度 / Hotels"
            ]
        );
        assert_eq!(chunks[0].source_uri, "finance/travel.md");
        assert_eq!(chunks[1].source_uri, "finance/travel.md#火车票");
        assert_eq!(chunks[2].source_uri, "finance/travel.md#hotels");
        assert_eq!(chunks[1].text, "高铁票须提供报销凭证。");
    }

    #[test]
    fn h1_repeating_the_title_is_not_a_section() {
        let body = "# Policy\n\nIntro.\n\n## Scope\n\nAll staff.\n";
        let chunks = chunk_document(&doc("p.md", "Policy"), body, true, ChunkLimits::default());
        assert_eq!(chunks[0].title_path, "Policy");
        assert_eq!(chunks[1].title_path, "Policy / Scope");
    }

    #[test]
    fn headings_inside_code_fences_are_text() {
        let body = "## A\n\n```\n## not a heading\n```\n";
        let chunks = chunk_document(&doc("p.md", "T"), body, true, ChunkLimits::default());
        assert_eq!(chunks.len(), 1);
        assert!(chunks[0].text.contains("## not a heading"));
    }

    #[test]
    fn long_sections_split_on_paragraphs_and_never_span_sections() {
        let para = "这是一段很长的说明文字。".repeat(10); // 120 chars
        let body = format!("## 一\n\n{para}\n\n{para}\n\n{para}\n\n## 二\n\n短。\n");
        let chunks = chunk_document(
            &doc("p.md", "T"),
            &body,
            true,
            ChunkLimits { max_chars: 260 },
        );
        let first: Vec<_> = chunks.iter().filter(|c| c.title_path == "T / 一").collect();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].text, format!("{para}\n\n{para}"));
        assert_eq!(first[1].text, para);
        assert_eq!((first[0].ordinal, first[1].ordinal), (0, 1));
        assert_eq!(chunks.last().map(|c| c.text.as_str()), Some("短。"));
    }

    #[test]
    fn tables_stay_whole_and_oversized_tables_split_by_rows_that_name_their_header() {
        let mut table = String::from("| 城市 | 标准 |\n| --- | --- |\n");
        let mut rows = Vec::new();
        for i in 0..40 {
            table.push_str(&format!("| 城市{i} | **{i}00元** |\n"));
            rows.push(format!("城市：城市{i}，标准：{i}00元"));
        }
        let body = format!("## 标准\n\n{table}");
        let whole = chunk_document(
            &doc("p.md", "T"),
            &body,
            true,
            ChunkLimits { max_chars: 5000 },
        );
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].text, rows.join("\n"));
        let split = chunk_document(
            &doc("p.md", "T"),
            &body,
            true,
            ChunkLimits { max_chars: 200 },
        );
        assert!(split.len() > 2);
        for c in &split {
            assert!(
                c.text
                    .lines()
                    .all(|l| l.starts_with("城市：城市") && l.contains("，标准：")),
                "{}",
                c.text
            );
            assert!(char_len(&c.text) <= 200);
        }
        let split_rows: Vec<&str> = split.iter().flat_map(|c| c.text.lines()).collect();
        assert_eq!(split_rows, rows);
    }

    #[test]
    fn chunk_text_and_title_paths_are_plain_text_and_ids_follow_the_source_headings() {
        let body = "## **Resources**\n\n- [OPM page]({% page \"/opm\" %}) and \
                    <a href=\"https://x.gov\">the form</a>\n\n{% alert %}\n";
        let chunks = chunk_document(&doc("p.md", "T"), body, true, ChunkLimits::default());
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].title_path, "T / Resources");
        assert_eq!(chunks[0].headings, vec!["Resources".to_string()]);
        assert_eq!(chunks[0].source_uri, "p.md#resources");
        assert_eq!(chunks[0].text, "OPM page and the form");
        assert_eq!(
            chunks[0].id,
            chunk_id("p.md", &["**Resources**".to_string()], 0)
        );
        assert_eq!(chunks[0].content_hash, sha256_hex(b"OPM page and the form"));
    }

    #[test]
    fn oversized_sentence_is_cut_at_the_cap() {
        let body = format!("## A\n\n{}\n", "字".repeat(130));
        let chunks = chunk_document(
            &doc("p.md", "T"),
            &body,
            true,
            ChunkLimits { max_chars: 50 },
        );
        assert!(chunks.iter().all(|c| char_len(&c.text) <= 50));
        assert_eq!(chunks.iter().map(|c| char_len(&c.text)).sum::<usize>(), 130);
    }

    #[test]
    fn a_heading_that_names_its_anchor_is_linked_there_and_shown_without_it() {
        let body = "## Set up {#set-up-phase}\n\na\n\n### Goals\n\nb\n";
        let chunks = chunk_document(&doc("p.md", "T"), body, true, ChunkLimits::default());
        assert_eq!(chunks[0].title_path, "T / Set up");
        assert_eq!(chunks[0].source_uri, "p.md#set-up-phase");
        // A sub-section names no anchor of its own: its heading's slug.
        assert_eq!(chunks[1].title_path, "T / Set up / Goals");
        assert_eq!(chunks[1].source_uri, "p.md#goals");
    }

    #[test]
    fn duplicate_headings_get_distinct_anchors() {
        let body = "## 说明\n\na\n\n## 其他\n\n### 说明\n\nb\n";
        let chunks = chunk_document(&doc("p.md", "T"), body, true, ChunkLimits::default());
        assert_eq!(chunks[0].source_uri, "p.md#说明");
        assert_eq!(chunks[1].source_uri, "p.md#说明-1");
    }

    #[test]
    fn editing_a_paragraph_keeps_ids_and_inserting_one_only_renames_its_section() {
        let limits = ChunkLimits { max_chars: 60 };
        let p = |s: &str| s.repeat(5);
        let before = format!(
            "## A\n\n{}\n\n{}\n\n## B\n\n{}\n",
            p("甲甲甲甲甲甲甲甲。"),
            p("乙乙乙乙乙乙乙乙。"),
            p("丙丙丙丙丙丙丙丙。")
        );
        let edited = before.replace("乙乙乙乙乙乙乙乙。", "乙乙乙乙乙乙乙丁。");
        let inserted = before.replace(
            "## A\n\n",
            &format!("## A\n\n{}\n\n", p("新新新新新新新新。")),
        );
        let d = doc("p.md", "T");
        let a = chunk_document(&d, &before, true, limits);
        let b = chunk_document(&d, &edited, true, limits);
        let c = chunk_document(&d, &inserted, true, limits);
        let ids = |v: &[Chunk]| v.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b));
        assert_ne!(a[1].content_hash, b[1].content_hash);
        assert_eq!(a[0].content_hash, b[0].content_hash);
        let b_section_a: Vec<_> = a.iter().filter(|x| x.title_path == "T / B").collect();
        let b_section_c: Vec<_> = c.iter().filter(|x| x.title_path == "T / B").collect();
        assert_eq!(b_section_a, b_section_c);
    }

    #[test]
    fn plain_text_has_no_headings() {
        let chunks = chunk_document(
            &doc("n.txt", "n"),
            "# not heading\n\npara\n",
            false,
            ChunkLimits::default(),
        );
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].title_path, "n");
    }

    #[test]
    fn long_paragraphs_are_cut_after_a_stop_and_a_space_keeping_every_byte() {
        // The newline after 。 is a piece of its own and counts towards the cap: without it the
        // two sentences (8 characters) would be glued into one piece.
        assert_eq!(
            split_paragraph("一二三。\n四五六。", 8),
            ["一二三。", "四五六。"]
        );
        // `;` and a stop before a tab cut nothing; a stop before a space does.
        assert_eq!(
            split_paragraph("Do this; then that.\tAnd more. Last one.", 30),
            ["Do this; then that.\tAnd more.", "Last one."]
        );
    }
}
