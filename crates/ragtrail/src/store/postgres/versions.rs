//! The `chunk_versions` table: every chunk text ever indexed (see `store::versions`).

use sqlx::Row;

use super::{ChunkColumns, PgError, PgStore, parse_status};
use crate::store::versions::ChunkVersion;

/// Stores the versions of one document's chunks that are not kept yet, inside the transaction
/// that writes the chunks (so a version exists for every text that was ever current). A pruned
/// text indexed again gets its content back.
pub(super) async fn insert_versions(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    source: &str,
    data_version: i64,
    rows: &ChunkColumns,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into chunk_versions (chunk_id, content_hash, document, title_path, source_uri,
                                     content, tenant, roles, status, data_version)
         select distinct on (u.id, u.content_hash) u.id, u.content_hash, $1, u.title_path,
                u.source_uri, u.content, u.tenant,
                array(select jsonb_array_elements_text(u.roles::jsonb)), u.status, $2
         from unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                     $9::text[], $10::text[])
              as u(id, content_hash, title_path, source_uri, content, tenant, roles, status)
         order by u.id, u.content_hash
         on conflict (chunk_id, content_hash) do update
           set content = excluded.content, pruned_at = null
           where chunk_versions.content is null",
    )
    .bind(source)
    .bind(data_version)
    .bind(&rows.id)
    .bind(&rows.content_hash)
    .bind(&rows.title_path)
    .bind(&rows.source_uri)
    .bind(&rows.content)
    .bind(&rows.tenant)
    .bind(&rows.roles)
    .bind(&rows.status)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl PgStore {
    /// Every version stored of chunk `id`, oldest first (pruned ones without text). Access is
    /// the caller's to apply (`ChunkVersion::visible_to`).
    pub fn chunk_versions(&self, id: &str) -> Result<Vec<ChunkVersion>, PgError> {
        let rows = self
            .block_on(
                sqlx::query(
                    "select chunk_id, content_hash, document, title_path, source_uri, content,
                            tenant, roles, status,
                            to_char(first_indexed at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                            to_char(pruned_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                     from chunk_versions where chunk_id = $1
                     order by first_indexed, data_version, content_hash",
                )
                .bind(id)
                .fetch_all(self.pool()),
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                Ok(ChunkVersion {
                    chunk_id: r.try_get(0)?,
                    content_hash: r.try_get(1)?,
                    source: r.try_get(2)?,
                    title_path: r.try_get(3)?,
                    source_uri: r.try_get(4)?,
                    text: r.try_get(5)?,
                    tenant: r.try_get(6)?,
                    roles: r.try_get(7)?,
                    status: parse_status(&r.try_get::<String, _>(8)?),
                    first_indexed: r.try_get(9)?,
                    pruned_at: r.try_get(10)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(|e| self.err(e))
    }

    /// Clears the text of every version beyond the newest `keep` past ones of each chunk id
    /// (today's texts, in `chunks`, are never pruned). Returns how many were pruned.
    pub fn prune_versions(&self, keep: usize) -> Result<usize, PgError> {
        let pruned = self
            .block_on(
                sqlx::query(
                    "with past as (
                       select v.chunk_id, v.content_hash,
                              row_number() over (partition by v.chunk_id
                                                 order by v.first_indexed desc, v.data_version desc) as n
                       from chunk_versions v
                       where v.content is not null
                         and not exists (select 1 from chunks c
                                         where c.id = v.chunk_id and c.content_hash = v.content_hash))
                     update chunk_versions v set content = null, pruned_at = now()
                     from past
                     where past.chunk_id = v.chunk_id and past.content_hash = v.content_hash
                       and past.n > $1",
                )
                .bind(keep as i64)
                .execute(self.pool()),
            )
            .map_err(|e| self.err(e))?;
        Ok(pruned.rows_affected() as usize)
    }
}
