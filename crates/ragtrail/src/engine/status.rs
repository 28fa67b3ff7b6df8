//! What a knowledge base holds (`ragtrail status`): documents and chunks counted for the
//! caller's access or per tenant, the generation and its age, the embedder that made the stored
//! vectors, knowledge files changed since the last ingest, PostgreSQL's unfinished ingest runs,
//! and (with [`Status::with_configuration`]) how a configured embedder compares.
//!
//! [`Engine::status`] and [`Engine::status_all_tenants`] read an opened engine;
//! [`status_in`] reads an embedded data directory without opening it, so asking changes
//! nothing on disk (no index is created or repaired, no id is written).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::access::AccessContext;
use crate::embed::{self, EmbedConfig, EmbedderInfo};
use crate::knowledge::KnowledgeChanges;
use crate::search::SearchSettings;
use crate::store::{ChunkStore, StoreError};

use super::{Engine, knowledge_changes_in};

/// Why a status could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The embedded chunk store exists and cannot be read.
    #[error("reading the chunk store in {}", path.display())]
    Store {
        path: PathBuf,
        #[source]
        source: StoreError,
    },
    /// PostgreSQL did not answer which ingest runs died.
    #[cfg(feature = "postgres")]
    #[error("checking PostgreSQL's ingest runs")]
    MarkAbandoned(#[source] crate::store::postgres::PgError),
    /// PostgreSQL did not count its ingest runs.
    #[cfg(feature = "postgres")]
    #[error("counting PostgreSQL's ingest runs")]
    RunCounts(#[source] crate::store::postgres::PgError),
}

/// Documents and chunks of one tenant ([`Engine::status_all_tenants`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantCounts {
    pub tenant: String,
    pub documents: usize,
    pub chunks: usize,
}

/// What the counts of a [`Status`] cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "of")]
pub enum Scope {
    /// What this tenant and these roles may search.
    Access { tenant: String, roles: Vec<String> },
    /// Every tenant (the operator's view).
    AllTenants,
}

/// PostgreSQL's ingest runs that did not commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestRuns {
    /// Runs in progress now (their process is alive).
    pub running: u64,
    /// Runs whose process stopped before committing, ever.
    pub abandoned: u64,
    /// The ids this status call found dead and marked abandoned.
    pub marked_now: Vec<i64>,
}

/// A knowledge base's state, as `ragtrail status --json` prints it (field order included).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub data_dir: String,
    /// `embedded` or `postgresql`.
    pub backend: &'static str,
    /// The PostgreSQL URL, password removed (postgresql only).
    pub database: Option<String>,
    /// Whether anything was ever ingested.
    pub ingested: bool,
    /// What `documents` and `chunks` count: the caller's access context, or every tenant.
    pub scope: Scope,
    pub documents: usize,
    pub chunks: usize,
    /// Per tenant, for [`Scope::AllTenants`].
    pub tenants: Option<Vec<TenantCounts>>,
    pub generation: u64,
    pub updated_at: Option<String>,
    pub age_seconds: Option<i64>,
    pub knowledge_root: Option<String>,
    /// What produced the stored vectors.
    pub index_embedder: Option<EmbedderInfo>,
    /// What the configuration handed to [`Status::with_configuration`] would use.
    pub configured_embedder: Option<EmbedderInfo>,
    pub configured_embedder_error: Option<String>,
    /// For an embeddings endpoint: whether it answered a probe query just now (`None`: not an
    /// endpoint). The marking is in `configuredEmbedder.marking` (absent: none).
    pub embedder_reachable: Option<bool>,
    /// The endpoint's URL, when the configured embedder is one.
    pub embedder_url: Option<String>,
    /// Whether searching now would work (`None`: nothing to compare).
    pub embedder_matches: Option<bool>,
    /// How a `searchDocs` call that names no fusion fuses the legs with the configured embedder
    /// (`--search-fusion`, else the embedder's default).
    pub fusion: Option<String>,
    /// How the agent's own searches fuse them (`--agent-fusion`, else the same).
    pub agent_fusion: Option<String>,
    /// Knowledge files edited, added or removed since the last ingest (`None`: not tracked).
    pub knowledge_changes: Option<KnowledgeChanges>,
    /// PostgreSQL's ingest runs not committed (postgresql only).
    pub ingest_runs: Option<IngestRuns>,
}

impl Engine {
    /// The knowledge base's state, its counts limited to what `caller` may search.
    pub fn status(&self, caller: &AccessContext) -> Result<Status, StatusError> {
        self.status_for(Some(caller))
    }

    /// The knowledge base's state with every tenant counted, one count per tenant (the
    /// operator's view).
    pub fn status_all_tenants(&self) -> Result<Status, StatusError> {
        self.status_for(None)
    }

    fn status_for(&self, caller: Option<&AccessContext>) -> Result<Status, StatusError> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.postgres() {
            let mut status = of_store(self.data_dir(), Some(self.store()), caller);
            status.backend = "postgresql";
            status.database = Some(pg.url().to_string());
            status.knowledge_changes = status.ingested.then(|| self.knowledge_changes()).flatten();
            let marked_now = pg
                .mark_abandoned_runs()
                .map_err(StatusError::MarkAbandoned)?;
            let (running, abandoned) = pg.run_counts().map_err(StatusError::RunCounts)?;
            status.ingest_runs = Some(IngestRuns {
                running,
                abandoned,
                marked_now,
            });
            return Ok(status);
        }
        Ok(embedded(self.data_dir(), Some(self.store()), caller))
    }
}

/// The status of the embedded store in `data_dir`, read without opening an engine; `caller`
/// `None` counts every tenant. A data directory with no store yet is empty, not an error.
pub fn status_in(data_dir: &Path, caller: Option<&AccessContext>) -> Result<Status, StatusError> {
    let store_dir = data_dir.join("store");
    let store = if store_dir.is_dir() {
        Some(
            ChunkStore::open(&store_dir).map_err(|source| StatusError::Store {
                path: store_dir.clone(),
                source,
            })?,
        )
    } else {
        None
    };
    Ok(embedded(data_dir, store.as_ref(), caller))
}

fn embedded(data_dir: &Path, store: Option<&ChunkStore>, caller: Option<&AccessContext>) -> Status {
    let mut status = of_store(data_dir, store, caller);
    status.knowledge_changes = status
        .ingested
        .then(|| knowledge_changes_in(data_dir))
        .flatten();
    status
}

/// The counts and the manifest's facts; the backend's own parts are filled in by the caller.
fn of_store(data_dir: &Path, store: Option<&ChunkStore>, caller: Option<&AccessContext>) -> Status {
    let scope = match caller {
        None => Scope::AllTenants,
        Some(c) => Scope::Access {
            tenant: c.tenant.clone(),
            roles: c.roles.clone(),
        },
    };
    let (documents, chunks, tenants) = match (store, caller) {
        (None, _) => (0, 0, caller.is_none().then(Vec::new)),
        (Some(store), None) => {
            let mut per: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for d in store.documents() {
                per.entry(&d.tenant).or_default().0 += 1;
            }
            for (tenant, chunks) in store.chunks_per_tenant() {
                per.entry(tenant).or_default().1 += chunks;
            }
            let tenants = per
                .into_iter()
                .map(|(tenant, (documents, chunks))| TenantCounts {
                    tenant: tenant.to_string(),
                    documents,
                    chunks,
                })
                .collect();
            (store.documents().len(), store.len(), Some(tenants))
        }
        (Some(store), Some(caller)) => (
            store
                .documents()
                .iter()
                .filter(|d| caller.allows(&d.tenant, &d.roles))
                .count(),
            store.visible_count(caller),
            None,
        ),
    };
    let manifest = store.map(|s| s.manifest());
    let updated_at = manifest
        .map(|m| m.updated_at.clone())
        .filter(|u| !u.is_empty());
    let age_seconds = updated_at
        .as_deref()
        .and_then(|u| chrono::DateTime::parse_from_rfc3339(u).ok())
        .map(|t| (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds());
    Status {
        data_dir: data_dir.display().to_string(),
        backend: "embedded",
        database: None,
        ingested: store.is_some_and(|s| s.generation() > 0),
        scope,
        documents,
        chunks,
        tenants,
        generation: store.map_or(0, |s| s.generation()),
        updated_at,
        age_seconds,
        knowledge_root: manifest.and_then(|m| m.knowledge_root.clone()),
        index_embedder: manifest.and_then(|m| m.embedder.clone()),
        configured_embedder: None,
        configured_embedder_error: None,
        embedder_reachable: None,
        embedder_url: None,
        embedder_matches: None,
        fusion: None,
        agent_fusion: None,
        knowledge_changes: None,
        ingest_runs: None,
    }
}

impl Status {
    /// Adds how `config` compares: the embedder it makes (an endpoint is asked for one query
    /// vector, since configured is not the same as up), whether it matches the stored vectors,
    /// and the fusions an engine opened with it would use, after `choose` applies the
    /// operator's choices to the embedder's default settings.
    pub fn with_configuration(
        mut self,
        config: &EmbedConfig,
        choose: &dyn Fn(&mut SearchSettings),
    ) -> Self {
        let is_endpoint = config.resolved_choice() == embed::EmbedderChoice::Http;
        let (configured, error, reachable) = match embed::from_config(config) {
            Ok(e) if is_endpoint => match e.embed_query(&["status probe"]) {
                Ok(_) => (Some(e.info()), None, Some(true)),
                Err(err) => (Some(e.info()), Some(err.to_string()), Some(false)),
            },
            Ok(e) => (Some(e.info()), None, None),
            Err(e) => (None, Some(e.to_string()), is_endpoint.then_some(false)),
        };
        self.embedder_url = if is_endpoint {
            config
                .base_url
                .as_deref()
                .map(|u| crate::http::display_url(u.trim()))
        } else {
            None
        };
        self.embedder_matches = match (&self.index_embedder, &configured) {
            (Some(stored), Some(configured)) if self.ingested => Some(stored == configured),
            _ => None,
        };
        let settings = configured.as_ref().map(|info| {
            let mut settings = SearchSettings::for_embedder(info);
            choose(&mut settings);
            settings
        });
        self.fusion = settings.map(|s| s.fusion.to_string());
        self.agent_fusion = settings.map(|s| s.agent_fusion.to_string());
        self.configured_embedder = configured;
        self.configured_embedder_error = error;
        self.embedder_reachable = reachable;
        self
    }
}
