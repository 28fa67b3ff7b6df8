//! HTML (`.html`, `.htm`) through html5ever's HTML5 tree builder (by way of `scraper`): `h1`–`h6`
//! build the titlePath, `<title>` is the document title, navigation, page header and footer,
//! scripts and styles are dropped, tables stay whole with their header row, and
//! `<meta name="tenant|roles|status|version|updated">` is front matter, and so is a YAML block
//! between `---` lines above the markup (as in Markdown). The tree is walked by its open and
//! close edges, never recursively, so 10,000 nested `div`s cost no stack; the tree builder is
//! handed at most [`MAX_DEPTH`] nested elements, so a page nested deeper costs linear time.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use ego_tree::NodeId;
use ego_tree::iter::Edge;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, StartTag, Tag, TagKind, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer,
};
use html5ever::tree_builder::{Tracer, TreeBuilder, TreeSink};
use html5ever::{LocalName, TokenizerResult};
use scraper::{Html, HtmlTreeSink, Node, Selector};

use super::markdown::utf8_text;
use super::{ReadDocument, ReadError, Reader, SectionBuilder, collapse};
use crate::knowledge::chunker::Block;
use crate::knowledge::front_matter::{front_matter_from_pairs, is_access_like, merge_declared};
use crate::knowledge::{KnowledgeError, split_front_matter};

pub(super) struct HtmlReader;

/// Elements whose content is not the document's text.
const DROPPED: &[&str] = &[
    "head", "nav", "header", "footer", "script", "style", "noscript", "template", "svg",
];

/// Elements that end a paragraph where they open or close.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "address",
    "dl",
    "dt",
    "dd",
    "hr",
    "form",
    "fieldset",
    "details",
    "summary",
    "body",
];

impl Reader for HtmlReader {
    fn read(&self, source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError> {
        let text = decode(bytes)?;
        // A `---` block above the markup is front matter, never text of the page.
        let (block, page, _) = split_front_matter(source, &text)?;
        let html = parse_capped(page);
        let title = select_text(&html, "title").or_else(|| select_text(&html, "h1"));
        let tags = front_matter_from_pairs(source, &meta_pairs(source, &html)?)?;
        let meta = merge_declared(source, block, tags)?;
        let mut walker = Walker::new(title.clone());
        for edge in html.root_element().traverse() {
            match edge {
                Edge::Open(node) => walker.open(node.value()),
                Edge::Close(node) => walker.close(node.value()),
            }
        }
        Ok(ReadDocument {
            title,
            meta,
            sections: walker.finish(),
        })
    }
}

/// The page's text: UTF-8 (a BOM dropped), else a UTF-16 BOM, else the charset the page
/// declares (`<meta charset="gbk">`); undeclared non-UTF-8 bytes are refused with a reason.
fn decode(bytes: &[u8]) -> Result<String, ReadError> {
    if let Some((encoding, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        return decode_as(encoding, &bytes[bom..]);
    }
    if std::str::from_utf8(bytes).is_ok() || bytes.contains(&0) {
        return utf8_text(bytes).map(str::to_string);
    }
    match declared_charset(bytes) {
        Some(encoding) => decode_as(encoding, bytes),
        None => utf8_text(bytes).map(str::to_string),
    }
}

fn decode_as(encoding: &'static encoding_rs::Encoding, bytes: &[u8]) -> Result<String, ReadError> {
    let text = encoding
        .decode_without_bom_handling_and_without_replacement(bytes)
        .ok_or_else(|| {
            ReadError::Unreadable(format!(
                "not valid {} text, though the page declares it",
                encoding.name()
            ))
        })?;
    if text.trim().is_empty() {
        return Err(ReadError::Unreadable("empty file".into()));
    }
    Ok(text.into_owned())
}

/// `charset=…` in the first 1,024 bytes (where HTML requires the declaration to be).
fn declared_charset(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let label: String = head[at..]
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    encoding_rs::Encoding::for_label(label.as_bytes())
}

fn select_text(html: &Html, selector: &str) -> Option<String> {
    let selector = Selector::parse(selector).ok()?;
    html.select(&selector)
        .map(|e| collapse(&e.text().collect::<String>()))
        .find(|t| !t.is_empty())
}

/// The page's `<meta name=… content=…>` pairs. An access name without a `content` (`<meta
/// name="roles" value="hr">`) would be ignored, so it is an error.
fn meta_pairs(source: &str, html: &Html) -> Result<Vec<(String, String)>, KnowledgeError> {
    let Ok(selector) = Selector::parse("meta[name]") else {
        return Ok(Vec::new());
    };
    let mut pairs = Vec::new();
    for m in html.select(&selector) {
        let v = m.value();
        let Some(name) = v.attr("name").map(str::trim) else {
            continue;
        };
        match v.attr("content") {
            Some(content) => pairs.push((name.to_string(), content.to_string())),
            None if is_access_like(name) => {
                return Err(KnowledgeError::FrontMatter {
                    file: source.to_string(),
                    line: 1,
                    message: format!(
                        "`<meta name=\"{name}\">` has no `content`: write \
                         `<meta name=\"{name}\" content=\"…\">`, or it would be ignored"
                    ),
                });
            }
            None => {}
        }
    }
    Ok(pairs)
}

/// The deepest nesting the tree builder is given. Its scope checks walk the stack of open
/// elements, so a page of 40,000 nested `<div>`s cost seconds (quadratic); beyond this depth a
/// start tag is left out (a block's becomes a line break) and the text stays, one level up.
const MAX_DEPTH: usize = 256;

/// Elements whose content the tokenizer reads as raw text: always passed on, or their content
/// would be parsed as markup. They hold no elements, so they add one level at most.
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];

/// Elements that hold nothing, so they never deepen the tree.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Parses a page as [`Html::parse_document`] does, with at most [`MAX_DEPTH`] open elements.
fn parse_capped(text: &str) -> Html {
    let builder = TreeBuilder::new(HtmlTreeSink::new(Html::new_document()), Default::default());
    let cap = DepthCap {
        builder,
        dropped: RefCell::new(HashMap::new()),
    };
    let tokenizer = Tokenizer::new(cap, Default::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(text));
    // `Script` results ask the caller to run a script; there is none to run.
    while !matches!(tokenizer.feed(&input), TokenizerResult::Done) {}
    tokenizer.end();
    tokenizer.sink.builder.sink.finish()
}

/// Between the tokenizer and the tree builder: past [`MAX_DEPTH`] held elements, start tags
/// (and the end tags that close them) are left out.
struct DepthCap {
    builder: TreeBuilder<NodeId, HtmlTreeSink>,
    /// Start tags left out, by name, whose end tags are still to come.
    dropped: RefCell<HashMap<LocalName, usize>>,
}

/// Counts the elements the tree builder holds (open ones, formatting ones to reopen).
struct Count(Cell<usize>);

impl Tracer for Count {
    type Handle = NodeId;
    fn trace_handle(&self, _: &NodeId) {
        self.0.set(self.0.get() + 1);
    }
}

impl DepthCap {
    fn held(&self) -> usize {
        let count = Count(Cell::new(0));
        self.builder.trace_handles(&count);
        count.0.get()
    }

    /// What the tree builder is given in place of a left-out tag: a line break for a block
    /// (its text stays apart from the next), nothing for an inline element.
    fn stand_in(name: &LocalName) -> Option<Token> {
        let block = BLOCKS.contains(&&**name)
            || matches!(
                &**name,
                "h1" | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "li"
                    | "ul"
                    | "ol"
                    | "table"
                    | "tr"
                    | "td"
                    | "th"
                    | "caption"
            );
        block.then(|| {
            TagToken(Tag {
                kind: StartTag,
                name: LocalName::from("br"),
                self_closing: false,
                attrs: Vec::new(),
                had_duplicate_attributes: false,
            })
        })
    }
}

impl TokenSink for DepthCap {
    type Handle = NodeId;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<NodeId> {
        let token = match token {
            TagToken(tag)
                if tag.kind == TagKind::StartTag
                    && !VOID.contains(&&*tag.name)
                    && !RAW_TEXT.contains(&&*tag.name)
                    && self.held() >= MAX_DEPTH =>
            {
                *self
                    .dropped
                    .borrow_mut()
                    .entry(tag.name.clone())
                    .or_default() += 1;
                match Self::stand_in(&tag.name) {
                    Some(t) => t,
                    None => return TokenSinkResult::Continue,
                }
            }
            TagToken(tag) if tag.kind == TagKind::EndTag => {
                let mut dropped = self.dropped.borrow_mut();
                match dropped.get_mut(&tag.name) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        drop(dropped);
                        match Self::stand_in(&tag.name) {
                            Some(t) => t,
                            None => return TokenSinkResult::Continue,
                        }
                    }
                    _ => TagToken(tag),
                }
            }
            other => other,
        };
        self.builder.process_token(token, line_number)
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

#[derive(Default)]
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    row_all_th: bool,
    in_thead: bool,
    cell: Option<String>,
}

/// The walk's state: where text goes as the tree's edges pass.
struct Walker {
    out: SectionBuilder,
    /// Depth inside a dropped element (0: outside).
    dropped: usize,
    paragraph: String,
    /// Depth inside `<pre>`: whitespace kept.
    pre: usize,
    heading: Option<(usize, String)>,
    /// Open lists (ordered ones count their items) and the items gathered.
    lists: Vec<Option<u32>>,
    items: Vec<String>,
    item: Option<String>,
    tables: Vec<Table>,
}

impl Walker {
    fn new(title: Option<String>) -> Self {
        Self {
            out: SectionBuilder::new(title),
            dropped: 0,
            paragraph: String::new(),
            pre: 0,
            heading: None,
            lists: Vec::new(),
            items: Vec::new(),
            item: None,
            tables: Vec::new(),
        }
    }

    fn open(&mut self, node: &Node) {
        match node {
            Node::Element(e) => {
                let name = e.name();
                if self.dropped > 0 || DROPPED.contains(&name) {
                    self.dropped += 1;
                    return;
                }
                self.open_element(name);
            }
            Node::Text(t) if self.dropped == 0 => self.text(t),
            _ => {}
        }
    }

    fn close(&mut self, node: &Node) {
        if let Node::Element(e) = node {
            if self.dropped > 0 {
                self.dropped -= 1;
                return;
            }
            self.close_element(e.name());
        }
    }

    fn open_element(&mut self, name: &str) {
        match name {
            "table" => {
                if self.tables.is_empty() {
                    self.flush_paragraph();
                }
                self.tables.push(Table::default());
            }
            "thead" => {
                if let Some(t) = self.tables.last_mut() {
                    t.in_thead = true;
                }
            }
            "tr" => {
                if let Some(t) = self.tables.last_mut() {
                    t.row.clear();
                    t.row_all_th = true;
                }
            }
            "td" | "th" => {
                if let Some(t) = self.tables.last_mut() {
                    t.cell = Some(String::new());
                    t.row_all_th &= name == "th";
                }
            }
            _ if !self.tables.is_empty() => self.push_text(" "),
            "ul" | "ol" => {
                if self.lists.is_empty() {
                    self.flush_paragraph();
                }
                self.flush_item();
                self.lists.push((name == "ol").then_some(0));
            }
            "li" => {
                self.flush_item();
                let number = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{n}. ")
                    }
                    _ => String::new(),
                };
                self.item = Some(number);
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if self.lists.is_empty() => {
                self.flush_paragraph();
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.heading = Some((level, String::new()));
            }
            "br" => self.push_text("\n"),
            "pre" => {
                self.flush_paragraph();
                self.pre += 1;
            }
            _ if BLOCKS.contains(&name) && self.lists.is_empty() => self.flush_paragraph(),
            _ if BLOCKS.contains(&name) => self.push_text(" "),
            _ => {}
        }
    }

    fn close_element(&mut self, name: &str) {
        match name {
            "table" => {
                let Some(table) = self.tables.pop() else {
                    return;
                };
                let block = Block::table(&table.header, &table.rows);
                match self.tables.last_mut() {
                    // A table inside a cell is text of that cell.
                    Some(outer) => {
                        if let (Some(cell), Some(b)) = (outer.cell.as_mut(), block) {
                            cell.push(' ');
                            cell.push_str(&match b {
                                Block::Table(rows) => rows.join("; "),
                                Block::Paragraph(p) => p,
                            });
                        }
                    }
                    None => self.out.block(block),
                }
            }
            "thead" => {
                if let Some(t) = self.tables.last_mut() {
                    t.in_thead = false;
                }
            }
            "td" | "th" => {
                if let Some(t) = self.tables.last_mut()
                    && let Some(cell) = t.cell.take()
                {
                    t.row.push(collapse(&cell));
                }
            }
            "tr" => {
                if let Some(t) = self.tables.last_mut() {
                    let row = std::mem::take(&mut t.row);
                    if row.iter().all(String::is_empty) {
                        return;
                    }
                    let is_header =
                        t.header.is_empty() && t.rows.is_empty() && (t.in_thead || t.row_all_th);
                    if is_header {
                        t.header = row;
                    } else {
                        t.rows.push(row);
                    }
                }
            }
            _ if !self.tables.is_empty() => self.push_text(" "),
            "ul" | "ol" => {
                self.flush_item();
                self.lists.pop();
                if self.lists.is_empty() {
                    let items = std::mem::take(&mut self.items);
                    self.out.block(Block::list(&items));
                }
            }
            "li" => self.flush_item(),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                if let Some((level, text)) = self.heading.take() {
                    self.out.heading(level, &text);
                }
            }
            "pre" => {
                self.flush_paragraph();
                self.pre = self.pre.saturating_sub(1);
            }
            _ if BLOCKS.contains(&name) && self.lists.is_empty() => self.flush_paragraph(),
            _ if BLOCKS.contains(&name) => self.push_text(" "),
            _ => {}
        }
    }

    fn text(&mut self, text: &str) {
        if self.pre > 0 && self.tables.is_empty() && self.heading.is_none() {
            self.paragraph.push_str(text);
            return;
        }
        // Source line breaks and indentation are layout, not text.
        let mut folded = String::with_capacity(text.len());
        let mut space = false;
        for c in text.chars() {
            if c.is_whitespace() {
                space = true;
            } else {
                if space {
                    folded.push(' ');
                    space = false;
                }
                folded.push(c);
            }
        }
        if space {
            folded.push(' ');
        }
        self.push_text(&folded);
    }

    fn push_text(&mut self, text: &str) {
        if let Some(table) = self.tables.last_mut() {
            if let Some(cell) = table.cell.as_mut() {
                cell.push_str(text);
            }
            return;
        }
        if let Some((_, heading)) = self.heading.as_mut() {
            heading.push_str(text);
        } else if let Some(item) = self.item.as_mut() {
            item.push_str(text);
        } else if !self.lists.is_empty() {
            // Text in a list but outside an item: an item of its own.
            self.item = Some(text.to_string());
        } else {
            self.paragraph.push_str(text);
        }
    }

    fn flush_item(&mut self) {
        if let Some(item) = self.item.take() {
            let item = collapse(&item);
            let bare_number = item
                .trim_end_matches('.')
                .chars()
                .all(|c| c.is_ascii_digit());
            if !item.is_empty() && !bare_number {
                self.items.push(item);
            }
        }
    }

    fn flush_paragraph(&mut self) {
        let text = std::mem::take(&mut self.paragraph);
        if self.pre > 0 {
            let kept = text.trim_matches('\n').trim_end();
            if !kept.trim().is_empty() {
                self.out.block(Some(Block::Paragraph(kept.to_string())));
            }
            return;
        }
        self.out.paragraph(&text);
    }

    fn finish(mut self) -> Vec<crate::knowledge::chunker::Section> {
        self.flush_paragraph();
        self.out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(html: &str) -> ReadDocument {
        HtmlReader.read("p.html", html.as_bytes()).expect("read")
    }

    fn texts(doc: &ReadDocument) -> Vec<(String, Vec<String>)> {
        doc.sections
            .iter()
            .map(|s| {
                let blocks = s
                    .blocks
                    .iter()
                    .map(|b| match b {
                        Block::Paragraph(p) => p.clone(),
                        Block::Table(rows) => rows.join("\n"),
                    })
                    .collect();
                (s.headings.join(" / "), blocks)
            })
            .collect()
    }

    #[test]
    fn headings_build_the_path_and_page_furniture_is_dropped() {
        let doc = read(
            "<!doctype html><html><head><title>Travel Policy</title>\
             <style>p { color: red }</style><script>var x = 'menu';</script></head><body>\
             <header><h1>Travel Policy</h1><nav><a href=/>Home</a></nav></header>\
             <p>Intro   text\n spread.</p>\
             <h2>Flights</h2><p>Economy <b>only</b>.</p>\
             <h3>Long haul</h3><ul><li>Premium economy</li><li>after <i>6 hours</i></li></ul>\
             <h2>Hotels</h2><p>Line one<br>line two</p>\
             <footer>© 2026 Contoso</footer></body></html>",
        );
        assert_eq!(doc.title.as_deref(), Some("Travel Policy"));
        assert_eq!(
            texts(&doc),
            vec![
                ("".to_string(), vec!["Intro text spread.".to_string()]),
                ("Flights".to_string(), vec!["Economy only.".to_string()]),
                (
                    "Flights / Long haul".to_string(),
                    vec!["Premium economy\nafter 6 hours".to_string()]
                ),
                ("Hotels".to_string(), vec!["Line one\nline two".to_string()]),
            ]
        );
    }

    #[test]
    fn tables_stay_whole_and_name_their_header_cells() {
        let doc = read(
            "<title>T</title><h2>Rates</h2><table><thead><tr><th>Zone</th><th>Cap</th></tr>\
             </thead><tbody><tr><td>Zone 1</td><td>280</td></tr><tr><td>Zone 2</td>\
             <td>210</td></tr></tbody></table><ol><li>First</li><li>Second</li></ol>",
        );
        assert_eq!(
            doc.sections[0].blocks,
            vec![
                Block::Table(vec![
                    "Zone: Zone 1, Cap: 280".to_string(),
                    "Zone: Zone 2, Cap: 210".to_string()
                ]),
                Block::Paragraph("1. First\n2. Second".to_string()),
            ]
        );
    }

    #[test]
    fn meta_tags_are_front_matter() {
        let doc = read(
            "<html><head><meta charset=utf-8><meta name=viewport content=width=device-width>\
             <meta name=tenant content=acme><meta name=roles content=\"hr, finance\">\
             <meta name=status content=draft><meta name=version content=2026-04>\
             <title>T</title></head><body><p>x</p></body></html>",
        );
        assert_eq!(doc.meta.tenant.as_deref(), Some("acme"));
        assert_eq!(doc.meta.roles, vec!["finance", "hr"]);
        assert_eq!(doc.meta.status, Some(crate::knowledge::DocStatus::Draft));
        assert_eq!(doc.meta.version.as_deref(), Some("2026-04"));
    }

    #[test]
    fn ten_thousand_nested_divs_cost_no_stack() {
        let html = format!(
            "<title>Deep</title>{}<p>bottom text</p>{}",
            "<div>".repeat(10_000),
            "</div>".repeat(10_000)
        );
        // A small stack: a recursive walk would overflow it.
        let doc = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                HtmlReader
                    .read("deep.html", html.as_bytes())
                    .map(|d| texts(&d))
            })
            .expect("spawn")
            .join()
            .expect("no stack overflow")
            .expect("read");
        assert_eq!(doc, vec![("".to_string(), vec!["bottom text".to_string()])]);
    }

    /// 40,000 nested `<div>`s (440 KB) took seconds: the tree builder's scope checks walk
    /// every open element. Past [`MAX_DEPTH`] the page is flattened: its text is all there, a
    /// heading that deep is a line of text, and the structure after the deep part is whole.
    #[test]
    fn forty_thousand_nested_divs_are_read_flat_past_the_cap() {
        let depth = 40_000;
        let html = format!(
            "<title>Deep</title><h2>Top</h2><p>top text</p>{}<h3>Deep heading</h3><p>deep one</p>\
             <p>deep <b>two</b></p>{}<h2>After</h2><p>tail text</p>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        assert!(html.len() > 440_000);
        let doc = read(&html);
        assert_eq!(
            texts(&doc),
            vec![
                (
                    "Top".to_string(),
                    vec![
                        "top text".to_string(),
                        "Deep heading\ndeep one\ndeep two".to_string()
                    ]
                ),
                ("After".to_string(), vec!["tail text".to_string()]),
            ]
        );
    }

    #[test]
    fn a_yaml_block_above_the_markup_is_front_matter_not_text() {
        let doc = read(
            "---\ntitle: Pay\ntenant: globex\nroles: [hr]\n---\n<html><body><h2>Review</h2>\
             <p>Salary review dates.</p></body></html>",
        );
        assert_eq!(
            (doc.meta.tenant.as_deref(), doc.meta.roles.clone()),
            (Some("globex"), vec!["hr".to_string()])
        );
        assert_eq!(
            texts(&doc),
            vec![(
                "Review".to_string(),
                vec!["Salary review dates.".to_string()]
            )]
        );
    }

    #[test]
    fn a_declared_gbk_page_is_decoded_and_an_undeclared_one_refused() {
        let (body, _, _) = encoding_rs::GBK.encode("<h2>年假</h2><p>员工每年享有五天年假。</p>");
        let mut page = b"<meta charset=\"gbk\"><title>HR</title>".to_vec();
        page.extend_from_slice(&body);
        let doc = HtmlReader.read("gbk.html", &page).expect("read");
        assert_eq!(
            texts(&doc),
            vec![(
                "年假".to_string(),
                vec!["员工每年享有五天年假。".to_string()]
            )]
        );
        let Err(ReadError::Unreadable(reason)) = HtmlReader.read("gbk.html", &body) else {
            panic!("an undeclared GBK page must be refused");
        };
        assert!(reason.contains("GBK/GB18030"), "{reason}");
    }
}
