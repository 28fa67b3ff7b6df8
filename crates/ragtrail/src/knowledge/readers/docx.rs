//! Word (`.docx`): a zip of XML parts, read with `zip` and streamed with `quick-xml`. Paragraphs
//! styled Heading 1…n build the titlePath (the style's name, or its outline level, so localised
//! style ids work too), Title gives the document title, tables stay whole with their first row
//! as header, and the core properties give the title and the `updated` date. Every part is
//! inflated under a fixed bound, so a zip bomb renamed `.docx` is refused, not expanded.

use std::collections::HashMap;
use std::io::Cursor;

use quick_xml::events::{BytesStart, Event};

use super::{ReadDocument, ReadError, Reader, SectionBuilder, collapse, read_bounded};
use crate::knowledge::FrontMatter;
use crate::knowledge::chunker::Block;

pub(super) struct DocxReader;

/// The most one part of a .docx may inflate to. The text of a 1,000-page document is a few
/// megabytes of XML.
const PART_LIMIT: u64 = 64 * 1024 * 1024;

impl Reader for DocxReader {
    fn read(&self, _source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError> {
        if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
            return Err(unreadable(
                "an OLE compound file, not a zip: a password-protected or legacy Word file; \
                 save it as .docx without a password",
            ));
        }
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| unreadable(&format!("not a zip archive (a .docx is one): {e}")))?;
        let document = part(&mut zip, "word/document.xml")?.ok_or_else(|| {
            unreadable("no word/document.xml in the archive: not a Word document")
        })?;
        let styles = match part(&mut zip, "word/styles.xml")? {
            Some(xml) => read_styles(&xml),
            None => HashMap::new(),
        };
        let (core_title, modified) = match part(&mut zip, "docProps/core.xml")? {
            Some(xml) => read_core(&xml),
            None => (None, None),
        };
        let (title_style, sections) = read_body(&document, &styles, core_title.clone())?;
        Ok(ReadDocument {
            title: core_title.or(title_style),
            meta: FrontMatter {
                updated: modified,
                ..FrontMatter::default()
            },
            sections,
        })
    }
}

fn unreadable(reason: &str) -> ReadError {
    ReadError::Unreadable(reason.to_string())
}

/// One part of the archive as text, inflated under [`PART_LIMIT`]; `None` if it is absent.
fn part(zip: &mut zip::ZipArchive<Cursor<&[u8]>>, name: &str) -> Result<Option<String>, ReadError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(unreadable(&format!("corrupt zip, cannot open {name}: {e}"))),
    };
    if file.size() > PART_LIMIT {
        return Err(unreadable(&format!(
            "{name} declares {} bytes inflated, over the {PART_LIMIT}-byte bound (a zip bomb, \
             or a document too large to ingest)",
            file.size()
        )));
    }
    let bytes = read_bounded(file, PART_LIMIT, name)?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| unreadable(&format!("{name} is not UTF-8 XML")))
}

/// What a paragraph style makes of a paragraph.
#[derive(Debug, Clone, Copy, PartialEq)]
enum StyleRole {
    Title,
    Heading(usize),
}

fn attr(e: &BytesStart<'_>, local: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.local_name().as_ref() == local)
            .then(|| {
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .ok()
                    .map(|v| v.into_owned())
            })
            .flatten()
    })
}

/// Style id → role, from `word/styles.xml`: a style named `heading N` or `Title`, or one with
/// an outline level.
fn read_styles(xml: &str) -> HashMap<String, StyleRole> {
    let mut out = HashMap::new();
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut current: Option<(String, Option<String>, Option<usize>)> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.local_name().as_ref() {
                "style" => current = attr(&e, "styleId").map(|id| (id, None, None)),
                "name" => {
                    if let Some((_, name, _)) = current.as_mut() {
                        *name = attr(&e, "val");
                    }
                }
                "outlineLvl" => {
                    if let Some((_, _, level)) = current.as_mut() {
                        *level = attr(&e, "val").and_then(|v| v.parse().ok());
                    }
                }
                _ => {}
            },
            Ok(Event::End(e)) if e.local_name().as_ref() == "style" => {
                if let Some((id, name, level)) = current.take()
                    && let Some(role) = role_of(&id, name.as_deref(), level)
                {
                    out.insert(id, role);
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

fn role_of(id: &str, name: Option<&str>, outline_level: Option<usize>) -> Option<StyleRole> {
    let name = name.unwrap_or(id).to_ascii_lowercase();
    if name == "title" {
        return Some(StyleRole::Title);
    }
    let number = name
        .strip_prefix("heading")
        .map(str::trim)
        .and_then(|n| n.parse::<usize>().ok());
    match (number, outline_level) {
        (Some(n), _) if (1..=9).contains(&n) => Some(StyleRole::Heading(n)),
        (_, Some(l)) if l < 9 => Some(StyleRole::Heading(l + 1)),
        _ => None,
    }
}

/// `dc:title` and the date of `dcterms:modified` (`2026-03-15T…` → `2026-03-15`).
fn read_core(xml: &str) -> (Option<String>, Option<String>) {
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut title, mut modified) = (None, None);
    let mut field: Option<&'static str> = None;
    let mut text = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                field = match e.local_name().as_ref() {
                    "title" => Some("title"),
                    "modified" => Some("modified"),
                    _ => None,
                };
                text.clear();
            }
            Ok(Event::Text(t)) if field.is_some() => text.push_str(&t.xml10_content()),
            Ok(Event::GeneralRef(r)) if field.is_some() => {
                text.push_str(&resolve_ref(&r.xml10_content()))
            }
            Ok(Event::End(_)) => {
                let value = collapse(&text);
                match field.take() {
                    Some("title") if !value.is_empty() => title = Some(value),
                    Some("modified") if value.len() >= 10 => {
                        modified = Some(value.chars().take(10).collect())
                    }
                    _ => {}
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    (title, modified)
}

/// `amp`, `#20320`, `#x4F60` → the character (an unknown name is kept as written).
fn resolve_ref(name: &str) -> String {
    let c = match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => name.strip_prefix('#').and_then(|n| {
            let code = match n.strip_prefix('x').or_else(|| n.strip_prefix('X')) {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => n.parse().ok(),
            };
            code.and_then(char::from_u32)
        }),
    };
    c.map_or_else(|| format!("&{name};"), String::from)
}

#[derive(Default)]
struct Paragraph {
    style: Option<String>,
    outline_level: Option<usize>,
    list: bool,
    text: String,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

/// The body's paragraphs and tables, in order: the Title-styled text, and the sections.
fn read_body(
    xml: &str,
    styles: &HashMap<String, StyleRole>,
    title: Option<String>,
) -> Result<(Option<String>, Vec<crate::knowledge::chunker::Section>), ReadError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = SectionBuilder::new(title.clone());
    let mut title_text: Option<String> = None;
    let mut paragraph: Option<Paragraph> = None;
    let mut in_text = false;
    let mut tables: Vec<Table> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| unreadable(&format!("word/document.xml is not well-formed XML: {e}")))?;
        match event {
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                "p" => paragraph = Some(Paragraph::default()),
                "pStyle" => {
                    if let Some(p) = paragraph.as_mut() {
                        p.style = attr(&e, "val");
                    }
                }
                "outlineLvl" => {
                    if let Some(p) = paragraph.as_mut() {
                        p.outline_level = attr(&e, "val").and_then(|v| v.parse().ok());
                    }
                }
                "numPr" => {
                    if let Some(p) = paragraph.as_mut() {
                        p.list = true;
                    }
                }
                "t" => in_text = true,
                "tab" => push(&mut paragraph, " "),
                "br" | "cr" => push(&mut paragraph, "\n"),
                "tbl" => {
                    if tables.is_empty() {
                        out.block(Block::list(&std::mem::take(&mut items)));
                    }
                    tables.push(Table::default());
                }
                "tr" => {
                    if let Some(t) = tables.last_mut() {
                        t.row.clear();
                    }
                }
                "tc" => {
                    if let Some(t) = tables.last_mut() {
                        t.cell.clear();
                    }
                }
                _ => {}
            },
            Event::Text(t) if in_text => push(&mut paragraph, &t.xml10_content()),
            Event::GeneralRef(r) if in_text => {
                push(&mut paragraph, &resolve_ref(&r.xml10_content()))
            }
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => {
                    let Some(p) = paragraph.take() else { continue };
                    if let Some(t) = tables.last_mut() {
                        if !t.cell.is_empty() {
                            t.cell.push(' ');
                        }
                        t.cell.push_str(&p.text);
                        continue;
                    }
                    let role = p
                        .style
                        .as_deref()
                        .and_then(|s| styles.get(s).copied().or_else(|| role_of(s, None, None)))
                        .or_else(|| {
                            p.outline_level
                                .filter(|l| *l < 9)
                                .map(|l| StyleRole::Heading(l + 1))
                        });
                    let text = collapse(&p.text);
                    if text.is_empty() {
                        continue;
                    }
                    if !p.list || role.is_some() {
                        out.block(Block::list(&std::mem::take(&mut items)));
                    }
                    match role {
                        Some(StyleRole::Title) if title_text.is_none() => {
                            title_text = Some(text.clone());
                            if out.title.is_none() {
                                out.title = Some(text);
                            }
                        }
                        Some(StyleRole::Title) => out.paragraph(&text),
                        Some(StyleRole::Heading(level)) => out.heading(level, &text),
                        None if p.list => items.push(text),
                        None => out.paragraph(&p.text),
                    }
                }
                "tc" => {
                    if let Some(t) = tables.last_mut() {
                        let cell = collapse(&std::mem::take(&mut t.cell));
                        t.row.push(cell);
                    }
                }
                "tr" => {
                    if let Some(t) = tables.last_mut() {
                        let row = std::mem::take(&mut t.row);
                        if !row.iter().all(String::is_empty) {
                            t.rows.push(row);
                        }
                    }
                }
                "tbl" => {
                    let Some(table) = tables.pop() else { continue };
                    let (header, rows) = match table.rows.split_first() {
                        Some((h, r)) => (h.clone(), r.to_vec()),
                        None => (Vec::new(), Vec::new()),
                    };
                    let block = Block::table(&header, &rows);
                    match tables.last_mut() {
                        // A table inside a cell is text of that cell.
                        Some(outer) => {
                            if let Some(b) = block {
                                outer.cell.push(' ');
                                outer.cell.push_str(&match b {
                                    Block::Table(rows) => rows.join("; "),
                                    Block::Paragraph(p) => p,
                                });
                            }
                        }
                        None => out.block(block),
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    out.block(Block::list(&items));
    Ok((title_text, out.finish()))
}

fn push(paragraph: &mut Option<Paragraph>, text: &str) {
    if let Some(p) = paragraph.as_mut() {
        p.text.push_str(text);
    }
}
