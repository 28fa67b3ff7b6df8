//! One reader per document format, behind one interface: bytes in, a [`ReadDocument`] out (a
//! title, front-matter-like metadata, and sections of plain-text blocks the chunker packs).
//! A reader never decides access: sidecar front matter is applied by the scan, for every format.

mod docx;
mod html;
mod markdown;
mod pdf;

use std::path::Path;

use super::chunker::{Block, Section};
use super::{FrontMatter, KnowledgeError};

/// The formats a knowledge folder may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Markdown,
    Text,
    Html,
    Docx,
    Pdf,
}

impl Format {
    /// The format a file's extension names, if it is one ingest reads.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(Format::Markdown),
            "txt" => Some(Format::Text),
            "html" | "htm" => Some(Format::Html),
            "docx" => Some(Format::Docx),
            "pdf" => Some(Format::Pdf),
            _ => None,
        }
    }

    /// The name ingest reports counts under.
    pub fn name(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Html => "html",
            Format::Docx => "docx",
            Format::Pdf => "pdf",
        }
    }

    fn reader(self) -> &'static dyn Reader {
        match self {
            Format::Markdown => &markdown::MarkdownReader { markdown: true },
            Format::Text => &markdown::MarkdownReader { markdown: false },
            Format::Html => &html::HtmlReader,
            Format::Docx => &docx::DocxReader,
            Format::Pdf => &pdf::PdfReader,
        }
    }
}

/// What a reader makes of one file.
#[derive(Debug, Default)]
pub struct ReadDocument {
    /// The document's own title (`<title>`, core properties, front matter, first `# H1`).
    pub title: Option<String>,
    /// Metadata the file itself declares (Markdown or text front matter, an HTML page's `---`
    /// block and `<meta>` tags, DOCX core properties); a sidecar overrides it key by key.
    pub meta: FrontMatter,
    pub sections: Vec<Section>,
}

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// The file cannot be ingested (corrupt, encrypted, no text layer…): it is skipped with this
    /// reason, and its previous version stays in the index.
    Unreadable(String),
    /// Malformed or access-widening front matter: stops the ingest, as in a Markdown file.
    FrontMatter(KnowledgeError),
}

impl From<KnowledgeError> for ReadError {
    fn from(e: KnowledgeError) -> Self {
        ReadError::FrontMatter(e)
    }
}

/// One format's reader.
trait Reader: Sync {
    /// Reads one file's bytes; `source` is its path relative to the knowledge root, for messages.
    fn read(&self, source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError>;
}

/// Reads one file's bytes as `format`.
pub fn read(format: Format, source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError> {
    format.reader().read(source, bytes)
}

/// [`read`], calling `on_page(pages_done, pages)` after each page of a paged format (PDF).
pub fn read_with_progress(
    format: Format,
    source: &str,
    bytes: &[u8],
    on_page: &mut dyn FnMut(usize, usize),
) -> Result<ReadDocument, ReadError> {
    match format {
        Format::Pdf => pdf::read_pdf(bytes, on_page),
        _ => read(format, source, bytes),
    }
}

/// Builds sections from a stream of headings and blocks, the heading path kept as a stack: a
/// heading closes every open heading of its level or deeper.
#[derive(Default)]
struct SectionBuilder {
    title: Option<String>,
    stack: Vec<(usize, String)>,
    sections: Vec<Section>,
}

impl SectionBuilder {
    fn new(title: Option<String>) -> Self {
        Self {
            title,
            stack: Vec::new(),
            sections: vec![Section::default()],
        }
    }

    /// A heading of `level` (1 = top). A top-level heading that repeats the title is the title,
    /// not a section name (as in Markdown).
    fn heading(&mut self, level: usize, text: &str) {
        let text = collapse(text);
        if text.is_empty() {
            return;
        }
        self.stack.retain(|(l, _)| *l < level);
        if !(level == 1 && self.title.as_deref() == Some(text.as_str())) {
            self.stack.push((level, text));
        }
        let headings: Vec<String> = self.stack.iter().map(|(_, t)| t.clone()).collect();
        self.sections.push(Section {
            id_headings: headings.clone(),
            headings,
            anchor: None,
            blocks: Vec::new(),
        });
    }

    fn block(&mut self, block: Option<Block>) {
        if let (Some(block), Some(section)) = (block, self.sections.last_mut()) {
            section.blocks.push(block);
        }
    }

    fn paragraph(&mut self, text: &str) {
        let text = collapse_keeping_lines(text);
        if !text.is_empty() {
            self.block(Some(Block::Paragraph(text)));
        }
    }

    fn finish(self) -> Vec<Section> {
        self.sections
            .into_iter()
            .filter(|s| !s.blocks.is_empty())
            .collect()
    }
}

/// Runs of whitespace to one space (a CJK character's neighbours keep no space only if the
/// source had none).
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whitespace collapsed within each line, empty lines dropped.
fn collapse_keeping_lines(s: &str) -> String {
    s.lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads at most `limit` bytes of a stream; more is an error naming the limit (a zip bomb's
/// parts are never inflated past it).
fn read_bounded(reader: impl std::io::Read, limit: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let mut out = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| ReadError::Unreadable(format!("cannot read {what}: {e}")))?;
    if out.len() as u64 > limit {
        return Err(ReadError::Unreadable(format!(
            "{what} inflates past {limit} bytes (a zip bomb, or a document too large to ingest)"
        )));
    }
    Ok(out)
}
