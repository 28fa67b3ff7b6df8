//! PDF through `lopdf` (pure Rust, maintained): text page by page in content-stream order (the
//! order PDF writers lay text out in), each page its own section so every chunk points at
//! `file.pdf#page=N`. Where the PDF has an outline (bookmarks) its entries name the sections:
//! an entry's title found as a line of its page starts the section there, one not found starts
//! it at its page's top. A PDF whose pages carry no text (a scan) is reported, never ingested
//! empty; an encrypted or broken one is refused with the reason. lopdf is guarded against
//! panics on malformed files, which become "broken PDF" too.

use std::panic::{AssertUnwindSafe, catch_unwind};

use lopdf::Document;

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
        if !bytes.starts_with(b"%PDF")
            && !bytes[..bytes.len().min(1024)]
                .windows(4)
                .any(|w| w == b"%PDF")
        {
            return Err(unreadable("not a PDF (no %PDF header)".into()));
        }
        let doc = catch_unwind(|| Document::load_mem(bytes))
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
        let pages: Vec<u32> = catch_unwind(AssertUnwindSafe(|| doc.get_pages()))
            .map_err(|_| unreadable("broken PDF: its page tree could not be read".into()))?
            .into_keys()
            .collect();
        if pages.is_empty() {
            return Err(unreadable("broken PDF: no pages".into()));
        }
        let title = info_title(&doc);
        let outline = outline(&doc);
        let mut texts = Vec::with_capacity(pages.len());
        for &page in &pages {
            let text = catch_unwind(AssertUnwindSafe(|| doc.extract_text(&[page])))
                .map_err(|_| unreadable(format!("broken PDF: page {page} could not be read")))?
                .unwrap_or_default();
            texts.push((page, text));
        }
        if texts.iter().all(|(_, t)| t.trim().is_empty()) {
            return Err(unreadable(format!(
                "no text layer: none of its {} pages holds text (a scan?); ragtrail does no \
                 OCR, so run one first",
                pages.len()
            )));
        }
        Ok(ReadDocument {
            sections: page_sections(&texts, &outline, title.as_deref()),
            title,
            meta: FrontMatter::default(),
        })
    }
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

/// Splits the pages into sections: one per page, cut further where an outline entry begins.
fn page_sections(texts: &[(u32, String)], outline: &[Entry], title: Option<&str>) -> Vec<Section> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut next_entry = 0;
    for (page, text) in texts {
        let pending: Vec<&Entry> = outline[next_entry..]
            .iter()
            .take_while(|e| e.page <= *page)
            .collect();
        next_entry += pending.len();
        let mut applied = 0;
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
        for line in text.lines() {
            let key = collapse(line);
            let found = pending[applied..].iter().position(|e| e.title == key);
            if let Some(i) = found {
                flush(&stack, &mut lines, &mut sections);
                for entry in &pending[applied..=applied + i] {
                    push_heading(&mut stack, entry, title);
                }
                applied += i + 1;
                continue;
            }
            lines.push(line);
        }
        // Entries of this page not found as a line name the rest of the page.
        for entry in &pending[applied..] {
            push_heading(&mut stack, entry, title);
        }
        flush(&stack, &mut lines, &mut sections);
    }
    sections
}

fn push_heading(stack: &mut Vec<(usize, String)>, entry: &Entry, title: Option<&str>) {
    stack.retain(|(l, _)| *l < entry.level);
    // A top entry that repeats the document title is the title, as a Markdown `# H1` is.
    if !(entry.level == 1 && title == Some(entry.title.as_str())) {
        stack.push((entry.level, entry.title.clone()));
    }
}

/// A page's lines as paragraphs: blank lines separate them; wrapped lines join with a space,
/// or with nothing between two CJK characters.
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
        let joins_cjk =
            paragraph.chars().last().is_some_and(is_cjk) && line.chars().next().is_some_and(is_cjk);
        if !paragraph.is_empty() && !joins_cjk {
            paragraph.push(' ');
        }
        paragraph.push_str(&line);
    }
    if !paragraph.is_empty() {
        blocks.push(Block::Paragraph(paragraph));
    }
    blocks
}
