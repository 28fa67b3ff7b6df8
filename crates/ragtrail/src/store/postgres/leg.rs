//! The vector leg over pgvector, checked against the data version the caller's chunks and BM25
//! index reflect: both legs must see the same chunks.

use super::{PgStore, Space};
use crate::access::AccessContext;
use crate::store::vector_leg::{SimilaritySpread, VectorLeg, VectorLegError};

/// One embedding space of a [`PgStore`], searched in SQL.
pub struct PgVectorLeg<'a> {
    pub store: &'a PgStore,
    /// The space searched; `None` before the first ingest (no vectors to search).
    pub space: Option<&'a Space>,
    /// The data version of the BM25 index and the in-memory chunks.
    pub expected: u64,
}

impl PgVectorLeg<'_> {
    fn stale_unless(&self, database: u64) -> Result<(), VectorLegError> {
        if database != self.expected {
            return Err(VectorLegError::Stale {
                index: self.expected,
                database,
            });
        }
        Ok(())
    }
}

impl VectorLeg for PgVectorLeg<'_> {
    fn has_vectors(&self) -> bool {
        self.space.is_some()
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
        let Some(space) = self.space else {
            return Ok(Vec::new());
        };
        let found = self
            .store
            .vector_search(space, query, k, access, include_superseded)?;
        self.stale_unless(found.data_version)?;
        Ok(found.hits)
    }

    /// No vector query to carry the version check: one small query asks for it.
    fn check_current(&self) -> Result<(), VectorLegError> {
        self.stale_unless(self.store.data_version()?)
    }

    fn similarity_spread(
        &self,
        query: &[f32],
        access: &AccessContext,
        sample: usize,
        min_visible: usize,
    ) -> Result<Option<SimilaritySpread>, VectorLegError> {
        match self.space {
            Some(space) => {
                Ok(self
                    .store
                    .similarity_spread(space, query, access, sample, min_visible)?)
            }
            None => Ok(None),
        }
    }

    fn similarity(&self, query: &[f32], chunk_id: &str) -> Result<Option<f64>, VectorLegError> {
        match self.space {
            Some(space) => Ok(self.store.similarity(space, query, chunk_id)?),
            None => Ok(None),
        }
    }
}
