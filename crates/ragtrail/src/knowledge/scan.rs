//! Walking a knowledge folder: which files are read, which are skipped (and why).

use std::path::{Path, PathBuf};

use super::chunker::first_h1;
use super::plain::inline_to_plain;
use super::{
    Chunk, ChunkLimits, DocStatus, Document, KnowledgeError, chunk_document, sha256_hex,
    split_front_matter,
};
use crate::access::DEFAULT_TENANT;

/// What a scan reads.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
    pub limits: ChunkLimits,
    /// Where a document that names no tenant goes.
    pub default_access: DefaultAccess,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: 5 * 1024 * 1024,
            limits: ChunkLimits::default(),
            default_access: DefaultAccess::DefaultTenant,
        }
    }
}

/// The operator's rule for a document without a `tenant:` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultAccess {
    /// It belongs to [`DEFAULT_TENANT`] (a single-tenant knowledge base needs no front matter).
    #[default]
    DefaultTenant,
    /// It is an error, so a multi-tenant folder cannot gain a document everyone in the default
    /// tenant may read because its author forgot the key.
    Deny,
}

/// A file that was not ingested, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
}

/// Every document and chunk of a folder, plus the files skipped.
#[derive(Debug, Default)]
pub struct ScanReport {
    pub documents: Vec<Document>,
    pub chunks: Vec<Chunk>,
    pub skipped: Vec<SkippedFile>,
}

fn is_knowledge_file(path: &Path) -> Option<bool> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "md" | "markdown" => Some(true),
        "txt" => Some(false),
        _ => None,
    }
}

/// Reads every `.md` / `.txt` file under `root`, in path order.
pub fn scan(root: &Path, options: &ScanOptions) -> Result<ScanReport, KnowledgeError> {
    let display = root.display().to_string();
    if !root.exists() {
        return Err(KnowledgeError::MissingDir { path: display });
    }
    if !root.is_dir() {
        return Err(KnowledgeError::NotADir { path: display });
    }
    let mut report = ScanReport::default();
    let files = knowledge_files(root, &mut report.skipped);
    if files.is_empty() && report.skipped.is_empty() {
        return Err(KnowledgeError::EmptyDir { path: display });
    }
    for (path, markdown) in files {
        let source = relative_source(root, &path);
        match read_text(&path, options.max_file_bytes) {
            Ok(text) => {
                let (doc, chunks) =
                    parse_document(&source, &path, &text, markdown, options.limits)?;
                if doc.tenant_from_default && options.default_access == DefaultAccess::Deny {
                    return Err(KnowledgeError::FrontMatter {
                        file: source,
                        line: 1,
                        message: "the document names no `tenant:`, and the operator's default \
                                  access is deny (RAGTRAIL_DEFAULT_ACCESS=deny): every document \
                                  must name its tenant"
                            .to_string(),
                    });
                }
                let doc = doc.document;
                if chunks.is_empty() {
                    report.skipped.push(SkippedFile {
                        path: source,
                        reason: "no text after the front matter".into(),
                    });
                    continue;
                }
                report.documents.push(doc);
                report.chunks.extend(chunks);
            }
            Err(reason) => report.skipped.push(SkippedFile {
                path: source,
                reason,
            }),
        }
    }
    Ok(report)
}

/// The knowledge files under `root` (path, whether Markdown), in path order; entries that could
/// not be read go to `skipped`. Dot folders and dot files are left out.
pub(super) fn knowledge_files(root: &Path, skipped: &mut Vec<SkippedFile>) -> Vec<(PathBuf, bool)> {
    let display = root.display().to_string();
    let mut files: Vec<(PathBuf, bool)> = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        match entry {
            Ok(e) if e.file_type().is_file() => {
                if let Some(markdown) = is_knowledge_file(e.path()) {
                    files.push((e.into_path(), markdown));
                }
            }
            Ok(_) => {}
            Err(err) => skipped.push(SkippedFile {
                path: err
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| display.clone()),
                reason: format!("unreadable: {err}"),
            }),
        }
    }
    files
}

pub(super) fn relative_source(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads a file as UTF-8 text, or says why it cannot be ingested.
fn read_text(path: &Path, max_bytes: u64) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("unreadable: {e}"))?
        .len();
    if size > max_bytes {
        return Err(format!(
            "too large: {size} bytes, the limit is {max_bytes} (RAGTRAIL_MAX_FILE_BYTES)"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    if bytes.contains(&0) {
        return Err("binary content (NUL bytes)".into());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    if text.trim().is_empty() {
        return Err("empty file".into());
    }
    Ok(text)
}

/// Parses one file's text into its document record and chunks.
pub(crate) fn parse_document(
    source: &str,
    path: &Path,
    text: &str,
    markdown: bool,
    limits: ChunkLimits,
) -> Result<(ParsedDocument, Vec<Chunk>), KnowledgeError> {
    let (fm, body, _) = split_front_matter(source, text)?;
    let title = fm
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| if markdown { first_h1(body) } else { None })
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| source.to_string())
        });
    let tenant_from_default = fm.tenant.is_none();
    let title = if markdown {
        inline_to_plain(&title)
    } else {
        title.trim().to_string()
    };
    let doc = Document {
        source: source.to_string(),
        title,
        tenant: fm
            .tenant
            .clone()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_TENANT.to_string()),
        roles: fm.roles.clone(),
        version: fm.version.clone(),
        updated: fm.updated.clone(),
        status: fm.status.unwrap_or(DocStatus::Active),
        content_hash: sha256_hex(text.as_bytes()),
    };
    let chunks = chunk_document(&doc, body, markdown, limits);
    Ok((
        ParsedDocument {
            document: doc,
            tenant_from_default,
        },
        chunks,
    ))
}

/// A parsed document and whether its tenant came from the default (no `tenant:` key).
pub(crate) struct ParsedDocument {
    pub document: Document,
    pub tenant_from_default: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, bytes: &[u8]) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, bytes).expect("write");
    }

    #[test]
    fn reads_recursively_and_skips_bad_files_with_reasons() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "a/one.md",
            "---\ntitle: One\ntenant: acme\n---\n## S\n\ntext\n".as_bytes(),
        );
        write(dir.path(), "two.txt", b"plain text\n\nsecond paragraph\n");
        write(dir.path(), "bin.md", b"abc\0def");
        write(dir.path(), "empty.md", b"  \n");
        write(dir.path(), "latin1.md", &[0x63, 0x61, 0x66, 0xe9]);
        write(dir.path(), "big.md", &vec![b'a'; 2048]);
        write(dir.path(), "ignored.pdf", b"%PDF");
        write(dir.path(), ".hidden/x.md", b"## x\n\ny\n");
        let opts = ScanOptions {
            max_file_bytes: 1024,
            ..ScanOptions::default()
        };
        let report = scan(dir.path(), &opts).expect("scan");
        let sources: Vec<_> = report.documents.iter().map(|d| d.source.as_str()).collect();
        assert_eq!(sources, vec!["a/one.md", "two.txt"]);
        assert_eq!(report.documents[0].tenant, "acme");
        assert_eq!(report.documents[1].tenant, DEFAULT_TENANT);
        assert_eq!(report.documents[1].title, "two");
        let mut skipped: Vec<_> = report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.split(' ').next().unwrap_or("")))
            .collect();
        skipped.sort();
        assert_eq!(
            skipped,
            vec![
                ("big.md", "too"),
                ("bin.md", "binary"),
                ("empty.md", "empty"),
                ("latin1.md", "not")
            ]
        );
    }

    #[test]
    fn missing_and_empty_folders_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            scan(&dir.path().join("nope"), &ScanOptions::default()),
            Err(KnowledgeError::MissingDir { .. })
        ));
        assert!(matches!(
            scan(dir.path(), &ScanOptions::default()),
            Err(KnowledgeError::EmptyDir { .. })
        ));
        write(dir.path(), "f.md", b"x");
        assert!(matches!(
            scan(&dir.path().join("f.md"), &ScanOptions::default()),
            Err(KnowledgeError::NotADir { .. })
        ));
    }

    #[test]
    fn malformed_front_matter_stops_the_scan_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "hr/bad.md",
            b"---\ntitle: [unclosed\n---\nbody\n",
        );
        let err = scan(dir.path(), &ScanOptions::default()).expect_err("must fail");
        assert!(
            err.to_string()
                .starts_with("hr/bad.md:2: malformed front matter"),
            "{err}"
        );
    }
}
