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
    let plain = markdown_to_plain(&format!("# {}", without_attributes(line.trim())));
    plain.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A heading without its trailing attribute block (`## Set up {#set-up-phase}`, `{.note}`,
/// `{#id .class key=value}`: kramdown, Pandoc and Markdown Extra name a heading's anchor that
/// way). Braces holding anything else are the heading's words and stay.
fn without_attributes(heading: &str) -> &str {
    split_attributes(heading).map_or(heading, |(words, _)| words)
}

/// The anchor a heading names for itself in its attribute block (`{#set-up-phase}`), if any.
pub(crate) fn heading_id(heading: &str) -> Option<&str> {
    let (_, block) = split_attributes(heading.trim())?;
    block.split_whitespace().find_map(|t| t.strip_prefix('#'))
}

/// A heading's words and its trailing attribute block's inside, when it ends in one.
fn split_attributes(heading: &str) -> Option<(&str, &str)> {
    let open = heading.strip_suffix('}')?.rfind('{')?;
    let block = &heading[open + 1..heading.len() - 1];
    let words = heading[..open].trim_end();
    let attribute = |t: &str| (t.len() > 1 && t.starts_with(['#', '.'])) || t.contains('=');
    let is_block =
        block.split_whitespace().next().is_some() && block.split_whitespace().all(attribute);
    (is_block && !words.is_empty()).then_some((words, block))
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

/// Drops template tags (Liquid, Jinja, Hugo: `{% … %}`, `{{ … }}`, `{# … #}`): they are
/// instructions to a site generator, never text for a reader. What they stand for is kept where
/// the tag says it: a comment (`{% comment %}…{% endcomment %}`, `{# … #}`) goes with its
/// content, `{% raw %}…{% endraw %}` keeps its content as written, and an inline tag whose
/// arguments are quoted names (`{% slack_channel "equipment" %}`) shows its last one, as the
/// page would show something in its place ("Inform equipment.", not "Inform ."). A tag left
/// unclosed is text, as written; a comment left unclosed loses its tag alone.
pub fn strip_template_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let open = [("{%", "%}"), ("{{", "}}"), ("{#", "#}")]
            .into_iter()
            .filter_map(|(o, c)| rest.find(o).map(|i| (i, o, c)))
            .min_by_key(|(i, _, _)| *i);
        let Some((start, open, close)) = open else {
            out.push_str(rest);
            return out;
        };
        let Some(end) = rest[start + open.len()..].find(close) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        let inner = &rest[start + open.len()..start + open.len() + end];
        rest = &rest[start + open.len() + end + close.len()..];
        if open != "{%" {
            tidy_gap(&mut out, rest);
            continue;
        }
        let (name, args) = tag_parts(inner);
        match name {
            "comment" => {
                if let Some((_, after_end)) = closing_tag(rest, "endcomment") {
                    rest = after_end;
                }
            }
            "raw" => {
                if let Some((content, after_end)) = closing_tag(rest, "endraw") {
                    out.push_str(content);
                    rest = after_end;
                    continue;
                }
            }
            _ => {
                // A block's arguments (`{% alert "warning" %}…{% endalert %}`) say how to show
                // its content, which is kept.
                let shown = quoted_names(args).and_then(|names| names.last().copied());
                if let Some(shown) =
                    shown.filter(|_| closing_tag(rest, &format!("end{name}")).is_none())
                {
                    out.push_str(shown);
                    continue;
                }
            }
        }
        tidy_gap(&mut out, rest);
    }
}

/// A tag's name and the rest of its text, whitespace control marks (`{%-`, `-%}`) left out.
fn tag_parts(inner: &str) -> (&str, &str) {
    let inner = inner.trim().trim_matches('-').trim();
    match inner.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (inner, ""),
    }
}

/// The text before the first `{% name %}` tag of `text`, and the text after that tag.
fn closing_tag<'t>(text: &'t str, name: &str) -> Option<(&'t str, &'t str)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("{%") {
        let open = from + i;
        let close = open + 2 + text[open + 2..].find("%}")?;
        if tag_parts(&text[open + 2..close]).0 == name {
            return Some((&text[..open], &text[close + 2..]));
        }
        from = close + 2;
    }
    None
}

/// A tag's arguments when every one is a quoted name (letters, digits, spaces, `-`, `_`, `#`):
/// a label or a channel, never a path (`"/software/"`) or a file (`"low-system.html"`).
fn quoted_names(args: &str) -> Option<Vec<&str>> {
    let mut names = Vec::new();
    let mut rest = args.trim();
    while !rest.is_empty() {
        let quote = rest.chars().next().filter(|c| matches!(c, '"' | '\''))?;
        let end = rest[1..].find(quote)? + 1;
        let name = rest[1..end].trim();
        let plain = name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '#'));
        if name.is_empty() || !plain {
            return None;
        }
        names.push(name);
        rest = rest[end + 1..].trim_start();
    }
    (!names.is_empty()).then_some(names)
}

/// Where a dropped tag stood before punctuation or a line's end, the space before it goes too:
/// "Inform ." read as a fragment.
fn tidy_gap(out: &mut String, rest: &str) {
    if rest.is_empty() || rest.starts_with(['.', ',', ';', ':', '!', '?', ')', '\n', '\r']) {
        let kept = out.trim_end_matches([' ', '\t']).len();
        out.truncate(kept);
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
        let mut line = resolve_soft_breaks(&self.line);
        if !self.in_code_block {
            line = single_spaced(&line);
        }
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

/// Prose with each run of spaces inside a line made one: a double space the source typed, or
/// one left by a dropped tag, is no part of what a quote says. Leading spaces stay.
fn single_spaced(line: &str) -> String {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let mut out = String::with_capacity(line.len());
    out.push_str(&line[..indent]);
    for c in line[indent..].chars() {
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
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
        let md = "{% alert %}\n  Text inside.\n{% endalert %}\n\n- {% include \"low.html\" %} \
                  or [Software]({{site.base_url}}/software/)";
        assert_eq!(markdown_to_plain(md), "Text inside.\nor Software");
        // The spaces around a dropped tag become one, in prose; code keeps its own.
        assert_eq!(
            markdown_to_plain("Post in  {% include \"x.html\" %}  or email.\n\n```\na  b\n```"),
            "Post in or email.\na  b"
        );
        assert_eq!(strip_template_tags("a {% unclosed"), "a {% unclosed");
        // No space left before the punctuation that followed a dropped tag.
        assert_eq!(
            strip_template_tags("Ask {{ site.team }}. Or {%- include 'x.html' -%}, here."),
            "Ask. Or, here."
        );
    }

    #[test]
    fn a_heading_loses_its_attribute_block_but_not_words_in_braces() {
        assert_eq!(inline_to_plain("Set up {#set-up-phase}"), "Set up");
        assert_eq!(
            inline_to_plain("Side nav {#side-nav .wide data-x=1}"),
            "Side nav"
        );
        assert_eq!(inline_to_plain("Fees {in CNY}"), "Fees {in CNY}");
        assert_eq!(inline_to_plain("{#only}"), "{#only}");
        assert_eq!(
            heading_id("Set up {#set-up-phase .wide}"),
            Some("set-up-phase")
        );
        assert_eq!(heading_id("Set up {.wide}"), None);
        assert_eq!(heading_id("Fees {in CNY}"), None);
    }

    #[test]
    fn a_tag_naming_something_shows_the_name_and_comments_go_whole() {
        let md = "1. Inform {% slack_channel \"equipment\" %}.\n\
                  2. Post in {% slack_channel \"people-ops\" \"People Ops\" %} or \
                  [email us]({% page \"/contact/\" %}).";
        assert_eq!(
            markdown_to_plain(md),
            "1. Inform equipment.\n2. Post in People Ops or email us."
        );
        // Comments leave nothing, their content included; an unclosed one loses its tag alone.
        assert_eq!(
            strip_template_tags(
                "- Run it {% comment %}TODO link{% endcomment %}{# note #}\n- Next"
            ),
            "- Run it\n- Next"
        );
        assert_eq!(strip_template_tags("a {% comment %} kept"), "a  kept");
        // `raw` shows its content as written, tags in it included.
        assert_eq!(
            strip_template_tags("Write {% raw %}{% page \"/x/\" %}{% endraw %} in links."),
            "Write {% page \"/x/\" %} in links."
        );
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
