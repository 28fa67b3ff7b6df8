//! Reading a knowledge folder: front matter, heading-aware chunks, `titlePath`, place-based chunk
//! ids and content hashes. Knows nothing about search or the agent.

mod chunker;
mod front_matter;
mod plain;
mod readers;
pub(crate) mod scan;
mod stamps;

pub use chunker::{ChunkLimits, chunk_document};
pub use front_matter::{FrontMatter, split_front_matter};
pub use readers::{Format, read as read_document};
pub use scan::{DefaultAccess, FormatCount, ScanOptions, SkippedFile, scan, scan_with_progress};
pub use stamps::{FolderStamps, KnowledgeChanges};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Lifecycle of a document. Superseded documents stay indexed (audits of old runs need them) but
/// are hidden from search unless asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DocStatus {
    #[default]
    Active,
    Superseded,
    Draft,
}

impl DocStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DocStatus::Active => "active",
            DocStatus::Superseded => "superseded",
            DocStatus::Draft => "draft",
        }
    }
}

/// One source file of the knowledge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    /// Path relative to the knowledge root, `/`-separated.
    pub source: String,
    pub title: String,
    pub tenant: String,
    pub roles: Vec<String>,
    pub version: Option<String>,
    pub updated: Option<String>,
    pub status: DocStatus,
    /// SHA-256 of the file's bytes: unchanged files are skipped on re-ingest.
    pub content_hash: String,
}

/// A retrievable piece of a document: never spans two sections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chunk {
    /// Names the chunk's place: hash of (source, heading path as written in the source, ordinal
    /// within the section).
    pub id: String,
    pub source: String,
    /// Document title, then each heading, joined with ` / ` (plain text, no Markdown).
    pub title_path: String,
    /// The heading path below the title, as plain text.
    pub headings: Vec<String>,
    /// `source#anchor` (no `#` for text before the first heading).
    pub source_uri: String,
    /// Position of the chunk within its section, from 0.
    pub ordinal: u32,
    /// Plain text (Markdown rendered; a table row names its header cells): what is indexed,
    /// embedded, shown and quoted.
    pub text: String,
    /// SHA-256 of `text`: an edited paragraph keeps its id and changes this.
    pub content_hash: String,
    pub tenant: String,
    pub roles: Vec<String>,
    pub version: Option<String>,
    pub updated: Option<String>,
    pub status: DocStatus,
}

impl Chunk {
    /// The page of a PDF chunk (its `sourceUri` is `file.pdf#page=N`); `None` elsewhere.
    pub fn page(&self) -> Option<u32> {
        let (file, fragment) = self.source_uri.rsplit_once('#')?;
        if !file.to_ascii_lowercase().ends_with(".pdf") {
            return None;
        }
        fragment.strip_prefix("page=")?.parse().ok()
    }
}

/// What chunk text is: 2, plain text rendered from the Markdown (1 was the Markdown as written).
/// A store holding chunks of another format must be rebuilt: unchanged files would otherwise
/// keep their old chunks.
pub const TEXT_FORMAT: u32 = 2;

/// Separator between the parts of a `titlePath`.
pub const TITLE_SEPARATOR: &str = " / ";

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The place-based chunk id: stable across edits of the chunk's own text.
pub fn chunk_id(source: &str, headings: &[String], ordinal: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(source.as_bytes());
    for heading in headings {
        hasher.update([0x1f]);
        hasher.update(heading.as_bytes());
    }
    hasher.update([0x1e]);
    hasher.update(ordinal.to_le_bytes());
    let digest = hasher.finalize();
    format!("c_{}", hex::encode(&digest[..8]))
}

/// Errors that stop an ingest (bad files that can be skipped are warnings instead).
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("knowledge folder {path} does not exist; create it or pass the folder to ingest")]
    MissingDir { path: String },
    #[error(
        "{path} is not a folder; pass the folder that holds your documents (.md, .txt, .html, .docx, .pdf)"
    )]
    NotADir { path: String },
    #[error("knowledge folder {path} holds no .md, .txt, .html, .htm, .docx or .pdf files")]
    EmptyDir { path: String },
    #[error("{file}:{line}: malformed front matter: {message}")]
    FrontMatter {
        file: String,
        line: usize,
        message: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ids_depend_on_place_only() {
        let h = vec!["交通费".to_string(), "火车票".to_string()];
        let a = chunk_id("finance/travel.md", &h, 0);
        assert_eq!(a, chunk_id("finance/travel.md", &h, 0));
        assert_ne!(a, chunk_id("finance/travel.md", &h, 1));
        assert_ne!(a, chunk_id("finance/other.md", &h, 0));
        assert_ne!(a, chunk_id("finance/travel.md", &h[..1], 0));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(
            chunk_id("x", &["ab".into(), "c".into()], 0),
            chunk_id("x", &["a".into(), "bc".into()], 0)
        );
        assert!(a.starts_with("c_") && a.len() == 18);
    }
}
