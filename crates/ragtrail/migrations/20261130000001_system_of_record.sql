-- ragtrail's system of record in PostgreSQL + pgvector.
--
-- Documents and chunks live here; tantivy (the BM25 index) is derived from them and can be
-- rebuilt at any time. Vectors live in one table per embedding space (`vectors_<id>`), created by
-- ingest when it first meets an embedder, because a vector column needs a fixed dimension that a
-- plain SQL migration cannot know.

create extension if not exists vector;

-- One row: the state of the knowledge base as a whole.
create table kb_state (
    singleton      boolean primary key default true check (singleton),
    -- Names this knowledge base: a local BM25 index built from another database is never
    -- mistaken for this one's.
    kb_id          text not null default md5(random()::text || clock_timestamp()::text),
    -- Bumped by every transaction that changes documents or chunks. A BM25 index records the
    -- version it reflects; a different number means it is stale and must catch up.
    data_version   bigint not null default 0,
    -- The embedding space whose vectors the vector leg searches.
    active_space   integer,
    last_run       bigint,
    updated_at     timestamptz not null default now()
);
insert into kb_state default values;

-- Embedders met by ingest: one vector table (and HNSW index) per space.
create table embedding_spaces (
    id               serial primary key,
    kind             text not null,
    model            text not null,
    dims             integer not null check (dims between 1 and 2000),
    table_name       text not null unique,
    hnsw_m           integer not null,
    hnsw_ef_construction integer not null,
    created_at       timestamptz not null default now(),
    unique (kind, model)
);
alter table kb_state
    add constraint kb_state_active_space_fkey foreign key (active_space) references embedding_spaces (id);

create table ingest_runs (
    id               bigserial primary key,
    started_at       timestamptz not null default now(),
    finished_at      timestamptz,
    status           text not null default 'running' check (status in ('running', 'committed')),
    knowledge_root   text,
    space            integer references embedding_spaces (id),
    rebuild          boolean not null default false,
    added            integer not null default 0,
    changed          integer not null default 0,
    removed          integer not null default 0,
    unchanged        integer not null default 0,
    chunks           integer not null default 0,
    -- kb_state.data_version when the run committed.
    data_version     bigint
);
alter table kb_state
    add constraint kb_state_last_run_fkey foreign key (last_run) references ingest_runs (id);

create table documents (
    source           text primary key,
    title            text not null,
    tenant           text not null,
    roles            text[] not null default '{}',
    version          text,
    updated          text,
    status           text not null check (status in ('active', 'superseded', 'draft')),
    -- SHA-256 of the file: its chunks are replaced only when this changes.
    content_hash     text not null,
    ingest_run       bigint references ingest_runs (id),
    data_version     bigint not null,
    written_at       timestamptz not null default now()
);

create table chunks (
    pk               bigserial primary key,
    -- Place-based id: hash of (source, heading path, ordinal within the section).
    id               text not null check (id ~ '^c_[0-9a-f]{16}$'),
    document         text not null references documents (source) on delete cascade,
    -- Position of the chunk within its document.
    seq              integer not null,
    ordinal          integer not null,
    title_path       text not null,
    source_uri       text not null,
    content          text not null,
    content_hash     text not null,
    -- headings, version, updated: what search shows but never filters on.
    metadata         jsonb not null default '{}',
    tenant           text not null,
    roles            text[] not null default '{}',
    status           text not null check (status in ('active', 'superseded', 'draft')),
    unique (document, seq)
);
create index chunks_id on chunks (id);
create index chunks_content_hash on chunks (content_hash);
