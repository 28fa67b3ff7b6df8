//! The vector leg of `searchDocs`, one trait for both stores: the embedded store scans its own
//! vectors in memory ([`EmbeddedVectorLeg`]), PostgreSQL asks pgvector
//! (`postgres::PgVectorLeg`). `searchDocs` runs whichever the engine hands it, the same way.

use crate::access::AccessContext;

use super::ChunkStore;

/// Why a vector leg found nothing.
#[derive(Debug, thiserror::Error)]
pub enum VectorLegError {
    /// The in-memory scan refused the query (e.g. a vector of the wrong dimension).
    #[error("{0}")]
    Scan(String),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] super::postgres::PgError),
    /// The database moved on since the chunks in memory (and the BM25 index) were read.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    #[error("the index reflects data version {index}, the database is at {database}")]
    Stale { index: u64, database: u64 },
}

/// The `k` chunks nearest to a query vector that an access context may see, as (chunk id,
/// cosine similarity), best first.
pub trait VectorLeg: Sync {
    /// Whether there are any vectors to search (an empty leg is skipped, not run).
    fn has_vectors(&self) -> bool;

    /// How many rows the leg scans in this process, or `None` when it runs elsewhere (a
    /// database): a small in-memory scan is cheaper than handing it to another thread.
    fn in_memory_rows(&self) -> Option<usize>;

    fn search(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError>;
}

/// The embedded store's vectors, scanned exactly in memory.
pub struct EmbeddedVectorLeg<'a> {
    store: &'a ChunkStore,
}

impl<'a> EmbeddedVectorLeg<'a> {
    pub fn new(store: &'a ChunkStore) -> Self {
        Self { store }
    }
}

impl VectorLeg for EmbeddedVectorLeg<'_> {
    fn has_vectors(&self) -> bool {
        !self.store.vectors().is_empty()
    }

    fn in_memory_rows(&self) -> Option<usize> {
        Some(self.store.chunks().len())
    }

    fn search(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        let visible = self.store.visibility(access, include_superseded);
        let rows = self
            .store
            .vectors()
            .search(query, k, |i| visible.allows(i))
            .map_err(|e| VectorLegError::Scan(e.to_string()))?;
        let chunks = self.store.chunks();
        Ok(rows
            .into_iter()
            .map(|(row, score)| (chunks[row].id.clone(), score))
            .collect())
    }
}
