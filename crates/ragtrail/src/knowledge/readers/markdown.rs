//! Markdown and plain text: front matter at the top, `#` headings (Markdown only), blocks
//! rendered to plain text by the CommonMark parser (see `knowledge::plain`).

use std::borrow::Cow;

use super::{ReadDocument, ReadError, Reader};
use crate::knowledge::chunker::{first_h1, markdown_sections};
use crate::knowledge::plain::inline_to_plain;
use crate::knowledge::split_front_matter;

pub(super) struct MarkdownReader {
    /// False for `.txt`: a `#` at the start of a line is text, not a heading.
    pub markdown: bool,
}

impl Reader for MarkdownReader {
    fn read(&self, source: &str, bytes: &[u8]) -> Result<ReadDocument, ReadError> {
        let text = text_of(bytes)?;
        let (fm, body, _) = split_front_matter(source, &text)?;
        let title = fm
            .title
            .clone()
            .filter(|t| !t.trim().is_empty())
            .or_else(|| if self.markdown { first_h1(body) } else { None })
            .unwrap_or_else(|| file_stem(source));
        let title = if self.markdown {
            inline_to_plain(&title)
        } else {
            title.trim().to_string()
        };
        let sections = markdown_sections(body, &title, self.markdown);
        Ok(ReadDocument {
            title: Some(title),
            meta: fm,
            sections,
        })
    }
}

/// The file name without its extension: the title of a file that names none.
pub(super) fn file_stem(source: &str) -> String {
    let name = source.rsplit('/').next().unwrap_or(source);
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_string(),
        _ => name.to_string(),
    }
}

/// The bytes as UTF-8 text, or why not: binary content, another encoding (a GBK/GB18030 file is
/// named as such, with the command that converts it), nothing but whitespace.
pub(super) fn utf8_text(bytes: &[u8]) -> Result<&str, ReadError> {
    if bytes.contains(&0) {
        return Err(ReadError::Unreadable("binary content (NUL bytes)".into()));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        let hint = if looks_like_gb18030(bytes) {
            "; it reads as GBK/GB18030: convert it with `iconv -f GB18030 -t UTF-8`"
        } else {
            ""
        };
        ReadError::Unreadable(format!(
            "not UTF-8 text (invalid byte at offset {offset}){hint}"
        ))
    })?;
    if text.trim_start_matches('\u{feff}').trim().is_empty() {
        return Err(ReadError::Unreadable("empty file".into()));
    }
    Ok(text)
}

/// A Markdown or text file's text: UTF-8 (a BOM is dropped with the front matter), or, when the
/// bytes are not UTF-8 but decode as GB18030 without an error and mostly to CJK characters, that
/// (Chinese policies saved by older Windows editors are GBK, and these files declare no
/// charset). Anything else is refused by [`utf8_text`] with its reason.
fn text_of(bytes: &[u8]) -> Result<Cow<'_, str>, ReadError> {
    match utf8_text(bytes) {
        Ok(text) => Ok(Cow::Borrowed(text)),
        // Binary content (NUL bytes) stays refused, whatever it would decode to.
        Err(e)
            if !bytes.contains(&0)
                && std::str::from_utf8(bytes).is_err()
                && looks_like_gb18030(bytes) =>
        {
            let (text, _) = encoding_rs::GB18030.decode_without_bom_handling(bytes);
            if text.trim().is_empty() {
                return Err(e);
            }
            Ok(Cow::Owned(text.into_owned()))
        }
        Err(e) => Err(e),
    }
}

/// Whether the bytes decode as GB18030 without an error and mostly to CJK characters (a guess
/// confident enough to decode a file that declares no charset).
fn looks_like_gb18030(bytes: &[u8]) -> bool {
    let (text, had_errors) = encoding_rs::GB18030
        .decode_without_bom_handling_and_without_replacement(bytes)
        .map_or((Default::default(), true), |t| (t, false));
    if had_errors {
        return false;
    }
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return false;
    }
    let non_ascii: Vec<char> = text.chars().filter(|c| !c.is_ascii()).collect();
    !non_ascii.is_empty()
        && non_ascii
            .iter()
            .filter(|c| {
                crate::text::is_cjk(**c)
                    || ('\u{3000}'..='\u{303f}').contains(*c)
                    || ('\u{ff00}'..='\u{ffef}').contains(*c)
            })
            .count()
            * 10
            >= non_ascii.len() * 9
}
