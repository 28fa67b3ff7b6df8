-- What the chunks' text is: 1, the Markdown as written (before this migration); 2, plain text
-- rendered from it. An ingest that finds another number than the engine's re-reads every
-- document (its files may be unchanged, but their chunks are not what this engine writes).
alter table kb_state add column text_format integer not null default 1;
