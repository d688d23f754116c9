-- Reports (definitions, runs, their files) and the insights' kept answers, on PostgreSQL.
-- Rows answer in SQLite's shape (db/schema.sql): same columns, flags 0/1, times in ms.

CREATE TABLE reports (
  id text PRIMARY KEY,                             -- uuid
  name text NOT NULL,
  -- The name trimmed and lower-cased (Unicode-aware, by the server): unique, so that two
  -- definitions can never differ only in case, whatever happens at the same time.
  name_key text NOT NULL UNIQUE,
  description text,
  type text NOT NULL,
  format text NOT NULL CHECK (format IN ('PDF', 'CSV')),
  filters text NOT NULL DEFAULT '{}',              -- JSON object
  schedule text,                                   -- JSON object; null: runs on request only
  recipients text NOT NULL DEFAULT '[]',           -- JSON array of addresses
  sender text,
  is_active smallint NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
  owner text NOT NULL,
  created_ms bigint NOT NULL,
  updated_ms bigint NOT NULL,
  -- The next due time the scheduler has not queued yet. Queuing a due time and moving
  -- this past it happen in one transaction, the move conditional on the value read
  -- (UPDATE ... WHERE next_run_ms = <read>): of two nodes queuing the same due time, the
  -- second one's UPDATE waits for the first's commit, then matches no row and queues
  -- nothing. That is what makes each due time run once, across nodes and restarts.
  next_run_ms bigint,
  retention_files bigint NOT NULL DEFAULT 30,
  retention_bytes bigint NOT NULL DEFAULT 536870912
);

CREATE INDEX reports_due ON reports (next_run_ms) WHERE next_run_ms IS NOT NULL AND is_active = 1;

CREATE TABLE report_runs (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- queue order
  id text NOT NULL UNIQUE,                         -- uuid; also the id of the file it stores
  report_id text NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
  trigger text NOT NULL CHECK (trigger IN ('schedule', 'request', 'catchUp')),
  requested_by text,
  due_ms bigint NOT NULL,
  queued_ms bigint NOT NULL,
  started_ms bigint,
  finished_ms bigint,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  reason text,
  -- The definition as it was when the run was queued: a later change does not alter it.
  definition text NOT NULL,
  format text NOT NULL CHECK (format IN ('PDF', 'CSV')),
  file_name text,
  -- SQLite: the file's path relative to the data directory. Here the file is in
  -- report_files (any node serves it); the column still says that the run stored one.
  file_path text,
  size_bytes bigint,
  row_count bigint,
  truncated smallint NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
  file_deleted_ms bigint,
  email_status text NOT NULL DEFAULT 'none' CHECK (email_status IN ('none', 'pending', 'sent', 'partial', 'failed')),
  email_detail text,
  email_attempts bigint NOT NULL DEFAULT 0,
  email_next_ms bigint                            -- when a pending e-mail is (re)tried
);

CREATE INDEX report_runs_mail ON report_runs (email_next_ms) WHERE email_status = 'pending';

CREATE INDEX report_runs_open ON report_runs (status, seq) WHERE status IN ('queued', 'running');

CREATE INDEX report_runs_report ON report_runs (report_id, seq);

-- A run's file, shared by every node (SQLite's server kept it in its data directory). The
-- content is cut in parts of at most a MiB: a file of a million CSV rows is written and
-- read a part at a time, never held whole in memory, and stays below bytea's 1 GB. The
-- head row is written last, in the same transaction as the parts: a file is there whole
-- or not at all.
CREATE TABLE report_files (
  run_id text PRIMARY KEY REFERENCES report_runs (id) ON DELETE CASCADE,
  media_type text NOT NULL,
  size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
  parts integer NOT NULL CHECK (parts >= 0),
  stored_ms bigint NOT NULL
);

CREATE TABLE report_file_parts (
  run_id text NOT NULL REFERENCES report_runs (id) ON DELETE CASCADE,
  part integer NOT NULL CHECK (part >= 0),
  content bytea NOT NULL,
  PRIMARY KEY (run_id, part)
);

-- The insights' kept answers (db/postgres/insights.ts), shared by every node: a node that
-- computes one keeps it for the others, and a change that makes one stale deletes its row,
-- which every node sees at once (no cache in a process's memory).
CREATE TABLE insight_cache (
  name text PRIMARY KEY,
  computed_ms bigint NOT NULL,
  result text NOT NULL                             -- JSON
);
