//! Walking a knowledge folder: which files are read, by which reader, which are skipped (and
//! why). Nothing is skipped silently: every file the folder holds is either read, or named in
//! [`ScanReport::skipped`] with its reason, and counted per format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::chunker::chunk_sections;
use super::front_matter::parse_sidecar;
use super::readers::{self, Format, ReadError};
use super::{Chunk, ChunkLimits, DocStatus, Document, FrontMatter, KnowledgeError, sha256_hex};
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

/// How many files of one format were read and skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormatCount {
    pub read: usize,
    pub skipped: usize,
}

/// The name files of a type ingest does not read are counted under.
pub const OTHER_FORMAT: &str = "other";

/// Every document and chunk of a folder, plus the files skipped.
#[derive(Debug, Default)]
pub struct ScanReport {
    pub documents: Vec<Document>,
    pub chunks: Vec<Chunk>,
    pub skipped: Vec<SkippedFile>,
    /// Files read and skipped, by format name (`markdown`, `pdf`…, and `other`).
    pub formats: BTreeMap<String, FormatCount>,
}

/// A file of the folder: one ingest reads (with its sidecars), or one it does not (with the
/// reason).
pub(super) enum FolderFile {
    Knowledge(PathBuf, Format, Vec<PathBuf>),
    Unsupported(PathBuf, String),
}

/// The extensions ingest reads, for messages.
const READ_EXTENSIONS: &str = ".md, .txt, .html, .htm, .docx, .pdf";

/// Reads every knowledge file under `root`, in path order.
pub fn scan(root: &Path, options: &ScanOptions) -> Result<ScanReport, KnowledgeError> {
    scan_with_progress(root, options, &mut |_, _, _| {})
}

/// [`scan`], calling `on_page(file, pages_done, pages)` as a long file's pages are read (PDF).
pub fn scan_with_progress(
    root: &Path,
    options: &ScanOptions,
    on_page: &mut dyn FnMut(&str, usize, usize),
) -> Result<ScanReport, KnowledgeError> {
    let display = root.display().to_string();
    if !root.exists() {
        return Err(KnowledgeError::MissingDir { path: display });
    }
    if !root.is_dir() {
        return Err(KnowledgeError::NotADir { path: display });
    }
    let mut report = ScanReport::default();
    let files = folder_files(root, &mut report.skipped);
    let readable = files
        .iter()
        .filter(|f| matches!(f, FolderFile::Knowledge(..)))
        .count();
    if readable == 0 && report.skipped.is_empty() {
        return Err(KnowledgeError::EmptyDir { path: display });
    }
    for file in files {
        let (path, format, sidecars) = match file {
            FolderFile::Knowledge(path, format, sidecars) => (path, format, sidecars),
            FolderFile::Unsupported(path, reason) => {
                report.count(OTHER_FORMAT, false);
                report.skipped.push(SkippedFile {
                    path: relative_source(root, &path),
                    reason,
                });
                continue;
            }
        };
        let source = relative_source(root, &path);
        let sidecars: Vec<(PathBuf, String)> = sidecars
            .into_iter()
            .map(|p| {
                let name = relative_source(root, &p);
                (p, name)
            })
            .collect();
        match read_file(&path, &source, format, &sidecars, options, on_page)? {
            Ok((doc, chunks)) => {
                report.count(format.name(), true);
                report.documents.push(doc);
                report.chunks.extend(chunks);
            }
            Err(reason) => {
                report.count(format.name(), false);
                report.skipped.push(SkippedFile {
                    path: source,
                    reason,
                });
            }
        }
    }
    Ok(report)
}

impl ScanReport {
    fn count(&mut self, format: &str, read: bool) {
        let count = self.formats.entry(format.to_string()).or_default();
        if read {
            count.read += 1;
        } else {
            count.skipped += 1;
        }
    }
}

/// Reads one file with its format's reader: the document and its chunks, or why it is skipped
/// (`Ok(Err(reason))`). Malformed front matter (in the file, its `<meta>` or its sidecar), two
/// sidecars for one file and a document without a tenant under deny-by-default stop the scan.
fn read_file(
    path: &Path,
    source: &str,
    format: Format,
    sidecars: &[(PathBuf, String)],
    options: &ScanOptions,
    on_page: &mut dyn FnMut(&str, usize, usize),
) -> Result<Result<(Document, Vec<Chunk>), String>, KnowledgeError> {
    let bytes = match read_bytes(path, options.max_file_bytes) {
        Ok(b) => b,
        Err(reason) => return Ok(Err(reason)),
    };
    let read = match readers::read_with_progress(format, source, &bytes, &mut |done, pages| {
        on_page(source, done, pages)
    }) {
        Ok(r) => r,
        Err(ReadError::Unreadable(reason)) => return Ok(Err(reason)),
        Err(ReadError::FrontMatter(e)) => return Err(e),
    };
    let sidecar = match sidecars {
        [] => None,
        [(sidecar, name)] => match read_sidecar(sidecar, name)? {
            Ok(s) => Some(s),
            Err(reason) => return Ok(Err(reason)),
        },
        [(_, first), (_, second), ..] => {
            return Err(KnowledgeError::FrontMatter {
                file: source.to_string(),
                line: 1,
                message: format!(
                    "two sidecars, {first} and {second}: keep one, so it is clear which decides \
                     who may read the document"
                ),
            });
        }
    };
    let content_hash = match &sidecar {
        None => sha256_hex(&bytes),
        Some((_, sidecar_bytes)) => {
            let mut all = bytes.clone();
            all.push(0x1e);
            all.extend_from_slice(sidecar_bytes);
            sha256_hex(&all)
        }
    };
    let fm = merge_front_matter(read.meta, sidecar.map(|(fm, _)| fm));
    if fm.tenant.is_none() && options.default_access == DefaultAccess::Deny {
        return Err(KnowledgeError::FrontMatter {
            file: source.to_string(),
            line: 1,
            message: format!(
                "the document names no `tenant:`{}, and the operator's default access is deny \
                 (RAGTRAIL_DEFAULT_ACCESS=deny): every document must name its tenant",
                match format {
                    Format::Markdown | Format::Text => {
                        format!(" (write it in its front matter, or in a sidecar {source}.yaml)")
                    }
                    Format::Html | Format::Docx | Format::Pdf => {
                        format!(" (write it in a sidecar {source}.yaml)")
                    }
                }
            ),
        });
    }
    // A title in front matter or a sidecar is written as a heading is (`Set up <em>before</em>
    // onboarding`, `**Draft**`): read as one, it names the document in every titlePath.
    let title = fm
        .title
        .as_deref()
        .map(super::plain::inline_to_plain)
        .filter(|t| !t.is_empty())
        .or(read.title)
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| source.to_string())
        });
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
        content_hash,
    };
    let chunks = chunk_sections(&doc, read.sections, options.limits);
    if chunks.is_empty() {
        let reason = match format {
            Format::Markdown | Format::Text => "no text after the front matter",
            Format::Html => "no text outside navigation, header, footer and scripts",
            Format::Docx => "no text in the document body",
            Format::Pdf => "no text on any page",
        };
        return Ok(Err(reason.to_string()));
    }
    Ok(Ok((doc, chunks)))
}

/// A sidecar (`policy.pdf.yaml`, `.yml`, any case): its front matter and bytes; `name` is its
/// path relative to the knowledge root, for messages.
#[allow(clippy::type_complexity)]
fn read_sidecar(
    sidecar: &Path,
    name: &str,
) -> Result<Result<(FrontMatter, Vec<u8>), String>, KnowledgeError> {
    let bytes = match std::fs::read(sidecar) {
        Ok(b) => b,
        Err(e) => return Ok(Err(format!("its sidecar {name} is unreadable: {e}"))),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Ok(Err(format!("its sidecar {name} is not UTF-8 text")));
    };
    let fm = parse_sidecar(name, text)?;
    Ok(Ok((fm, bytes)))
}

/// The file a sidecar describes, when `path` is named like one: `NAME.EXT.yaml` (or `.yml`,
/// in any case) with `EXT` a format ingest reads.
fn described_by_sidecar(path: &Path) -> Option<PathBuf> {
    let ext = path.extension()?.to_str()?;
    if !(ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml")) {
        return None;
    }
    let described = path.with_extension("");
    Format::of(&described).map(|_| described)
}

/// The file's own metadata, overridden by its sidecar: a sidecar decides who may read the
/// document (tenant and roles together), and its other keys win where it gives them.
fn merge_front_matter(own: FrontMatter, sidecar: Option<FrontMatter>) -> FrontMatter {
    let Some(side) = sidecar else {
        return own;
    };
    FrontMatter {
        title: side.title.or(own.title),
        tenant: side.tenant,
        roles: side.roles,
        version: side.version.or(own.version),
        updated: side.updated.or(own.updated),
        status: side.status.or(own.status),
    }
}

/// Every file under `root`, in path order, as a knowledge file (with its sidecars) or an
/// unsupported one; entries that could not be read go to `skipped`. Dot folders and dot files
/// are left out. A sidecar belongs to its file, for every format; one whose file is missing is
/// unsupported, with that reason.
pub(super) fn folder_files(root: &Path, skipped: &mut Vec<SkippedFile>) -> Vec<FolderFile> {
    let display = root.display().to_string();
    let mut paths = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        match entry {
            Ok(e) if e.file_type().is_file() => paths.push(e.into_path()),
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
    let knowledge: std::collections::BTreeSet<&Path> = paths
        .iter()
        .filter(|p| Format::of(p).is_some())
        .map(PathBuf::as_path)
        .collect();
    let mut sidecars: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    let mut files = Vec::new();
    for path in &paths {
        if let Some(format) = Format::of(path) {
            files.push(FolderFile::Knowledge(path.clone(), format, Vec::new()));
            continue;
        }
        match described_by_sidecar(path) {
            Some(described) if knowledge.contains(described.as_path()) => {
                sidecars.entry(described).or_default().push(path.clone());
            }
            Some(described) => files.push(FolderFile::Unsupported(
                path.clone(),
                format!(
                    "a sidecar of {}, which is not in the folder",
                    relative_source(root, &described)
                ),
            )),
            None => {
                let ext = path
                    .extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_else(|| "no extension".to_string());
                files.push(FolderFile::Unsupported(
                    path.clone(),
                    format!("unsupported type ({ext}); ingest reads {READ_EXTENSIONS}"),
                ));
            }
        }
    }
    for file in &mut files {
        if let FolderFile::Knowledge(path, _, own) = file
            && let Some(found) = sidecars.remove(path.as_path())
        {
            *own = found;
        }
    }
    files
}

/// The knowledge files under `root` (the ones a scan reads), with their sidecars: what the
/// stale check stamps.
pub(super) fn knowledge_files(root: &Path, skipped: &mut Vec<SkippedFile>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for file in folder_files(root, skipped) {
        if let FolderFile::Knowledge(path, _, sidecars) = file {
            out.extend(sidecars);
            out.push(path);
        }
    }
    out
}

pub(super) fn relative_source(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads a file's bytes, or says why it cannot be ingested (too large, empty, unreadable).
fn read_bytes(path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("unreadable: {e}"))?
        .len();
    if size > max_bytes {
        return Err(format!(
            "too large: {size} bytes, the limit is {max_bytes} (RAGTRAIL_MAX_FILE_BYTES)"
        ));
    }
    if size == 0 {
        return Err("empty file (0 bytes)".into());
    }
    std::fs::read(path).map_err(|e| format!("unreadable: {e}"))
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
        write(dir.path(), "notes.rtf", b"{\\rtf1 notes}");
        write(dir.path(), ".hidden/x.md", b"## x\n\ny\n");
        let opts = ScanOptions {
            max_file_bytes: 1024,
            ..ScanOptions::default()
        };
        let report = scan(dir.path(), &opts).expect("scan");
        let sources: Vec<_> = report.documents.iter().map(|d| d.source.as_str()).collect();
        assert_eq!(sources, vec!["a/one.md", "two.txt"]);
        let counts: Vec<_> = report
            .formats
            .iter()
            .map(|(f, c)| (f.as_str(), c.read, c.skipped))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("markdown", 1, 4),
                ("other", 0, 1),
                ("pdf", 0, 1),
                ("text", 1, 0)
            ]
        );
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
                ("ignored.pdf", "broken"),
                ("latin1.md", "not"),
                ("notes.rtf", "unsupported"),
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

    #[test]
    fn a_sidecar_gives_a_binary_format_its_access_and_is_not_reported_as_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let html = "<html><head><title>Expenses</title></head><body><h2>Taxis</h2>\
                    <p>Keep the receipt.</p></body></html>";
        write(dir.path(), "p.html", html.as_bytes());
        write(
            dir.path(),
            "p.html.yaml",
            b"tenant: acme\nroles: [finance]\nversion: 3\n",
        );
        write(dir.path(), "orphan.yaml", b"tenant: acme\n");
        let report = scan(dir.path(), &ScanOptions::default()).expect("scan");
        assert_eq!(report.documents.len(), 1);
        let doc = &report.documents[0];
        assert_eq!(
            (
                doc.title.as_str(),
                doc.tenant.as_str(),
                doc.roles.clone(),
                doc.version.clone()
            ),
            (
                "Expenses",
                "acme",
                vec!["finance".to_string()],
                Some("3".to_string())
            )
        );
        assert_eq!(report.chunks[0].title_path, "Expenses / Taxis");
        assert_eq!(report.chunks[0].roles, vec!["finance"]);
        assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
        assert_eq!(report.skipped[0].path, "orphan.yaml");
        // The sidecar is part of the document: editing it changes the document's hash.
        let before = doc.content_hash.clone();
        write(dir.path(), "p.html.yaml", b"tenant: acme\nroles: [hr]\n");
        let again = scan(dir.path(), &ScanOptions::default()).expect("scan");
        assert_ne!(again.documents[0].content_hash, before);
    }

    #[test]
    fn a_miscased_access_key_in_a_sidecar_or_a_meta_tag_stops_the_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "p.html", b"<title>T</title><p>text</p>");
        write(dir.path(), "p.html.yaml", b"Tenant: acme\n");
        let err = scan(dir.path(), &ScanOptions::default()).expect_err("must fail");
        assert!(
            err.to_string()
                .starts_with("p.html.yaml:1: malformed front matter: unknown key `Tenant`"),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "q.html",
            b"<meta name=\"Roles\" content=\"hr\"><title>T</title><p>text</p>",
        );
        let err = scan(dir.path(), &ScanOptions::default()).expect_err("must fail");
        assert!(err.to_string().contains("unknown key `Roles`"), "{err}");
    }

    #[test]
    fn access_is_applied_for_every_format_and_never_indexed_as_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "notes.txt", b"Bonus pool figures for 2026.\n");
        write(
            dir.path(),
            "notes.txt.yaml",
            b"tenant: globex\nroles: [hr]\n",
        );
        write(
            dir.path(),
            "guide.md",
            b"---\ntitle: Guide\ntenant: acme\n---\n## Pay\n\nSalary bands.\n",
        );
        write(
            dir.path(),
            "guide.md.yml",
            b"tenant: globex\nroles: [finance]\n",
        );
        write(
            dir.path(),
            "UPPER.HTML",
            b"<title>U</title><p>Upper page.</p>",
        );
        write(dir.path(), "UPPER.HTML.YAML", b"tenant: globex\n");
        write(
            dir.path(),
            "page.html",
            b"\n---\ntenant: globex\nroles: [hr]\n---\n<html><head><title>Pay</title></head>\
              <body><p>Salary review dates.</p></body></html>",
        );
        write(dir.path(), "gone.pdf.yaml", b"tenant: globex\n");
        let report = scan(dir.path(), &ScanOptions::default()).expect("scan");
        let access: Vec<_> = report
            .documents
            .iter()
            .map(|d| (d.source.as_str(), d.tenant.as_str(), d.roles.join(",")))
            .collect();
        assert_eq!(
            access,
            vec![
                ("UPPER.HTML", "globex", String::new()),
                ("guide.md", "globex", "finance".to_string()),
                ("notes.txt", "globex", "hr".to_string()),
                ("page.html", "globex", "hr".to_string()),
            ]
        );
        assert!(
            report
                .chunks
                .iter()
                .all(|c| !c.text.contains("tenant") && !c.text.contains("roles")),
            "{:?}",
            report.chunks
        );
        let skipped: Vec<_> = report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            skipped,
            vec![(
                "gone.pdf.yaml",
                "a sidecar of gone.pdf, which is not in the folder"
            )]
        );
        // The sidecar of a text file is part of it: editing it changes the document's hash.
        let before = report.documents[2].content_hash.clone();
        write(
            dir.path(),
            "notes.txt.yaml",
            b"tenant: globex\nroles: [legal]\n",
        );
        let again = scan(dir.path(), &ScanOptions::default()).expect("scan");
        assert_ne!(again.documents[2].content_hash, before);
    }

    #[test]
    fn access_that_cannot_be_applied_stops_the_scan_naming_the_file() {
        for (files, says) in [
            (
                &[
                    ("a.html", &b"<title>A</title><p>text</p>"[..]),
                    ("a.html.yaml", b"tenant: acme\n"),
                    ("a.html.yml", b"tenant: globex\n"),
                ][..],
                "a.html:1: malformed front matter: two sidecars, a.html.yaml and a.html.yml",
            ),
            (
                &[(
                    "m.html",
                    &b"<meta name=roles value=hr><title>M</title><p>text</p>"[..],
                )],
                "m.html:1: malformed front matter: `<meta name=\"roles\">` has no `content`",
            ),
            (
                &[(
                    "b.html",
                    &b"---\ntenant: acme\n---\n<meta name=tenant content=globex><p>text</p>"[..],
                )],
                "b.html:1: malformed front matter: the `---` block and the `<meta>` tags give",
            ),
            (
                &[("t.txt", &b"+++\ntenant = \"globex\"\n+++\nbody\n"[..])],
                "t.txt:1: malformed front matter: TOML front matter",
            ),
            (
                &[
                    ("s.txt", &b"body\n"[..]),
                    ("s.txt.yaml", b"meta: {roles: [hr]}\n"),
                ],
                "s.txt.yaml:1: malformed front matter: `meta` holds `roles`",
            ),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            for (name, bytes) in files {
                write(dir.path(), name, bytes);
            }
            let err = scan(dir.path(), &ScanOptions::default()).expect_err(says);
            assert!(err.to_string().starts_with(says), "{err}");
        }
    }

    #[test]
    fn deny_by_default_asks_a_binary_format_for_a_sidecar() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "p.html", b"<title>T</title><p>text</p>");
        let opts = ScanOptions {
            default_access: DefaultAccess::Deny,
            ..ScanOptions::default()
        };
        let err = scan(dir.path(), &opts).expect_err("must fail");
        assert!(err.to_string().contains("sidecar p.html.yaml"), "{err}");
        write(dir.path(), "p.html.yaml", b"tenant: acme\n");
        assert_eq!(
            scan(dir.path(), &opts).expect("scan").documents[0].tenant,
            "acme"
        );
    }

    #[test]
    fn gbk_text_is_decoded_other_bytes_are_named_and_a_bom_is_not_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (gbk, _, _) = encoding_rs::GBK.encode("## 年假\n\n员工每年享有五天年假。\n");
        write(dir.path(), "gbk.md", &gbk);
        write(dir.path(), "latin1.md", b"Caf\xe9 cr\xe8me on Fridays.\n");
        write(
            dir.path(),
            "bom.md",
            "\u{feff}# 标题\n\n正文。\n".as_bytes(),
        );
        write(dir.path(), "empty.html", b"");
        let report = scan(dir.path(), &ScanOptions::default()).expect("scan");
        assert_eq!(report.documents[0].title, "标题");
        assert_eq!(report.chunks[0].text, "正文。");
        let gbk_chunk = report
            .chunks
            .iter()
            .find(|c| c.source == "gbk.md")
            .expect("the GBK file is read");
        assert!(
            gbk_chunk.text.contains("员工每年享有五天年假。"),
            "{}",
            gbk_chunk.text
        );
        let reasons: Vec<_> = report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("empty.html", "empty file (0 bytes)"),
                ("latin1.md", "not UTF-8 text (invalid byte at offset 3)"),
            ]
        );
    }
}
