-- An ingest run whose process died (killed, crashed, lost its connection) before it committed:
-- 'abandoned', set by the next ingest or status, which can tell because a live run holds an
-- advisory lock on its own connection (released by the server when that connection goes).
alter table ingest_runs drop constraint ingest_runs_status_check;
alter table ingest_runs add constraint ingest_runs_status_check
    check (status in ('running', 'committed', 'abandoned'));
