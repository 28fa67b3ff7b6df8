//! The vector leg over pgvector, checked against the data version the caller's chunks and BM25
//! index reflect: both legs must see the same chunks.

use super::{PgStore, Space};
use crate::access::AccessContext;
use crate::store::vector_leg::{VectorLeg, VectorLegError};

/// One embedding space of a [`PgStore`], searched in SQL.
pub struct PgVectorLeg<'a> {
    pub store: &'a PgStore,
    pub space: &'a Space,
    /// The data version of the BM25 index and the in-memory chunks.
    pub expected: u64,
}

impl VectorLeg for PgVectorLeg<'_> {
    fn has_vectors(&self) -> bool {
        true
    }

    fn in_memory_rows(&self) -> Option<usize> {
        None
    }

    fn search(
        &self,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<Vec<(String, f32)>, VectorLegError> {
        let found = self
            .store
            .vector_search(self.space, query, k, access, include_superseded)?;
        if found.data_version != self.expected {
            return Err(VectorLegError::Stale {
                index: self.expected,
                database: found.data_version,
            });
        }
        Ok(found.hits)
    }
}
