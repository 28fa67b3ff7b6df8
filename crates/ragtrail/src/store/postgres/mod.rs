//! PostgreSQL + pgvector as the system of record (selected by `DATABASE_URL`).
//!
//! Documents, chunks, ingest runs and the registry of embedding spaces live in the tables of
//! `migrations/`. Each embedding space (embedder kind + model) gets its own vector table
//! `vectors_<id>` with a fixed dimension and an HNSW index (cosine), created when ingest first
//! meets that embedder. The vector rows carry the chunk's access fields (tenant, roles, status),
//! so the vector leg filters in its `WHERE` clause and pgvector's iterative index scans keep a
//! selective filter returning top-k rows.
//!
//! The engine is synchronous: [`PgStore`] owns a small tokio runtime and every method blocks on
//! it. Queries are runtime-checked (`sqlx::query`), so building never needs a database.
//!
//! `kb_state.data_version` is bumped by every transaction that changes documents or chunks; the
//! BM25 index records the version it reflects (see `docs/scale-out.md`).

mod error;
mod leg;
mod migrations;
mod settings;
mod url;
mod versions;

pub use error::{PgError, redact_database_url};
pub use leg::PgVectorLeg;
pub use migrations::MIGRATOR;
pub use settings::{
    DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_EF_SEARCH, DEFAULT_HNSW_M, IterativeScan,
    PgSettings, VectorSearchMode,
};
pub use url::with_database;

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;

use pgvector::Vector;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, Row};

use crate::access::AccessContext;
use crate::embed::{EmbedderInfo, Marking};
use crate::knowledge::{Chunk, DocStatus, Document};
use crate::store::vector_leg::{SampleRuns, SimilaritySpread};

/// First key of the advisory locks that are ingest runs' leases (`pg_advisory_lock(NS, run)`),
/// so they never meet another application's locks keyed by one number.
const RUN_LEASE_NAMESPACE: i32 = 0x7274_6972;

/// The second key of a run's lease (run ids wrap at 2³¹, far beyond any real count).
fn lease_key(run: i64) -> i32 {
    run as i32
}

/// A running ingest's claim on its `ingest_runs` row: see [`PgStore::begin_run`].
pub struct RunLease {
    id: i64,
    conn: Option<PgConnection>,
}

impl RunLease {
    /// The run's id in `ingest_runs`.
    pub fn id(&self) -> i64 {
        self.id
    }
}

impl std::fmt::Debug for RunLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLease").field("id", &self.id).finish()
    }
}

/// pgvector's limit for an HNSW index on `vector`.
pub const MAX_INDEXED_DIMS: u32 = 2000;
/// Role stored in the vector rows of chunks that everyone in their tenant may read (the BM25
/// index uses the same convention): the access filter is then one array overlap, which the
/// planner estimates well.
const PUBLIC_ROLE: &str = "*";

/// One embedding space: the vectors one embedder produced, in their own table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub id: i32,
    pub info: EmbedderInfo,
    pub table: String,
    pub hnsw_m: u32,
    pub hnsw_ef_construction: u32,
}

/// Everything the engine holds in memory for hit assembly, read in one consistent snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub data_version: u64,
    pub documents: Vec<Document>,
    /// Ordered by document source, then position within the document.
    pub chunks: Vec<Chunk>,
    /// The space the vector leg searches (none before the first ingest).
    pub space: Option<Space>,
    pub knowledge_root: Option<String>,
    pub last_run: Option<i64>,
}

/// What an ingest run changed, recorded in `ingest_runs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCounts {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    pub chunks: usize,
}

/// Hits of the vector leg, and the data version the database was at when it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHits {
    /// Chunk id and cosine similarity, best first (ties: earlier-written chunk first).
    pub hits: Vec<(String, f32)>,
    pub data_version: u64,
}

/// Fields of a chunk that search shows but never filters on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ChunkMeta {
    #[serde(default)]
    headings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated: Option<String>,
}

/// The synchronous facade over the pool: owns its runtime, so callers never see async.
pub struct PgStore {
    rt: tokio::runtime::Runtime,
    pool: PgPool,
    /// `DATABASE_URL` with its password replaced: the only form that ever enters a message.
    url: String,
    /// The raw password, removed from every message that could echo it.
    secret: Option<String>,
    settings: PgSettings,
    kb_id: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.url)
            .field("kb_id", &self.kb_id)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects, checks the `vector` extension and the schema version, and applies pending
    /// migrations when the settings allow it.
    pub fn connect(url: &str, settings: PgSettings) -> Result<Self, PgError> {
        let mut store = Self::connect_only(url, settings)?;
        store.prepare()?;
        Ok(store)
    }

    /// Connects and applies pending migrations (`ragtrail migrate`); returns the versions
    /// applied by this call.
    pub fn connect_and_migrate(
        url: &str,
        settings: PgSettings,
    ) -> Result<(Self, Vec<i64>), PgError> {
        let mut store = Self::connect_only(url, settings)?;
        store.check_extension()?;
        let applied = store.migrate()?;
        store.kb_id = store.load_kb_id()?;
        Ok((store, applied))
    }

    fn connect_only(url: &str, settings: PgSettings) -> Result<Self, PgError> {
        let redacted = redact_database_url(url);
        let secret = error::password_of(url);
        let scrub = |m: String| error::scrub(&m, secret.as_deref());
        let options = PgConnectOptions::from_str(url).map_err(|e| PgError::BadUrl {
            url: redacted.clone(),
            message: scrub(e.to_string()),
        })?;
        let mut startup: Vec<(&str, String)> = vec![
            ("hnsw.ef_search", settings.hnsw_ef_search.to_string()),
            (
                "hnsw.iterative_scan",
                settings.iterative_scan.as_str().to_string(),
            ),
            // The vector leg's plan depends on how selective the access filter is: plan it
            // for the actual tenant and roles every time, never with a generic plan.
            ("plan_cache_mode", "force_custom_plan".to_string()),
        ];
        if let Some(n) = settings.hnsw_max_scan_tuples {
            startup.push(("hnsw.max_scan_tuples", n.to_string()));
        }
        let options = options.application_name("ragtrail").options(startup);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ragtrail-pg")
            .enable_all()
            .build()
            .map_err(|e| PgError::Runtime(e.to_string()))?;
        let pool_options = PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .min_connections(0)
            .acquire_timeout(settings.connect_timeout);
        // One direct connection first: a pool would retry until its timeout and report only
        // that, while the user needs the actual reason (refused, bad password, no database).
        let timeout = settings.connect_timeout;
        let probe = run_on(&rt, async {
            tokio::time::timeout(timeout, PgConnection::connect_with(&options)).await
        });
        match probe {
            Ok(Ok(conn)) => {
                let _ = run_on(&rt, conn.close());
            }
            Ok(Err(e)) => return Err(error::classify(e, &redacted, secret.as_deref())),
            Err(_) => {
                return Err(PgError::Unreachable {
                    url: redacted,
                    message: format!("no answer within {} s", timeout.as_secs()),
                });
            }
        }
        let pool = {
            let _guard = rt.enter();
            pool_options.connect_lazy_with(options)
        };
        Ok(Self {
            rt,
            pool,
            url: redacted,
            secret,
            settings,
            kb_id: String::new(),
        })
    }

    fn prepare(&mut self) -> Result<(), PgError> {
        self.check_extension()?;
        let pending = self.pending_migrations()?;
        if !pending.is_empty() {
            if !self.settings.auto_migrate {
                return Err(PgError::MigrationsPending {
                    url: self.url.clone(),
                    pending: pending.len(),
                });
            }
            self.migrate()?;
        }
        self.kb_id = self.load_kb_id()?;
        Ok(())
    }

    /// The redacted `DATABASE_URL`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn settings(&self) -> &PgSettings {
        &self.settings
    }

    /// Names this knowledge base (a random id made by the first migration).
    pub fn kb_id(&self) -> &str {
        &self.kb_id
    }

    /// The pool, for tests and tools that need plain SQL (use with [`PgStore::block_on`]).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs a future on the store's runtime. Safe to call from a thread that is itself inside
    /// a tokio runtime (the future then runs on a helper thread).
    pub fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        run_on(&self.rt, fut)
    }

    fn err(&self, e: sqlx::Error) -> PgError {
        error::classify(e, &self.url, self.secret.as_deref())
    }

    fn check_extension(&self) -> Result<(), PgError> {
        let installed: Option<String> = self
            .block_on(
                sqlx::query_scalar("select extversion from pg_extension where extname = 'vector'")
                    .fetch_optional(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        let version = match installed {
            Some(v) => v,
            None => {
                let available: Option<String> = self
                    .block_on(
                        sqlx::query_scalar(
                            "select default_version from pg_available_extensions where name = 'vector'",
                        )
                        .fetch_optional(&self.pool),
                    )
                    .map_err(|e| self.err(e))?;
                match available {
                    Some(v) => v,
                    None => {
                        return Err(PgError::ExtensionMissing {
                            url: self.url.clone(),
                            message: "the server has no pgvector installed".to_string(),
                        });
                    }
                }
            }
        };
        if !settings::version_at_least(&version, 0, 8) {
            return Err(PgError::ExtensionTooOld {
                url: self.url.clone(),
                found: version,
            });
        }
        Ok(())
    }

    /// Migrations of this binary not yet applied to the database. Fails when the database
    /// has migrations this binary does not know (a newer ragtrail migrated it).
    pub fn pending_migrations(&self) -> Result<Vec<i64>, PgError> {
        let applied = self.applied_migrations()?;
        let known: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
        let binary = known.iter().copied().max().unwrap_or(0);
        if let Some(&newest) = applied.iter().max()
            && (newest > binary || applied.iter().any(|v| !known.contains(v)))
        {
            return Err(PgError::MigrationsNewer {
                url: self.url.clone(),
                database: newest,
                binary,
            });
        }
        Ok(known.into_iter().filter(|v| !applied.contains(v)).collect())
    }

    fn applied_migrations(&self) -> Result<Vec<i64>, PgError> {
        self.block_on(async {
            let exists: Option<String> =
                sqlx::query_scalar("select to_regclass('_sqlx_migrations')::text")
                    .fetch_one(&self.pool)
                    .await?;
            if exists.is_none() {
                return Ok(Vec::new());
            }
            sqlx::query_scalar(
                "select version from _sqlx_migrations where success order by version",
            )
            .fetch_all(&self.pool)
            .await
        })
        .map_err(|e| self.err(e))
    }

    /// Applies pending migrations (idempotent; concurrent callers are serialised by an
    /// advisory lock). Returns the versions applied by this call.
    pub fn migrate(&self) -> Result<Vec<i64>, PgError> {
        let pending = self.pending_migrations()?;
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        self.block_on(MIGRATOR.run(&self.pool))
            .map_err(|e| error::classify_migrate(e, &self.url, self.secret.as_deref()))?;
        Ok(pending)
    }

    fn load_kb_id(&self) -> Result<String, PgError> {
        self.block_on(sqlx::query_scalar("select kb_id from kb_state").fetch_one(&self.pool))
            .map_err(|e| self.err(e))
    }

    /// The text format of the stored chunks ([`crate::knowledge::TEXT_FORMAT`] of the engine
    /// whose ingest last committed).
    pub fn text_format(&self) -> Result<u32, PgError> {
        let v: i32 = self
            .block_on(sqlx::query_scalar("select text_format from kb_state").fetch_one(&self.pool))
            .map_err(|e| self.err(e))?;
        Ok(v as u32)
    }

    /// The current `kb_state.data_version`.
    pub fn data_version(&self) -> Result<u64, PgError> {
        let v: i64 = self
            .block_on(sqlx::query_scalar("select data_version from kb_state").fetch_one(&self.pool))
            .map_err(|e| self.err(e))?;
        Ok(v as u64)
    }

    /// The space the vector leg searches, if any ingest set one.
    pub fn active_space(&self) -> Result<Option<Space>, PgError> {
        let row = self
            .block_on(
                sqlx::query(
                    "select s.id, s.kind, s.model, s.dims, s.table_name, s.hnsw_m, s.hnsw_ef_construction, s.marking
                     from kb_state k join embedding_spaces s on s.id = k.active_space",
                )
                .fetch_optional(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        row.map(|r| space_from_row(&r))
            .transpose()
            .map_err(|e| self.err(e))
    }

    /// The space of `info`, creating its registry row and vector table on first use. With
    /// `rebuild`, a space whose dimension changed is recreated (its vectors are dropped);
    /// without it, a dimension that differs from the column's is an error.
    pub fn ensure_space(&self, info: &EmbedderInfo, rebuild: bool) -> Result<Space, PgError> {
        if info.dims == 0 || info.dims > MAX_INDEXED_DIMS {
            return Err(PgError::UnsupportedDims {
                embedder: describe(info),
                dims: info.dims,
            });
        }
        let m = self.settings.hnsw_m;
        let efc = self.settings.hnsw_ef_construction;
        let result = self.block_on(async {
            let mut tx = self.pool.begin().await?;
            sqlx::query("select pg_advisory_xact_lock(hashtext('ragtrail.embedding_spaces'))")
                .execute(&mut *tx)
                .await?;
            let existing = sqlx::query(
                "select id, kind, model, dims, table_name, hnsw_m, hnsw_ef_construction, marking
                 from embedding_spaces where kind = $1 and model = $2 and marking = $3",
            )
            .bind(&info.kind)
            .bind(&info.model)
            .bind(marking_column(&info.marking))
            .fetch_optional(&mut *tx)
            .await?;
            let space = match existing {
                Some(row) => space_from_row(&row)?,
                None => {
                    let row = sqlx::query(
                        "with n as (select nextval(pg_get_serial_sequence('embedding_spaces', 'id'))::int as id)
                         insert into embedding_spaces (id, kind, model, dims, table_name, hnsw_m, hnsw_ef_construction, marking)
                         select n.id, $1, $2, $3, 'vectors_' || n.id, $4, $5, $6 from n
                         returning id, kind, model, dims, table_name, hnsw_m, hnsw_ef_construction, marking",
                    )
                    .bind(&info.kind)
                    .bind(&info.model)
                    .bind(info.dims as i32)
                    .bind(m as i32)
                    .bind(efc as i32)
                    .bind(marking_column(&info.marking))
                    .fetch_one(&mut *tx)
                    .await?;
                    space_from_row(&row)?
                }
            };
            let column: Option<i32> = sqlx::query_scalar(
                "select a.atttypmod from pg_attribute a
                 where a.attrelid = to_regclass($1) and a.attname = 'embedding' and not a.attisdropped",
            )
            .bind(&space.table)
            .fetch_optional(&mut *tx)
            .await?;
            let column_dims = column.map(|d| d as u32);
            let wanted = info.dims;
            if column_dims.is_some_and(|d| d != wanted) || space.info.dims != wanted {
                if !rebuild {
                    tx.rollback().await?;
                    return Ok(Err(PgError::DimensionMismatch {
                        embedder: describe(info),
                        table: space.table.clone(),
                        column_dims: column_dims.unwrap_or(space.info.dims),
                        embedder_dims: wanted,
                    }));
                }
                sqlx::query(AssertSqlSafe(format!("drop table if exists {}", space.table)))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("update embedding_spaces set dims = $2 where id = $1")
                    .bind(space.id)
                    .bind(wanted as i32)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(AssertSqlSafe(create_vector_table_sql(&space.table, wanted)))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Ok(Space {
                info: info.clone(),
                ..space
            }))
        });
        result.map_err(|e: sqlx::Error| self.err(e))?
    }

    /// Creates the space's HNSW index if it has none (ingest calls this after loading, which
    /// builds the graph in one pass instead of row by row). Returns whether it was created.
    pub fn ensure_hnsw_index(&self, space: &Space) -> Result<bool, PgError> {
        let name = format!("{}_hnsw", space.table);
        let exists: Option<String> = self
            .block_on(
                sqlx::query_scalar("select to_regclass($1)::text")
                    .bind(&name)
                    .fetch_one(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        if exists.is_some() {
            return Ok(false);
        }
        let (m, efc) = (self.settings.hnsw_m, self.settings.hnsw_ef_construction);
        let mem = self.settings.maintenance_work_mem.clone();
        self.block_on(async {
            let mut tx = self.pool.begin().await?;
            if let Some(mem) = mem {
                sqlx::query("select set_config('maintenance_work_mem', $1, true)")
                    .bind(mem)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(AssertSqlSafe(format!(
                "create index if not exists {name} on {table} using hnsw (embedding vector_cosine_ops) \
                 with (m = {m}, ef_construction = {efc})",
                table = space.table
            )))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "update embedding_spaces set hnsw_m = $2, hnsw_ef_construction = $3 where id = $1",
            )
            .bind(space.id)
            .bind(m as i32)
            .bind(efc as i32)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })
        .map_err(|e| self.err(e))?;
        Ok(true)
    }

    /// Drops the space's HNSW index (a rebuild recreates it after loading).
    pub fn drop_hnsw_index(&self, space: &Space) -> Result<(), PgError> {
        self.block_on(
            sqlx::query(AssertSqlSafe(format!(
                "drop index if exists {}_hnsw",
                space.table
            )))
            .execute(&self.pool),
        )
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records the start of an ingest run and takes its lease: a connection of its own,
    /// outside the pool, holding the run's advisory lock until [`PgStore::end_run`] (or until
    /// the process dies and the server closes the connection). A `running` row whose lock
    /// anyone can take is therefore a run that will never finish ([`PgStore::mark_abandoned_runs`]).
    pub fn begin_run(
        &self,
        knowledge_root: Option<&str>,
        space: &Space,
        rebuild: bool,
    ) -> Result<RunLease, PgError> {
        self.block_on(async {
            let mut conn = self.pool.acquire().await?.detach();
            let id: i64 = sqlx::query_scalar(
                "insert into ingest_runs (knowledge_root, space, rebuild) values ($1, $2, $3) returning id",
            )
            .bind(knowledge_root)
            .bind(space.id)
            .bind(rebuild)
            .fetch_one(&mut conn)
            .await?;
            sqlx::query("select pg_advisory_lock($1, $2)")
                .bind(RUN_LEASE_NAMESPACE)
                .bind(lease_key(id))
                .execute(&mut conn)
                .await?;
            Ok(RunLease {
                id,
                conn: Some(conn),
            })
        })
        .map_err(|e: sqlx::Error| self.err(e))
    }

    /// Gives a run's lease back (after [`PgStore::finish_run`], or when giving up on the run).
    pub fn end_run(&self, mut lease: RunLease) {
        if let Some(conn) = lease.conn.take() {
            // Closing ends the session, which releases the lock.
            let _ = self.block_on(conn.close());
        }
    }

    /// Marks `running` ingest runs whose process is gone as `abandoned` (their lease's lock is
    /// free: the server closed their connection), and returns the ids it marked. Cheap: one
    /// query, plus one lock attempt per running row.
    pub fn mark_abandoned_runs(&self) -> Result<Vec<i64>, PgError> {
        self.block_on(async {
            let mut conn = self.pool.acquire().await?;
            let running: Vec<i64> = sqlx::query_scalar(
                "select id from ingest_runs where status = 'running' order by id",
            )
            .fetch_all(&mut *conn)
            .await?;
            let mut marked = Vec::new();
            for id in running {
                let free: bool = sqlx::query_scalar("select pg_try_advisory_lock($1, $2)")
                    .bind(RUN_LEASE_NAMESPACE)
                    .bind(lease_key(id))
                    .fetch_one(&mut *conn)
                    .await?;
                if !free {
                    continue;
                }
                let updated = sqlx::query(
                    "update ingest_runs set status = 'abandoned', finished_at = now()
                     where id = $1 and status = 'running'",
                )
                .bind(id)
                .execute(&mut *conn)
                .await?;
                sqlx::query("select pg_advisory_unlock($1, $2)")
                    .bind(RUN_LEASE_NAMESPACE)
                    .bind(lease_key(id))
                    .execute(&mut *conn)
                    .await?;
                if updated.rows_affected() > 0 {
                    marked.push(id);
                }
            }
            Ok(marked)
        })
        .map_err(|e: sqlx::Error| self.err(e))
    }

    /// How many ingest runs are `running` (alive, after [`PgStore::mark_abandoned_runs`]) and
    /// `abandoned`.
    pub fn run_counts(&self) -> Result<(u64, u64), PgError> {
        let (running, abandoned): (i64, i64) = self
            .block_on(
                sqlx::query_as(
                    "select count(*) filter (where status = 'running'),
                            count(*) filter (where status = 'abandoned')
                     from ingest_runs",
                )
                .fetch_one(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        Ok((running as u64, abandoned as u64))
    }

    /// Marks a run committed, makes its space the active one, and returns the data version
    /// the run ended at.
    pub fn finish_run(&self, run: i64, space: &Space, counts: RunCounts) -> Result<u64, PgError> {
        let v: i64 = self
            .block_on(async {
                let mut tx = self.pool.begin().await?;
                let v: i64 = sqlx::query_scalar(
                    "update kb_state set last_run = $1, active_space = $2, text_format = $3,
                     updated_at = now()
                     returning data_version",
                )
                .bind(run)
                .bind(space.id)
                .bind(crate::knowledge::TEXT_FORMAT as i32)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
                    "update ingest_runs set finished_at = now(), status = 'committed', added = $2,
                     changed = $3, removed = $4, unchanged = $5, chunks = $6, data_version = $7
                     where id = $1",
                )
                .bind(run)
                .bind(counts.added as i32)
                .bind(counts.changed as i32)
                .bind(counts.removed as i32)
                .bind(counts.unchanged as i32)
                .bind(counts.chunks as i32)
                .bind(v)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(v)
            })
            .map_err(|e: sqlx::Error| self.err(e))?;
        Ok(v as u64)
    }

    /// Stored vectors in `space` of chunks with these (content hash, titlePath) pairs: what a
    /// vector embeds (the heading path with the text), so unchanged text is never embedded again
    /// and a renamed heading gets a new vector. Zero vectors (stored as NULL) come back as zeros.
    pub fn vectors_by_text(
        &self,
        space: &Space,
        keys: &[(String, String)],
    ) -> Result<HashMap<(String, String), Vec<f32>>, PgError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (hashes, titles): (Vec<&str>, Vec<&str>) =
            keys.iter().map(|(h, t)| (h.as_str(), t.as_str())).unzip();
        let rows = self
            .block_on(
                sqlx::query(AssertSqlSafe(format!(
                    "select distinct on (c.content_hash, c.title_path)
                            c.content_hash, c.title_path, v.embedding
                     from chunks c
                     join unnest($1::text[], $2::text[]) as k(hash, title)
                       on k.hash = c.content_hash and k.title = c.title_path
                     join {} v on v.chunk_pk = c.pk",
                    space.table
                )))
                .bind(&hashes)
                .bind(&titles)
                .fetch_all(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        let dims = space.info.dims as usize;
        let mut out = HashMap::with_capacity(rows.len());
        for row in rows {
            let hash: String = row.try_get(0).map_err(|e| self.err(e))?;
            let title: String = row.try_get(1).map_err(|e| self.err(e))?;
            let v: Option<Vector> = row.try_get(2).map_err(|e| self.err(e))?;
            out.insert(
                (hash, title),
                v.map_or_else(|| vec![0.0; dims], |v| v.to_vec()),
            );
        }
        Ok(out)
    }

    /// Writes one document in one transaction: its row, its chunks (replacing any it had)
    /// and their vectors in `space`. `vectors` has one entry per chunk. Returns the new data
    /// version.
    pub fn write_document(
        &self,
        run: Option<i64>,
        space: &Space,
        doc: &Document,
        chunks: &[Chunk],
        vectors: &[Vec<f32>],
    ) -> Result<u64, PgError> {
        if vectors.len() != chunks.len() {
            return Err(PgError::Invalid(format!(
                "{}: {} vectors for {} chunks",
                doc.source,
                vectors.len(),
                chunks.len()
            )));
        }
        let dims = space.info.dims as usize;
        if let Some(v) = vectors.iter().find(|v| v.len() != dims) {
            return Err(PgError::DimensionMismatch {
                embedder: describe(&space.info),
                table: space.table.clone(),
                column_dims: space.info.dims,
                embedder_dims: v.len() as u32,
            });
        }
        let rows = ChunkColumns::new(chunks, vectors);
        let insert_sql = format!(
            "with ins as (
               insert into chunks (id, document, seq, ordinal, title_path, source_uri, content,
                                   content_hash, metadata, tenant, roles, status)
               select u.id, $1, u.seq, u.ordinal, u.title_path, u.source_uri, u.content,
                      u.content_hash, u.metadata::jsonb, u.tenant,
                      array(select jsonb_array_elements_text(u.roles::jsonb)), u.status
               from unnest($2::text[], $3::int4[], $4::int4[], $5::text[], $6::text[], $7::text[],
                           $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
                    as u(id, seq, ordinal, title_path, source_uri, content, content_hash, metadata,
                         tenant, roles, status)
               returning pk, id, seq, tenant, roles, status)
             insert into {table} (chunk_pk, chunk_id, tenant, access_roles, status, embedding)
             select ins.pk, ins.id, ins.tenant,
                    case when cardinality(ins.roles) = 0 then array['{PUBLIC_ROLE}'] else ins.roles end,
                    ins.status, v.embedding
             from ins join unnest($13::int4[], $14::vector[]) as v(seq, embedding) on v.seq = ins.seq",
            table = space.table
        );
        let result = self.block_on(async {
            let mut tx = self.pool.begin().await?;
            let version: i64 = sqlx::query_scalar(
                "update kb_state set data_version = data_version + 1, updated_at = now()
                 returning data_version",
            )
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query(
                "insert into documents (source, title, tenant, roles, version, updated, status,
                                        content_hash, ingest_run, data_version, written_at)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now())
                 on conflict (source) do update set title = excluded.title,
                   tenant = excluded.tenant, roles = excluded.roles, version = excluded.version,
                   updated = excluded.updated, status = excluded.status,
                   content_hash = excluded.content_hash, ingest_run = excluded.ingest_run,
                   data_version = excluded.data_version, written_at = excluded.written_at",
            )
            .bind(&doc.source)
            .bind(&doc.title)
            .bind(&doc.tenant)
            .bind(&doc.roles)
            .bind(&doc.version)
            .bind(&doc.updated)
            .bind(doc.status.as_str())
            .bind(&doc.content_hash)
            .bind(run)
            .bind(version)
            .execute(&mut *tx)
            .await?;
            sqlx::query("delete from chunks where document = $1")
                .bind(&doc.source)
                .execute(&mut *tx)
                .await?;
            if !chunks.is_empty() {
                sqlx::query(AssertSqlSafe(insert_sql))
                    .bind(&doc.source)
                    .bind(&rows.id)
                    .bind(&rows.seq)
                    .bind(&rows.ordinal)
                    .bind(&rows.title_path)
                    .bind(&rows.source_uri)
                    .bind(&rows.content)
                    .bind(&rows.content_hash)
                    .bind(&rows.metadata)
                    .bind(&rows.tenant)
                    .bind(&rows.roles)
                    .bind(&rows.status)
                    .bind(&rows.seq)
                    .bind(&rows.embedding)
                    .execute(&mut *tx)
                    .await?;
                versions::insert_versions(&mut tx, &doc.source, version, &rows).await?;
            }
            tx.commit().await?;
            Ok(version)
        });
        match result {
            Ok(v) => Ok(v as u64),
            Err(e) => Err(self.dimension_error(e, space)),
        }
    }

    /// Removes a document with its chunks and vectors; returns the new data version.
    pub fn remove_document(&self, source: &str) -> Result<u64, PgError> {
        let v: i64 = self
            .block_on(async {
                let mut tx = self.pool.begin().await?;
                let v: i64 = sqlx::query_scalar(
                    "update kb_state set data_version = data_version + 1, updated_at = now()
                     returning data_version",
                )
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query("delete from documents where source = $1")
                    .bind(source)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(v)
            })
            .map_err(|e: sqlx::Error| self.err(e))?;
        Ok(v as u64)
    }

    /// A database error that says a vector did not fit the column becomes the typed error.
    fn dimension_error(&self, e: sqlx::Error, space: &Space) -> PgError {
        if let sqlx::Error::Database(db) = &e {
            let message = db.message();
            if message.contains("dimensions") {
                let found = message
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|s| s.parse::<u32>().ok())
                    .find(|&d| d != space.info.dims)
                    .unwrap_or(0);
                return PgError::DimensionMismatch {
                    embedder: describe(&space.info),
                    table: space.table.clone(),
                    column_dims: space.info.dims,
                    embedder_dims: found,
                };
            }
        }
        self.err(e)
    }

    /// Documents, chunks and the active space, read in one repeatable-read transaction so
    /// that they match the data version returned with them.
    pub fn snapshot(&self) -> Result<Snapshot, PgError> {
        self.block_on(async {
            let mut tx = self.pool.begin().await?;
            sqlx::query("set transaction isolation level repeatable read, read only")
                .execute(&mut *tx)
                .await?;
            let state = sqlx::query(
                "select k.data_version, k.last_run, r.knowledge_root,
                        s.id, s.kind, s.model, s.dims, s.table_name, s.hnsw_m, s.hnsw_ef_construction, s.marking
                 from kb_state k
                 left join ingest_runs r on r.id = k.last_run
                 left join embedding_spaces s on s.id = k.active_space",
            )
            .fetch_one(&mut *tx)
            .await?;
            let data_version: i64 = state.try_get(0)?;
            let last_run: Option<i64> = state.try_get(1)?;
            let knowledge_root: Option<String> = state.try_get(2)?;
            let space_id: Option<i32> = state.try_get(3)?;
            let space = match space_id {
                Some(id) => Some(Space {
                    id,
                    info: EmbedderInfo {
                        kind: state.try_get(4)?,
                        model: state.try_get(5)?,
                        dims: state.try_get::<i32, _>(6)? as u32,
                        marking: marking_from_column(state.try_get(10)?)?,
                    },
                    table: state.try_get(7)?,
                    hnsw_m: state.try_get::<i32, _>(8)? as u32,
                    hnsw_ef_construction: state.try_get::<i32, _>(9)? as u32,
                }),
                None => None,
            };
            let doc_rows = sqlx::query(
                "select source, title, tenant, roles, version, updated, status, content_hash
                 from documents order by source collate \"C\"",
            )
            .fetch_all(&mut *tx)
            .await?;
            let mut documents = Vec::with_capacity(doc_rows.len());
            for r in doc_rows {
                documents.push(Document {
                    source: r.try_get(0)?,
                    title: r.try_get(1)?,
                    tenant: r.try_get(2)?,
                    roles: r.try_get(3)?,
                    version: r.try_get(4)?,
                    updated: r.try_get(5)?,
                    status: parse_status(&r.try_get::<String, _>(6)?),
                    content_hash: r.try_get(7)?,
                });
            }
            let chunk_rows = sqlx::query(
                "select id, document, ordinal, title_path, source_uri, content, content_hash,
                        metadata, tenant, roles, status
                 from chunks order by document collate \"C\", seq",
            )
            .fetch_all(&mut *tx)
            .await?;
            let mut chunks = Vec::with_capacity(chunk_rows.len());
            for r in chunk_rows {
                let meta: sqlx::types::Json<ChunkMeta> = r.try_get(7)?;
                let meta = meta.0;
                chunks.push(Chunk {
                    id: r.try_get(0)?,
                    source: r.try_get(1)?,
                    ordinal: r.try_get::<i32, _>(2)? as u32,
                    title_path: r.try_get(3)?,
                    headings: meta.headings,
                    source_uri: r.try_get(4)?,
                    text: r.try_get(5)?,
                    content_hash: r.try_get(6)?,
                    tenant: r.try_get(8)?,
                    roles: r.try_get(9)?,
                    version: meta.version,
                    updated: meta.updated,
                    status: parse_status(&r.try_get::<String, _>(10)?),
                });
            }
            tx.commit().await?;
            Ok(Snapshot {
                data_version: data_version as u64,
                documents,
                chunks,
                space,
                knowledge_root,
                last_run,
            })
        })
        .map_err(|e: sqlx::Error| self.err(e))
    }

    /// The vector leg: the `k` chunks nearest to `query` (cosine) that `access` may see, with
    /// the filter in the `WHERE` clause. With [`VectorSearchMode::Hnsw`] the HNSW index answers
    /// (iterative scans keep a selective filter returning `k` rows); with
    /// [`VectorSearchMode::Exact`] every visible row is scored.
    pub fn vector_search(
        &self,
        space: &Space,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<VectorHits, PgError> {
        self.vector_search_with(
            self.settings.vector_search,
            space,
            query,
            k,
            access,
            include_superseded,
        )
    }

    /// [`PgStore::vector_search`] with an explicit mode.
    pub fn vector_search_with(
        &self,
        mode: VectorSearchMode,
        space: &Space,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<VectorHits, PgError> {
        let Some(query) = self.query_vector(space, query)? else {
            return Ok(VectorHits {
                hits: Vec::new(),
                data_version: self.data_version()?,
            });
        };
        if k == 0 {
            return Ok(VectorHits {
                hits: Vec::new(),
                data_version: self.data_version()?,
            });
        }
        let sql = vector_sql(mode, &space.table, include_superseded);
        let roles = access_roles(access);
        let rows = self
            .block_on(
                sqlx::query(AssertSqlSafe(sql))
                    .bind(query)
                    .bind(&access.tenant)
                    .bind(&roles)
                    .bind(k as i64)
                    .fetch_all(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        let mut data_version = None;
        let mut hits: Vec<(String, i64, f64)> = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get(0).map_err(|e| self.err(e))?;
            let pk: i64 = row.try_get(1).map_err(|e| self.err(e))?;
            let distance: f64 = row.try_get(2).map_err(|e| self.err(e))?;
            let v: i64 = row.try_get(3).map_err(|e| self.err(e))?;
            data_version = Some(v as u64);
            if distance.is_finite() {
                hits.push((id, pk, distance));
            }
        }
        // Relaxed-order iterative scans may return rows slightly out of order.
        hits.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.1.cmp(&b.1)));
        let data_version = match data_version {
            Some(v) => v,
            None => self.data_version()?,
        };
        Ok(VectorHits {
            hits: hits
                .into_iter()
                .map(|(id, _, d)| (id, (1.0 - d) as f32))
                .collect(),
            data_version,
        })
    }

    /// `VectorLeg::similarity_spread` in SQL:
    /// the visible rows of `space` in the in-memory store's order (document, then position),
    /// sampled as the embedded store samples them (`SampleRuns`: all of them when they fit,
    /// else runs of consecutive rows, every `run_step`-th run), their mean and population
    /// spread of cosine similarity to `query`. `None` for a query of another dimension, or the
    /// zero vector.
    pub fn similarity_spread(
        &self,
        space: &Space,
        query: &[f32],
        access: &AccessContext,
        sample: usize,
        min_visible: usize,
    ) -> Result<Option<SimilaritySpread>, PgError> {
        if query.len() != space.info.dims as usize {
            return Ok(None);
        }
        let Some(query) = self.query_vector(space, query)? else {
            return Ok(None);
        };
        let table = &space.table;
        let sql = format!(
            "with visible as (
               select case when v.embedding is null then 0
                           else 1 - (v.embedding <=> $1) end::float8 as sim,
                      row_number() over (order by c.document collate \"C\", c.seq) - 1 as i,
                      count(*) over () as n
               from {table} v join chunks c on c.pk = v.chunk_pk
               where v.tenant = $2 and v.access_roles && $3 and v.status <> 'superseded'
             )
             select coalesce(max(n), 0)::int8, count(*)::int8, avg(sim)::float8,
                    stddev_pop(sim)::float8
             from visible where n <= $6 or (i / $4) % ((((n + $4 - 1) / $4) + $5 - 1) / $5) = 0"
        );
        let roles = access_roles(access);
        let runs = SampleRuns::of(sample);
        let row = self
            .block_on(
                sqlx::query(AssertSqlSafe(sql))
                    .bind(query)
                    .bind(&access.tenant)
                    .bind(&roles)
                    .bind(runs.run as i64)
                    .bind(runs.runs as i64)
                    .bind(runs.sample as i64)
                    .fetch_one(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        let visible: i64 = row.try_get(0).map_err(|e| self.err(e))?;
        let sampled: i64 = row.try_get(1).map_err(|e| self.err(e))?;
        let mean: Option<f64> = row.try_get(2).map_err(|e| self.err(e))?;
        let spread: Option<f64> = row.try_get(3).map_err(|e| self.err(e))?;
        if (visible as usize) < min_visible {
            return Ok(None);
        }
        Ok(mean.zip(spread).map(|(mean, spread)| SimilaritySpread {
            mean,
            spread,
            sampled: sampled as usize,
        }))
    }

    /// `VectorLeg::similarity` in SQL: `query`'s cosine
    /// similarity with the chunk's row of `space` (`None`: no row, another dimension or the
    /// zero query).
    pub fn similarity(
        &self,
        space: &Space,
        query: &[f32],
        chunk_id: &str,
    ) -> Result<Option<f64>, PgError> {
        if query.len() != space.info.dims as usize {
            return Ok(None);
        }
        let Some(query) = self.query_vector(space, query)? else {
            return Ok(None);
        };
        let sql = format!(
            "select case when embedding is null then 0
                         else 1 - (embedding <=> $1) end::float8
             from {} where chunk_id = $2 limit 1",
            space.table
        );
        self.block_on(
            sqlx::query_scalar(AssertSqlSafe(sql))
                .bind(query)
                .bind(chunk_id)
                .fetch_optional(&self.pool),
        )
        .map_err(|e| self.err(e))
    }

    /// `EXPLAIN` of the vector leg's query (for tests and operators).
    pub fn explain_vector_search(
        &self,
        mode: VectorSearchMode,
        space: &Space,
        query: &[f32],
        k: usize,
        access: &AccessContext,
        include_superseded: bool,
    ) -> Result<String, PgError> {
        let query = self
            .query_vector(space, query)?
            .unwrap_or_else(|| Vector::from(vec![1.0; space.info.dims as usize]));
        let sql = format!(
            "explain {}",
            vector_sql(mode, &space.table, include_superseded)
        );
        let roles = access_roles(access);
        let lines: Vec<String> = self
            .block_on(
                sqlx::query_scalar(AssertSqlSafe(sql))
                    .bind(query)
                    .bind(&access.tenant)
                    .bind(&roles)
                    .bind(k as i64)
                    .fetch_all(&self.pool),
            )
            .map_err(|e| self.err(e))?;
        Ok(lines.join("\n"))
    }

    /// The query as a pgvector value, or `None` for the zero vector (it matches nothing).
    fn query_vector(&self, space: &Space, query: &[f32]) -> Result<Option<Vector>, PgError> {
        if query.len() != space.info.dims as usize {
            return Err(PgError::DimensionMismatch {
                embedder: describe(&space.info),
                table: space.table.clone(),
                column_dims: space.info.dims,
                embedder_dims: query.len() as u32,
            });
        }
        if query.iter().any(|x| !x.is_finite()) {
            return Err(PgError::Invalid(
                "the query vector holds a non-finite number".to_string(),
            ));
        }
        if query.iter().all(|&x| x == 0.0) {
            return Ok(None);
        }
        Ok(Some(Vector::from(query.to_vec())))
    }
}

fn run_on<F>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        // Blocking inside another runtime would panic: run on a helper thread instead.
        std::thread::scope(|s| match s.spawn(|| rt.block_on(fut)).join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    } else {
        rt.block_on(fut)
    }
}

fn vector_sql(mode: VectorSearchMode, table: &str, include_superseded: bool) -> String {
    let status = if include_superseded {
        ""
    } else {
        " and v.status <> 'superseded'"
    };
    // `+ 0` keeps the planner from using the index: every visible row is scored.
    let order = match mode {
        VectorSearchMode::Hnsw => "v.embedding <=> $1",
        VectorSearchMode::Exact => "(v.embedding <=> $1) + 0, v.chunk_pk",
    };
    format!(
        "select v.chunk_id, v.chunk_pk, (v.embedding <=> $1)::float8 as distance,
                (select data_version from kb_state) as data_version
         from {table} v
         where v.tenant = $2 and v.access_roles && $3{status} and v.embedding is not null
         order by {order}
         limit $4"
    )
}

fn access_roles(access: &AccessContext) -> Vec<String> {
    std::iter::once(PUBLIC_ROLE.to_string())
        .chain(access.roles.iter().cloned())
        .collect()
}

fn create_vector_table_sql(table: &str, dims: u32) -> String {
    format!(
        "create table if not exists {table} (
           chunk_pk     bigint primary key references chunks (pk) on delete cascade,
           chunk_id     text not null,
           tenant       text not null,
           -- the chunk's roles, or '{{{PUBLIC_ROLE}}}' when everyone in the tenant may read it
           access_roles text[] not null,
           status       text not null,
           -- null for a zero vector (it matches nothing)
           embedding    vector({dims})
         )"
    )
}

fn space_from_row(r: &sqlx::postgres::PgRow) -> Result<Space, sqlx::Error> {
    Ok(Space {
        id: r.try_get(0)?,
        info: EmbedderInfo {
            kind: r.try_get(1)?,
            model: r.try_get(2)?,
            dims: r.try_get::<i32, _>(3)? as u32,
            marking: marking_from_column(r.try_get(7)?)?,
        },
        table: r.try_get(4)?,
        hnsw_m: r.try_get::<i32, _>(5)? as u32,
        hnsw_ef_construction: r.try_get::<i32, _>(6)? as u32,
    })
}

fn parse_status(s: &str) -> DocStatus {
    match s {
        "superseded" => DocStatus::Superseded,
        "draft" => DocStatus::Draft,
        _ => DocStatus::Active,
    }
}

/// `kind:model (N dims)`, and the marking when there is one.
pub fn describe(info: &EmbedderInfo) -> String {
    info.describe()
}

/// The `embedding_spaces.marking` value of a marking: its JSON, or '' for none (the value rows
/// written before markings existed hold).
fn marking_column(marking: &Marking) -> String {
    if marking.is_none() {
        String::new()
    } else {
        serde_json::to_string(marking).unwrap_or_default()
    }
}

fn marking_from_column(column: String) -> Result<Marking, sqlx::Error> {
    if column.is_empty() {
        return Ok(Marking::None);
    }
    serde_json::from_str(&column).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// One document's chunks as column arrays, for a single `UNNEST` insert.
struct ChunkColumns {
    id: Vec<String>,
    seq: Vec<i32>,
    ordinal: Vec<i32>,
    title_path: Vec<String>,
    source_uri: Vec<String>,
    content: Vec<String>,
    content_hash: Vec<String>,
    metadata: Vec<String>,
    tenant: Vec<String>,
    roles: Vec<String>,
    status: Vec<String>,
    embedding: Vec<Option<Vector>>,
}

impl ChunkColumns {
    fn new(chunks: &[Chunk], vectors: &[Vec<f32>]) -> Self {
        let n = chunks.len();
        let mut c = Self {
            id: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
            ordinal: Vec::with_capacity(n),
            title_path: Vec::with_capacity(n),
            source_uri: Vec::with_capacity(n),
            content: Vec::with_capacity(n),
            content_hash: Vec::with_capacity(n),
            metadata: Vec::with_capacity(n),
            tenant: Vec::with_capacity(n),
            roles: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            embedding: Vec::with_capacity(n),
        };
        for (i, (chunk, v)) in chunks.iter().zip(vectors).enumerate() {
            let meta = ChunkMeta {
                headings: chunk.headings.clone(),
                version: chunk.version.clone(),
                updated: chunk.updated.clone(),
            };
            c.id.push(chunk.id.clone());
            c.seq.push(i as i32);
            c.ordinal.push(chunk.ordinal as i32);
            c.title_path.push(chunk.title_path.clone());
            c.source_uri.push(chunk.source_uri.clone());
            c.content.push(chunk.text.clone());
            c.content_hash.push(chunk.content_hash.clone());
            c.metadata
                .push(serde_json::to_string(&meta).unwrap_or_else(|_| "{}".to_string()));
            c.tenant.push(chunk.tenant.clone());
            c.roles
                .push(serde_json::to_string(&chunk.roles).unwrap_or_else(|_| "[]".to_string()));
            c.status.push(chunk.status.as_str().to_string());
            c.embedding
                .push(v.iter().any(|&x| x != 0.0).then(|| Vector::from(v.clone())));
        }
        c
    }
}
