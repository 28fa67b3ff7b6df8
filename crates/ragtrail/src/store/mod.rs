//! The chunk store: the system of record for documents, chunks and their vectors, and each
//! chunk's analysed terms (cached per generation).
//!
//! The embedded store keeps each state as a *generation*: a folder `gen-N/` holding the manifest
//! and the chunks, made current by atomically replacing the `CURRENT` file. A crash while a new
//! generation is written leaves the previous one current and readable. A generation's chunk
//! records and vectors are mapped at open and read as a command asks for them
//! ([`records`], [`chunk_table`], [`mapped_vectors`]). Beside the generations,
//! `versions.jsonl` keeps every chunk text ever indexed ([`versions`]); beside the store, an ingest
//! keeps the vectors it has computed so far ([`embed_journal`]), so a stopped ingest resumes.

mod chunk_table;
pub mod embed_journal;
pub(crate) mod embedded;
mod mapped_vectors;
#[cfg(feature = "postgres")]
pub mod postgres;
mod records;
mod scripts;
mod terms;
pub mod vector_leg;
mod vector_writer;
pub mod vectors;
pub mod versions;

pub use embedded::ChunkStore;
pub use terms::ChunkTerms;
pub use vector_leg::{EmbeddedVectorLeg, SimilaritySpread, VectorLeg, VectorLegError};
pub use vector_writer::VectorWriter;
pub use versions::{ChunkVersion, KeepVersions, VersionLog};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("vector file {path}: {message}; run `ragtrail ingest --rebuild`")]
    Vectors { path: String, message: String },
    #[error("chunk store at {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "chunk store file {path} is corrupt at line {line}: {message}; run `ragtrail ingest --rebuild`"
    )]
    Corrupt {
        path: String,
        line: usize,
        message: String,
    },
    #[error(
        "chunk store at {path} has format {found}, this ragtrail reads format {supported} (since format 2 chunk text is plain text rendered from the Markdown); run `ragtrail ingest --rebuild` to rebuild it from the knowledge folder, or use the ragtrail that wrote it"
    )]
    Format {
        path: String,
        found: u32,
        supported: u32,
    },
}

#[cfg(test)]
mod layout_tests;
