//! PDF through `lopdf` (pure Rust, maintained): text page by page in content-stream order (the
//! order PDF writers lay text out in), each page its own section so every chunk points at
//! `file.pdf#page=N`. Where the PDF has an outline (bookmarks) its entries name the sections:
//! an entry's title found as a line of its page starts the section there, one not found starts
//! it at its page's top. Without an outline, headings come from how the text is set (a line in
//! a larger or bolder font than the body's; see [`font_heading_items`]). A PDF whose pages
//! carry no text (a scan) is reported, never ingested empty; an encrypted or broken one is
//! refused with the reason. lopdf is guarded against panics on malformed files, which become
//! "broken PDF" too.

use std::panic::{AssertUnwindSafe, catch_unwind};

use std::collections::HashMap;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, Encoding, LoadOptions, Object, ObjectId};

use super::{ReadDocument, ReadError, Reader, collapse};
use crate::knowledge::FrontMatter;
use crate::knowledge::chunker::{Block, Section};
use crate::text::is_cjk;

pub(super) struct PdfReader;

/// An outline entry: nesting level (1 = top), title, 1-based page.
struct Entry {
    level: usize,
    title: String,
    page: u32,
}

impl Reader for PdfReader {
    fn read(&self, _source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError> {
        read_pdf(bytes, &mut |_, _| {})
    }
}

/// Reads a PDF, calling `on_page(done, total)` after each page (a long file shows progress).
/// Memory: the file's bytes plus lopdf's objects without font programs and images (dropped as
/// they load, see [`drop_fonts_and_images`]), plus one page's decoded content at a time.
pub(super) fn read_pdf(
    bytes: &[u8],
    on_page: &mut dyn FnMut(usize, usize),
) -> Result<ReadDocument, ReadError> {
    if !bytes.starts_with(b"%PDF")
        && !bytes[..bytes.len().min(1024)]
            .windows(4)
            .any(|w| w == b"%PDF")
    {
        return Err(unreadable("not a PDF (no %PDF header)".into()));
    }
    let options = LoadOptions {
        filter: Some(drop_fonts_and_images),
        ..LoadOptions::default()
    };
    let doc = catch_unwind(|| Document::load_mem_with_options(bytes, options))
        .map_err(|_| unreadable("broken PDF: its objects could not be parsed".into()))?
        .map_err(|e| match e {
            lopdf::Error::Decryption(_) | lopdf::Error::InvalidPassword => unreadable(
                "encrypted PDF: its text needs a password; save an unencrypted copy".into(),
            ),
            e => unreadable(format!("broken PDF: {e}")),
        })?;
    if doc.is_encrypted() {
        return Err(unreadable(
            "encrypted PDF: its text needs a password; save an unencrypted copy".into(),
        ));
    }
    let pages: Vec<(u32, ObjectId)> = catch_unwind(AssertUnwindSafe(|| doc.get_pages()))
        .map_err(|_| unreadable("broken PDF: its page tree could not be read".into()))?
        .into_iter()
        .collect();
    if pages.is_empty() {
        return Err(unreadable("broken PDF: no pages".into()));
    }
    let title = info_title(&doc);
    let outline = outline(&doc);
    let mut texts = PageTexts::default();
    for (done, &(page, id)) in pages.iter().enumerate() {
        texts.pages.push(page);
        catch_unwind(AssertUnwindSafe(|| page_lines(&doc, id, &mut texts)))
            .map_err(|_| unreadable(format!("broken PDF: page {page} could not be read")))?
            .unwrap_or_default();
        on_page(done + 1, pages.len());
    }
    drop(doc);
    if texts.text.trim().is_empty() {
        return Err(unreadable(format!(
            "no text layer: none of its {} pages holds text (a scan?); ragtrail does no \
             OCR, so run one first",
            pages.len()
        )));
    }
    let items = if outline.is_empty() {
        font_heading_items(&texts)
    } else {
        outline_items(&texts, &outline)
    };
    let sections = page_sections(items, title.as_deref());
    Ok(ReadDocument {
        sections,
        title,
        meta: FrontMatter::default(),
    })
}

/// The load filter: a font's embedded program and an image's pixels are not text, and they are
/// most of a large PDF's bytes, so their stream content is emptied as each object loads (the
/// dictionaries stay, so references and `/BaseFont` names still resolve). Text decoding needs
/// only a font's `/ToUnicode` map or `/Encoding`, which stay.
fn drop_fonts_and_images(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    if let Object::Stream(stream) = object {
        let dict = &stream.dict;
        let subtype = dict.get(b"Subtype").and_then(Object::as_name).ok();
        let font_program = dict.has(b"Length1")
            || dict.has(b"Length2")
            || matches!(subtype, Some(b"Type1C" | b"CIDFontType0C" | b"OpenType"));
        if font_program || subtype == Some(b"Image") {
            stream.set_content(Vec::new());
        }
        // lopdf keeps the object it passed in; the returned one is used only for objects
        // inside object streams, which are never streams.
        return Some((id, Object::Null));
    }
    Some((id, object.clone()))
}

fn unreadable(reason: String) -> ReadError {
    ReadError::Unreadable(reason)
}

/// The Info dictionary's `/Title`, if it has one.
fn info_title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let dict = match info {
        lopdf::Object::Reference(id) => doc.get_object(*id).ok()?.as_dict().ok()?,
        other => other.as_dict().ok()?,
    };
    let title = lopdf::decode_text_string(dict.get(b"Title").ok()?).ok()?;
    Some(collapse(&title)).filter(|t| !t.is_empty())
}

/// The outline's entries in order (empty without one, or when it cannot be read).
fn outline(doc: &Document) -> Vec<Entry> {
    let Ok(Ok(toc)) = catch_unwind(AssertUnwindSafe(|| doc.get_toc())) else {
        return Vec::new();
    };
    toc.toc
        .into_iter()
        .filter_map(|e| {
            let title = collapse(&e.title);
            (!title.is_empty() && e.page > 0).then(|| Entry {
                level: e.level.max(1),
                title,
                page: u32::try_from(e.page).unwrap_or(u32::MAX),
            })
        })
        .collect()
}

/// The bound on one page's decompressed content (a bomb in a content stream stops there).
const MAX_PAGE_CONTENT: usize = 64 * 1024 * 1024;

/// How a run of text is set: its size in half points and whether its font is bold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Style {
    half_points: u32,
    bold: bool,
}

/// One line being read (the text shown at one baseline), and the style all of its visible
/// characters share (`None` when they mix styles).
#[derive(Debug, Default)]
struct Line {
    text: String,
    style: Option<Style>,
    /// Visible characters per style, for the document's body style.
    chars: Vec<(Style, usize)>,
}

/// Every page's lines, their text in one buffer. Many small long-lived strings allocated
/// between each page's short-lived ones fragment the heap: on a 2,400-page file that doubled
/// the peak RSS of reading it.
#[derive(Debug, Default)]
struct PageTexts {
    /// The page numbers, in order.
    pages: Vec<u32>,
    text: String,
    /// Index into `pages`, byte range in `text`, style.
    lines: Vec<(usize, std::ops::Range<usize>, Option<Style>)>,
    /// Visible characters per style, over the whole document.
    styles: HashMap<Style, usize>,
}

impl PageTexts {
    /// Adds a finished line to the last page.
    fn push(&mut self, line: Line) {
        let line = line.finish();
        for (style, n) in &line.chars {
            *self.styles.entry(*style).or_default() += n;
        }
        let start = self.text.len();
        self.text.push_str(&line.text);
        let page = self.pages.len().saturating_sub(1);
        self.lines.push((page, start..self.text.len(), line.style));
    }

    /// Each page's number and its lines' text and style.
    fn by_page(&self) -> impl Iterator<Item = (u32, Vec<(&str, Option<Style>)>)> + '_ {
        let mut next = 0;
        self.pages.iter().enumerate().map(move |(i, &page)| {
            let mut lines = Vec::new();
            while let Some((_, range, style)) = self.lines.get(next).filter(|l| l.0 == i) {
                lines.push((&self.text[range.clone()], *style));
                next += 1;
            }
            (page, lines)
        })
    }
}

impl Line {
    fn add(&mut self, text: &str, style: Style, glue: bool) {
        if glue
            && let (Some(before), Some(after)) = (self.text.chars().last(), text.chars().next())
            && spaced(before, after)
        {
            self.text.push(' ');
        }
        self.text.push_str(text);
        let visible = text.chars().filter(|c| !c.is_whitespace()).count();
        if visible == 0 {
            return;
        }
        match self.chars.iter_mut().find(|(s, _)| *s == style) {
            Some((_, n)) => *n += visible,
            None => self.chars.push((style, visible)),
        }
    }

    fn finish(mut self) -> Line {
        self.style = match self.chars.as_slice() {
            [(style, _)] => Some(*style),
            _ => None,
        };
        self
    }
}

/// A page's text as lines, in content-stream order, each with its style: the page's content
/// operators are walked once, tracking the font (`Tf`, and the text matrix's scale) and the
/// baseline (`Td`, `TD`, `Tm`, `T*`); text at a new baseline starts a new line.
fn page_lines(doc: &Document, page: ObjectId, out: &mut PageTexts) -> Result<(), lopdf::Error> {
    let mut fonts: HashMap<Vec<u8>, (Encoding<'_>, bool)> = HashMap::new();
    for (name, font) in doc.get_page_fonts(page)? {
        if let Ok(encoding) = font.get_font_encoding_with_limit(doc, MAX_PAGE_CONTENT) {
            fonts.insert(name, (encoding, is_bold(doc, font)));
        }
    }
    let content = doc.get_page_content_with_limit(page, MAX_PAGE_CONTENT)?;

    let mut line = Line::default();
    let mut font: Option<&(Encoding<'_>, bool)> = None;
    let (mut size, mut scale, mut leading) = (0.0f32, 1.0f32, 0.0f32);
    // The baseline of the text line being set, and of the line text was last shown on.
    let mut y = 0.0f32;
    let mut line_y: Option<f32> = None;
    // Set at `ET`: text of the next block on the same baseline is a separate run.
    let mut glue = false;
    let number = |o: Option<&Object>| o.and_then(|o| o.as_float().ok()).unwrap_or(0.0);
    // One operator at a time: a page's operators are never all held at once.
    for op in Content::decode_iter(&content) {
        let op = op?;
        let operands = &op.operands;
        let mut shown: Vec<&Object> = Vec::new();
        match op.operator.as_str() {
            "BT" => {
                y = 0.0;
                scale = 1.0;
            }
            "ET" => glue = true,
            "Tf" => {
                font = operands
                    .first()
                    .and_then(|o| o.as_name().ok())
                    .and_then(|name| fonts.get(name));
                size = number(operands.get(1));
            }
            "TL" => leading = number(operands.first()),
            "Td" => y += number(operands.get(1)) * scale,
            "TD" => {
                leading = -number(operands.get(1));
                y += number(operands.get(1)) * scale;
            }
            "Tm" => {
                // The text space's y axis is (c, d): its length scales the font size.
                let (c, d) = (number(operands.get(2)), number(operands.get(3)));
                scale = c.hypot(d).max(f32::MIN_POSITIVE);
                y = number(operands.get(5));
            }
            "T*" => y -= leading * scale,
            "Tj" | "TJ" => shown.extend(operands.first()),
            "'" => {
                y -= leading * scale;
                shown.extend(operands.first());
            }
            "\"" => {
                y -= leading * scale;
                shown.extend(operands.get(2));
            }
            _ => {}
        }
        let Some((encoding, bold)) = font else {
            continue;
        };
        for operand in shown {
            let mut text = String::new();
            decode_shown(encoding, operand, &mut text);
            if text.is_empty() {
                continue;
            }
            let tolerance = (size * scale * 0.3).max(0.5);
            if line_y.is_some_and(|ly| (ly - y).abs() > tolerance) {
                out.push(std::mem::take(&mut line));
                glue = false;
            }
            line_y = Some(y);
            let style = Style {
                half_points: (size * scale * 2.0).round().clamp(0.0, 10_000.0) as u32,
                bold: *bold,
            };
            line.add(&text, style, glue);
            glue = false;
        }
    }
    if !line.text.is_empty() {
        out.push(line);
    }
    Ok(())
}

/// A shown string's text: an array's strings in order, a wide negative gap (more than a tenth
/// of the font size) read as a space.
fn decode_shown(encoding: &Encoding<'_>, operand: &Object, out: &mut String) {
    match operand {
        Object::String(bytes, _) => {
            let _ = encoding.write_to_string(bytes, out);
        }
        Object::Array(items) => {
            for item in items {
                match item {
                    Object::Integer(gap) if *gap < -100 => out.push(' '),
                    Object::Real(gap) if *gap < -100.0 => out.push(' '),
                    _ => decode_shown(encoding, item, out),
                }
            }
        }
        _ => {}
    }
}

/// Whether a font is bold: its name says so (`Arial-BoldMT`, `NotoSansCJK-Bold`), or its
/// descriptor's weight is 600 or more, or it forces bold.
fn is_bold(doc: &Document, font: &Dictionary) -> bool {
    let name = font
        .get(b"BaseFont")
        .and_then(Object::as_name)
        .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
        .unwrap_or_default();
    if ["bold", "black", "heavy", "semibold", "demi"]
        .iter()
        .any(|w| name.contains(w))
    {
        return true;
    }
    let descriptor = font
        .get_deref(b"FontDescriptor", doc)
        .and_then(Object::as_dict)
        .ok();
    descriptor.is_some_and(|d| {
        d.get(b"FontWeight")
            .and_then(Object::as_float)
            .is_ok_and(|w| w >= 600.0)
            || d.get(b"Flags")
                .and_then(Object::as_i64)
                .is_ok_and(|f| f & (1 << 18) != 0)
    })
}

/// What a page holds, in order: headings and lines of text.
enum Item<'a> {
    Heading(usize, String),
    Text(&'a str),
}

/// Without an outline, headings come from how text is set. The body style is the one most
/// characters use; a line wholly in a larger style, or in the body's size but bold where the
/// body is not, is a heading (if it is short and holds a letter); headings rank by size, then
/// weight, largest first, and the rank is the level. Consecutive heading lines in one style are
/// one wrapped heading.
fn font_heading_items(texts: &PageTexts) -> Vec<(u32, Vec<Item<'_>>)> {
    let counts = &texts.styles;
    let Some(body) = counts
        .iter()
        .max_by_key(|(style, n)| (**n, std::cmp::Reverse(**style)))
        .map(|(style, _)| *style)
    else {
        return text_items(texts);
    };
    let outranks = |s: &Style| {
        // 8% larger (12 pt body: 13 pt and up), or bold at the body's size.
        s.half_points * 100 >= body.half_points * 108
            || (s.half_points.abs_diff(body.half_points) <= 1 && s.bold && !body.bold)
    };
    let mut ranked: Vec<Style> = counts.keys().copied().filter(outranks).collect();
    ranked.sort_by(|a, b| b.cmp(a));
    let level_of = |text: &str, style: Option<Style>| {
        let style = style?;
        let text = collapse(text);
        let larger = style.half_points > body.half_points + 1;
        let heading_like = text.chars().any(char::is_alphabetic)
            && text.chars().count() <= if larger { 120 } else { 80 }
            // A bold sentence at body size is emphasis, not a heading.
            && (larger || !text.ends_with(['.', '。', '；', ';', ',', '，']));
        if !heading_like {
            return None;
        }
        ranked
            .iter()
            .position(|s| *s == style)
            .map(|i| (i + 1, style))
    };
    let mut previous: Option<Style> = None;
    texts
        .by_page()
        .map(|(page, lines)| {
            let mut items: Vec<Item> = Vec::new();
            for (line, line_style) in lines {
                match level_of(line, line_style) {
                    Some((level, style)) => {
                        let text = collapse(line);
                        match items.last_mut() {
                            Some(Item::Heading(_, heading)) if previous == Some(style) => {
                                let cjk = heading.chars().last().is_some_and(is_cjk)
                                    && text.chars().next().is_some_and(is_cjk);
                                if !cjk {
                                    heading.push(' ');
                                }
                                heading.push_str(&text);
                            }
                            _ => items.push(Item::Heading(level, text)),
                        }
                        previous = Some(style);
                    }
                    None => {
                        if !line.trim().is_empty() {
                            previous = None;
                        }
                        items.push(Item::Text(line));
                    }
                }
            }
            (page, items)
        })
        .collect()
}

fn text_items(texts: &PageTexts) -> Vec<(u32, Vec<Item<'_>>)> {
    texts
        .by_page()
        .map(|(page, lines)| {
            (
                page,
                lines.into_iter().map(|(l, _)| Item::Text(l)).collect(),
            )
        })
        .collect()
}

/// With an outline, its entries are the headings: an entry's title found as a line of its page
/// starts the section there; entries not found name the rest of the page (from after the last
/// one found).
fn outline_items<'a>(texts: &'a PageTexts, outline: &[Entry]) -> Vec<(u32, Vec<Item<'a>>)> {
    let mut next_entry = 0;
    texts
        .by_page()
        .map(|(page, lines)| {
            let pending: Vec<&Entry> = outline[next_entry..]
                .iter()
                .take_while(|e| e.page <= page)
                .collect();
            next_entry += pending.len();
            let mut applied = 0;
            let mut items: Vec<Item> = Vec::new();
            let mut after_last_heading = 0;
            for (line, _) in lines {
                let key = collapse(line);
                if let Some(i) = pending[applied..].iter().position(|e| e.title == key) {
                    for entry in &pending[applied..=applied + i] {
                        items.push(Item::Heading(entry.level, entry.title.clone()));
                    }
                    applied += i + 1;
                    after_last_heading = items.len();
                    continue;
                }
                items.push(Item::Text(line));
            }
            let rest: Vec<Item> = pending[applied..]
                .iter()
                .map(|e| Item::Heading(e.level, e.title.clone()))
                .collect();
            items.splice(after_last_heading..after_last_heading, rest);
            (page, items)
        })
        .collect()
}

/// Splits the pages into sections: one per page, cut further where a heading begins; the
/// heading path is a stack, as in Markdown.
fn page_sections(pages: Vec<(u32, Vec<Item<'_>>)>, title: Option<&str>) -> Vec<Section> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    for (page, items) in pages {
        let mut lines: Vec<&str> = Vec::new();
        let flush =
            |stack: &[(usize, String)], lines: &mut Vec<&str>, sections: &mut Vec<Section>| {
                let blocks = page_blocks(lines);
                lines.clear();
                if blocks.is_empty() {
                    return;
                }
                let headings: Vec<String> = stack.iter().map(|(_, t)| t.clone()).collect();
                let mut id_headings = headings.clone();
                id_headings.push(format!("page={page}"));
                let repeats = sections
                    .iter()
                    .filter(|s| s.id_headings.starts_with(&id_headings))
                    .count();
                if repeats > 0 {
                    id_headings.push(repeats.to_string());
                }
                sections.push(Section {
                    id_headings,
                    headings,
                    anchor: Some(format!("page={page}")),
                    blocks,
                });
            };
        for item in items {
            match item {
                Item::Heading(level, text) => {
                    flush(&stack, &mut lines, &mut sections);
                    push_heading(&mut stack, level, text, title);
                }
                Item::Text(text) => lines.push(text),
            }
        }
        flush(&stack, &mut lines, &mut sections);
    }
    sections
}

fn push_heading(stack: &mut Vec<(usize, String)>, level: usize, text: String, title: Option<&str>) {
    stack.retain(|(l, _)| *l < level);
    // A top heading that repeats the document title is the title, as a Markdown `# H1` is.
    if !(level == 1 && title == Some(text.as_str())) {
        stack.push((level, text));
    }
}

/// Whether two runs of text set apart in the PDF (two text blocks on a line, or a wrapped
/// line and the next) read with a space between them: not between two CJK characters, not
/// inside brackets or quotes (`(办公通)`, never `( 办公通 )`), not before punctuation that
/// follows a word.
fn spaced(before: char, after: char) -> bool {
    let cjk = |c: char| {
        is_cjk(c)
            || ('\u{3000}'..='\u{303F}').contains(&c)
            || ('\u{FF00}'..='\u{FFEF}').contains(&c)
    };
    !((cjk(before) && cjk(after))
        || "([{“‘（【《「".contains(before)
        || ")]}”’）】》」,.;:!?，。、；：！？".contains(after))
}

/// A line that ends in a hyphen after a letter, continued by a lowercase word on the next
/// line: one word set across the break (`add-` / `in` is `add-in`). The hyphen is kept, as a
/// compound's is; a word the typesetter hyphenated keeps it too, which loses nothing.
fn hyphen_wrapped(paragraph: &str, next: char) -> bool {
    let mut end = paragraph.chars().rev();
    end.next() == Some('-') && end.next().is_some_and(char::is_alphabetic) && next.is_lowercase()
}

/// A page's lines as paragraphs: blank lines separate them; wrapped lines join as [`spaced`]
/// says, a word hyphenated across the break ([`hyphen_wrapped`]) without a space.
fn page_blocks(lines: &[&str]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut paragraph = String::new();
    for line in lines {
        let line = collapse(line);
        if line.is_empty() {
            if !paragraph.is_empty() {
                blocks.push(Block::Paragraph(std::mem::take(&mut paragraph)));
            }
            continue;
        }
        if let (Some(before), Some(after)) = (paragraph.chars().last(), line.chars().next())
            && spaced(before, after)
            && !hyphen_wrapped(&paragraph, after)
        {
            paragraph.push(' ');
        }
        paragraph.push_str(&line);
    }
    if !paragraph.is_empty() {
        blocks.push(Block::Paragraph(paragraph));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, points: u32, bold: bool) -> Line {
        let mut line = Line::default();
        line.add(
            text,
            Style {
                half_points: points * 2,
                bold,
            },
            false,
        );
        line.finish()
    }

    fn headings(lines: Vec<Line>) -> Vec<(usize, String)> {
        let mut texts = PageTexts {
            pages: vec![1],
            ..PageTexts::default()
        };
        for line in lines {
            texts.push(line);
        }
        font_heading_items(&texts)
            .into_iter()
            .flat_map(|(_, items)| items)
            .filter_map(|item| match item {
                Item::Heading(level, text) => Some((level, text)),
                Item::Text(_) => None,
            })
            .collect()
    }

    const BODY: &str = "Every trip needs an approved travel request before any booking is made";

    #[test]
    fn larger_and_bold_lines_are_headings_ranked_by_size_then_weight() {
        let found = headings(vec![
            line("Policy", 18, true),
            line("Booking", 14, true),
            line(BODY, 12, false),
            line("Flights", 12, true),
            line(BODY, 12, false),
            line(BODY, 12, false),
        ]);
        assert_eq!(
            found,
            vec![
                (1, "Policy".to_string()),
                (2, "Booking".to_string()),
                (3, "Flights".to_string())
            ]
        );
    }

    #[test]
    fn emphasis_mixed_lines_and_wrapped_headings() {
        let mut mixed = Line::default();
        mixed.add(
            "Note:",
            Style {
                half_points: 24,
                bold: true,
            },
            false,
        );
        mixed.add(
            "receipts are kept",
            Style {
                half_points: 24,
                bold: false,
            },
            true,
        );
        let mixed = mixed.finish();
        let found = headings(vec![
            line("Lodging and Meal", 16, true),
            line("Allowances", 16, true),
            line(BODY, 12, false),
            // A bold sentence at body size is emphasis; a line mixing styles is body text.
            line("Claims filed late are refused.", 12, true),
            mixed,
            line(BODY, 12, false),
            line(BODY, 12, false),
        ]);
        assert_eq!(found, vec![(1, "Lodging and Meal Allowances".to_string())]);
    }

    #[test]
    fn a_pdf_in_one_style_has_no_headings() {
        assert!(headings(vec![line("Short", 12, false), line(BODY, 12, false)]).is_empty());
    }

    #[test]
    fn the_load_filter_empties_font_programs_and_images_and_keeps_text() {
        use lopdf::{Stream, dictionary};
        let filtered = |dict: Dictionary| {
            let mut object = Object::Stream(Stream::new(dict, b"0123456789".to_vec()));
            drop_fonts_and_images((1, 0), &mut object);
            object.as_stream().map(|s| s.content.len()).unwrap_or(99)
        };
        assert_eq!(filtered(dictionary! { "Length1" => 10 }), 0);
        assert_eq!(filtered(dictionary! { "Subtype" => "CIDFontType0C" }), 0);
        assert_eq!(filtered(dictionary! { "Subtype" => "Image" }), 0);
        // A page's content and a font's ToUnicode map are text: kept.
        assert_eq!(filtered(dictionary! {}), 10);
        assert_eq!(filtered(dictionary! { "Subtype" => "Form" }), 10);
    }

    /// A one-page PDF whose text is sized by the text matrix (`1 Tf` then `16 0 0 16 x y Tm`),
    /// as many writers do, with two lines set in one text block.
    fn scaled_text_pdf() -> Vec<u8> {
        use lopdf::{Stream, dictionary};
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let bold = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica-Bold",
        });
        let regular = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
        });
        let resources = doc.add_object(dictionary! {
            "Font" => dictionary! { "F1" => bold, "F2" => regular },
        });
        let content = b"BT /F1 1 Tf 16 0 0 16 72 700 Tm (Leave Policy) Tj ET\n\
            BT /F2 1 Tf 11 0 0 11 72 680 Tm (Staff take twenty days of leave each year.) Tj ET\n\
            BT /F2 1 Tf 11 0 0 11 72 666 Tm (Unused days lapse at the end of March.) Tj \
            0 -1.2 Td (Carry over needs approval.) Tj ET\n\
            BT /F1 11 Tf 72 630 Td (Sick Leave) Tj ET\n\
            BT /F2 11 Tf 72 610 Td (A note from a doctor is needed after three days.) Tj ET\n";
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.to_vec()));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1,
                "Resources" => resources,
                "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
            }),
        );
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog);
        let mut bytes = Vec::new();
        doc.save_to(&mut bytes).expect("save");
        bytes
    }

    #[test]
    fn the_text_matrix_scales_the_font_and_a_new_baseline_is_a_new_line() {
        let mut pages = Vec::new();
        let doc = read_pdf(&scaled_text_pdf(), &mut |done, n| pages.push((done, n))).expect("read");
        assert_eq!(pages, vec![(1, 1)]);
        let sections: Vec<(Vec<String>, Vec<String>)> = doc
            .sections
            .iter()
            .map(|s| {
                let blocks = s
                    .blocks
                    .iter()
                    .map(|b| match b {
                        Block::Paragraph(p) => p.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                (s.headings.clone(), blocks)
            })
            .collect();
        assert_eq!(
            sections,
            vec![
                (
                    vec!["Leave Policy".to_string()],
                    vec![
                        "Staff take twenty days of leave each year. Unused days lapse at the end \
                         of March. Carry over needs approval."
                            .to_string()
                    ]
                ),
                (
                    vec!["Leave Policy".to_string(), "Sick Leave".to_string()],
                    vec!["A note from a doctor is needed after three days.".to_string()]
                ),
            ]
        );
    }
}
