-- Every chunk text ever indexed, kept by (chunk id, content hash): an audit shows the exact text
-- a run was shown after its document was edited or removed. Append-only: ingest inserts the
-- versions it has not stored yet, in the same transaction as the document's chunks, and never
-- updates a row; only pruning (`ingest --keep-versions N`) clears an old version's content and
-- stamps pruned_at, so an audit can say "pruned" instead of "unknown". Chunks deleted from
-- `chunks` (an edited or removed document) keep their rows here.
create table chunk_versions (
    chunk_id         text not null,
    content_hash     text not null,
    document         text not null,
    title_path       text not null,
    source_uri       text not null,
    -- NULL once pruned.
    content          text,
    -- Who could see this text: the chunk's access when it was indexed.
    tenant           text not null,
    roles            text[] not null default '{}',
    status           text not null,
    first_indexed    timestamptz not null default now(),
    -- kb_state.data_version of the transaction that first stored it.
    data_version     bigint not null,
    pruned_at        timestamptz,
    primary key (chunk_id, content_hash)
);

-- The chunks already there are today's versions.
insert into chunk_versions (chunk_id, content_hash, document, title_path, source_uri, content,
                            tenant, roles, status, data_version)
select distinct on (id, content_hash) id, content_hash, document, title_path, source_uri, content,
       tenant, roles, status, (select data_version from kb_state)
from chunks
order by id, content_hash, pk;
