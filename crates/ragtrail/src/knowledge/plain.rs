//! Markdown to plain text, for everything a person reads (snippets, quotes, answers, titlePaths)
//! and everything that is indexed. A CommonMark parser decides what is markup: link and image
//! text is kept and targets dropped, emphasis and code marks removed, HTML tags and template
//! tags (`{% … %}`, `{{ … }}`) dropped. A table row becomes one self-describing line that names
//! its header cells (`Header: value, Header: value`), so a row quoted alone still says what its
//! values are.

use pulldown_cmark::{BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

use crate::text::is_cjk;

/// Stands for a soft line break until its neighbours are known: nothing between two CJK
/// characters (a wrapped Chinese sentence), a space elsewhere.
const SOFT_BREAK: char = '\u{E000}';

/// Renders a Markdown block (or several) as plain text: one line per paragraph, list item, table
/// row or code line.
pub fn markdown_to_plain(markdown: &str) -> String {
    let source = strip_template_tags(markdown);
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let parser = Parser::new_with_broken_link_callback(&source, options, Some(keep_reference_text));
    let mut writer = Writer::default();
    for event in parser {
        writer.event(event);
    }
    writer.finish()
}

/// Renders one line of inline Markdown (a heading or a title) as plain text on one line.
pub fn inline_to_plain(markdown: &str) -> String {
    // As the text of an ATX heading it is parsed inline only: `1. Scope` stays a heading text,
    // not a list.
    let line = markdown.replace(['\r', '\n'], " ");
    let plain = markdown_to_plain(&format!("# {}", line.trim()));
    plain.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `[text][label]` whose definition lies in another chunk of the file is still a link: keep its
/// text rather than the brackets. A bare `[text]` stays as written.
fn keep_reference_text<'a>(link: BrokenLink<'_>) -> Option<(CowStr<'a>, CowStr<'a>)> {
    match link.link_type {
        LinkType::Reference | LinkType::Collapsed => {
            Some((CowStr::Borrowed(""), CowStr::Borrowed("")))
        }
        _ => None,
    }
}

/// Drops `{% … %}` and `{{ … }}` template tags (Liquid, Jinja, Hugo): they are instructions to a
/// site generator, never text for a reader. An unclosed tag is left as written.
pub fn strip_template_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let open = [("{%", "%}"), ("{{", "}}")]
            .into_iter()
            .filter_map(|(o, c)| rest.find(o).map(|i| (i, o, c)))
            .min_by_key(|(i, _, _)| *i);
        let Some((start, open, close)) = open else {
            out.push_str(rest);
            return out;
        };
        match rest[start + open.len()..].find(close) {
            Some(end) => {
                out.push_str(&rest[..start]);
                rest = &rest[start + open.len() + end + close.len()..];
            }
            None => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Collects plain text from parser events.
#[derive(Default)]
struct Writer {
    /// Finished lines.
    lines: Vec<String>,
    /// The line being written.
    line: String,
    /// Counters of the open lists (`None` for a bullet list).
    lists: Vec<Option<u64>>,
    table: Option<Table>,
    /// Raw HTML of the open HTML block (its tags are dropped once it is complete).
    html_block: Option<String>,
    in_code_block: bool,
}

#[derive(Default)]
struct Table {
    header: Vec<String>,
    row: Vec<String>,
    cell: String,
    in_head: bool,
    rows: Vec<String>,
}

impl Writer {
    fn text(&mut self, s: &str) {
        match &mut self.table {
            Some(t) => t.cell.push_str(s),
            None => self.line.push_str(s),
        }
    }

    fn end_line(&mut self) {
        let line = resolve_soft_breaks(&self.line);
        let line = line.trim_end();
        if !line.trim().is_empty() {
            self.lines.push(line.to_string());
        }
        self.line.clear();
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some(html) = &mut self.html_block {
            match event {
                Event::End(TagEnd::HtmlBlock) => {
                    let text = strip_html(html);
                    self.html_block = None;
                    for line in text.lines() {
                        self.line.push_str(line.trim());
                        self.end_line();
                    }
                }
                Event::Html(s) | Event::Text(s) => html.push_str(&s),
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(s) => {
                if self.in_code_block {
                    // Code keeps its lines.
                    let mut parts = s.split('\n').peekable();
                    while let Some(part) = parts.next() {
                        self.line.push_str(part);
                        if parts.peek().is_some() {
                            self.end_line();
                        }
                    }
                } else {
                    self.text(&s);
                }
            }
            Event::Code(s) | Event::InlineMath(s) | Event::DisplayMath(s) => self.text(&s),
            Event::InlineHtml(s) | Event::Html(s) => {
                let text = strip_html(&s);
                self.text(&text);
            }
            Event::SoftBreak => self.text(&SOFT_BREAK.to_string()),
            Event::HardBreak => {
                if self.table.is_some() {
                    self.text(" ");
                } else {
                    self.end_line();
                }
            }
            Event::FootnoteReference(_) | Event::Rule | Event::TaskListMarker(_) => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::HtmlBlock => {
                self.end_line();
                self.html_block = Some(String::new());
            }
            Tag::CodeBlock(_) => {
                self.end_line();
                self.in_code_block = true;
            }
            Tag::List(start) => {
                self.end_line();
                self.lists.push(start);
            }
            Tag::Item => {
                self.end_line();
                if let Some(Some(n)) = self.lists.last_mut() {
                    self.line.push_str(&format!("{n}. "));
                    *n += 1;
                }
            }
            Tag::Table(_) => {
                self.end_line();
                self.table = Some(Table::default());
            }
            Tag::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = true;
                }
            }
            Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.row.clear();
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.cell.clear();
                }
            }
            Tag::Paragraph
            | Tag::Heading { .. }
            | Tag::BlockQuote(_)
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition => self.end_line(),
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. }
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::CodeBlock => {
                self.end_line();
                self.in_code_block = false;
            }
            TagEnd::List(_) => {
                self.end_line();
                self.lists.pop();
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table {
                    let cell = collapse(&resolve_soft_breaks(&t.cell));
                    if t.in_head {
                        t.header.push(cell);
                    } else {
                        t.row.push(cell);
                    }
                    t.cell.clear();
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = false;
                }
            }
            TagEnd::TableRow => {
                if let Some(t) = &mut self.table {
                    let row = describe_row(&t.header, &t.row);
                    t.rows.push(row);
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    if t.rows.iter().all(|r| r.is_empty()) {
                        // A header without rows is still text.
                        self.lines.push(t.header.join(" "));
                    }
                    self.lines
                        .extend(t.rows.into_iter().filter(|r| !r.is_empty()));
                }
            }
            TagEnd::Paragraph
            | TagEnd::Heading(_)
            | TagEnd::BlockQuote(_)
            | TagEnd::Item
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition => self.end_line(),
            TagEnd::HtmlBlock
            | TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    fn finish(mut self) -> String {
        self.end_line();
        self.lines.join("\n")
    }
}

/// `Header: value, Header: value` (full-width `：` and `，` for a Chinese header); cells left
/// empty are left out, and a cell without a header is given alone.
pub(super) fn describe_row(header: &[String], cells: &[String]) -> String {
    let cjk = header.iter().any(|h| h.chars().any(is_cjk));
    let (colon, comma) = if cjk { ("：", "，") } else { (": ", ", ") };
    cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(i, c)| match header.get(i).filter(|h| !h.is_empty()) {
            Some(h) => format!("{h}{colon}{c}"),
            None => c.clone(),
        })
        .collect::<Vec<_>>()
        .join(comma)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn resolve_soft_breaks(s: &str) -> String {
    if !s.contains(SOFT_BREAK) {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        if c != SOFT_BREAK {
            out.push(c);
            continue;
        }
        let before = chars[..i].iter().rev().find(|c| !c.is_whitespace());
        let after = chars[i + 1..].iter().find(|c| !c.is_whitespace());
        let joins_cjk = before.is_some_and(|c| is_cjk(*c)) && after.is_some_and(|c| is_cjk(*c));
        if !joins_cjk && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out
}

/// Drops HTML tags and comments, keeping the text between them. Tags that break text apart
/// (`<br>`, `<p>`, `<td>`…) leave a space; inline ones (`<a>`, `<b>`…) leave nothing. A `<`
/// that starts no tag (`a < b`) is text.
fn strip_html(html: &str) -> String {
    const INLINE: &[&str] = &[
        "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "i", "kbd", "mark",
        "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "del",
        "ins",
    ];
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(comment) = after.strip_prefix("!--") {
            rest = match comment.find("-->") {
                Some(end) => &comment[end + 3..],
                None => "",
            };
            continue;
        }
        let name: String = after
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let starts_tag = after
            .trim_start_matches('/')
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '!' || c == '?');
        match after.find('>') {
            Some(end) if starts_tag => {
                if !INLINE.contains(&name.to_ascii_lowercase().as_str()) {
                    out.push(' ');
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    decode_entities(&out)
}

/// The few character references raw HTML commonly holds (the parser decodes them elsewhere).
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_their_text_and_lose_their_targets() {
        let md = "Use [Docusign templates]({% page \"/tools/digital-signatures#use\" %}) or \
                  [OPM Form 630](https://www.opm.gov/forms/opm630.pdf), see <https://x.gov>.";
        assert_eq!(
            markdown_to_plain(md),
            "Use Docusign templates or OPM Form 630, see https://x.gov."
        );
    }

    #[test]
    fn emphasis_code_and_html_are_dropped() {
        let md = "Select the **Register Now** button, *not* `Cancel`.\n\
                  Use this <a href=\"https://d.example/x\">leave chart</a> to see.<br>Done.";
        assert_eq!(
            markdown_to_plain(md),
            "Select the Register Now button, not Cancel. Use this leave chart to see. Done."
        );
        assert_eq!(markdown_to_plain("<!-- hidden -->\n\nshown"), "shown");
        assert_eq!(markdown_to_plain("a < b and c > d"), "a < b and c > d");
    }

    #[test]
    fn template_tags_are_dropped() {
        let md = "{% alert %}\n  Text inside.\n{% endalert %}\n\n- {% slack_channel \"#ops\" %} \
                  or [Software]({{site.base_url}}/software/)";
        assert_eq!(markdown_to_plain(md), "Text inside.\nor Software");
        assert_eq!(strip_template_tags("a {% unclosed"), "a {% unclosed");
    }

    #[test]
    fn lists_give_one_line_per_item_and_keep_step_numbers() {
        let md = "1. Complete the form.\n2. Gather the documents:\n   - Nature\n   - Prognosis\n";
        assert_eq!(
            markdown_to_plain(md),
            "1. Complete the form.\n2. Gather the documents:\nNature\nPrognosis"
        );
    }

    #[test]
    fn wrapped_lines_join_with_a_space_or_nothing_between_chinese_characters() {
        assert_eq!(
            markdown_to_plain("高铁票须提供\n报销凭证。\nKeep the\ninvoice."),
            "高铁票须提供报销凭证。 Keep the invoice."
        );
    }

    #[test]
    fn table_rows_name_their_header_cells() {
        let md = "| 累计工作年限 | 法定年假天数 |\n|---|---|\n| 满1年不满10年 | 5天 |\n| 满10年不满20年 | 10天 |";
        assert_eq!(
            markdown_to_plain(md),
            "累计工作年限：满1年不满10年，法定年假天数：5天\n累计工作年限：满10年不满20年，法定年假天数：10天"
        );
        let md = "| Location | Address | Guide |\n| --- | --- | --- |\n\
                  | **Chicago, IL** | [230 S. Dearborn St.](https://g.gov/1) | [Office Guide]({% page \"/chicago\" %}) |\n\
                  | Remote | | |";
        assert_eq!(
            markdown_to_plain(md),
            "Location: Chicago, IL, Address: 230 S. Dearborn St., Guide: Office Guide\nLocation: Remote"
        );
    }

    #[test]
    fn code_blocks_keep_their_lines() {
        assert_eq!(
            markdown_to_plain("```\n## not a heading\nline 2\n```"),
            "## not a heading\nline 2"
        );
    }

    #[test]
    fn headings_lose_their_markup() {
        assert_eq!(inline_to_plain("**Resources**"), "Resources");
        assert_eq!(
            inline_to_plain("Role of the [LRAC](https://docs.example/d#h)"),
            "Role of the LRAC"
        );
        assert_eq!(inline_to_plain("1. Scope"), "1. Scope");
        assert_eq!(inline_to_plain("交通费"), "交通费");
        assert_eq!(inline_to_plain("C# & F#"), "C# & F#");
    }
}
