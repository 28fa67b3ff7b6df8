//! Kept chunk versions through the engine: written by every ingest, pruned on request, and
//! read under the caller's access (see `store::versions`).
//!
//! Versions are written at ingest, not when a run is shown a hit: every text a run can be shown
//! was indexed first, so recording at ingest covers every run (the CLI, the server, MCP, other
//! processes sharing a database) with one write per changed text, keeps searches read-only,
//! and needs no write access where traces are made.

use std::borrow::Cow;
use std::collections::HashSet;

use super::{Backend, Engine, EngineError};
use crate::access::AccessContext;
use crate::store::{ChunkStore, ChunkVersion, KeepVersions, VersionLog};

impl Engine {
    /// Every version of chunk `id` that `access` may see, oldest first, today's text included.
    /// A chunk of another tenant, or of roles the caller lacks, has no versions, exactly as one
    /// that never existed.
    pub fn chunk_versions(
        &self,
        id: &str,
        access: &AccessContext,
    ) -> Result<Vec<ChunkVersion>, EngineError> {
        let mut versions = match &self.backend {
            Backend::Embedded => self.version_log().of_chunk(id)?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => match self.postgres() {
                Some(pg) => pg.chunk_versions(id)?,
                None => Vec::new(),
            },
        };
        versions.retain(|v| v.visible_to(access));
        // Today's text, for a store whose versions were not kept before this one was indexed.
        if let Some(chunk) = self.store.get_visible(id, access)
            && !versions
                .iter()
                .any(|v| v.content_hash == chunk.content_hash && v.text.is_some())
        {
            versions.retain(|v| v.content_hash != chunk.content_hash);
            versions.push(ChunkVersion::of(chunk, &self.store.manifest().updated_at));
        }
        Ok(versions)
    }

    fn version_log(&self) -> VersionLog {
        VersionLog::in_store(self.store.dir())
    }

    /// Keeps the texts of `next` (and of the store it replaces, for a store indexed before
    /// versions were kept) in the embedded store's version file.
    pub(super) fn record_versions(&self, next: &ChunkStore) -> Result<(), EngineError> {
        if !matches!(self.backend, Backend::Embedded) {
            return Ok(());
        }
        let log = VersionLog::in_store(next.dir());
        // The replaced generation's records are read one at a time, not all held: beside the
        // next generation's chunks they would double an ingest's memory.
        let before = self.store.manifest().updated_at.as_str();
        let now = next.manifest().updated_at.as_str();
        let replaced = self
            .store
            .decode_chunks()
            .map(|chunk| Ok((Cow::Owned(chunk?), before)));
        let written = next.chunks()?.iter().map(|c| Ok((Cow::Borrowed(c), now)));
        log.record(replaced.chain(written))?;
        Ok(())
    }

    /// Prunes past versions beyond `keep` per chunk id; returns how many texts were dropped.
    pub(super) fn prune_versions(&self, keep: KeepVersions) -> Result<usize, EngineError> {
        let KeepVersions::Last(keep) = keep else {
            return Ok(0);
        };
        match &self.backend {
            Backend::Embedded => {
                let current: HashSet<(String, String)> = self
                    .store
                    .chunks()?
                    .iter()
                    .map(|c| (c.id.clone(), c.content_hash.clone()))
                    .collect();
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                Ok(self.version_log().prune(keep, &current, &now)?)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => match self.postgres() {
                Some(pg) => Ok(pg.prune_versions(keep)?),
                None => Ok(0),
            },
        }
    }
}
