-- Report definitions, their runs and the files the runs stored.

CREATE TABLE reports (
  id TEXT PRIMARY KEY,                             -- uuid
  name TEXT NOT NULL,
  -- The name trimmed and lower-cased (Unicode-aware, by the server): unique, so that two
  -- definitions can never differ only in case, whatever happens at the same time.
  name_key TEXT NOT NULL UNIQUE,
  description TEXT,
  type TEXT NOT NULL,
  format TEXT NOT NULL CHECK (format IN ('PDF', 'CSV')),
  filters TEXT NOT NULL DEFAULT '{}',              -- JSON object
  schedule TEXT,                                   -- JSON object; null: runs on request only
  recipients TEXT NOT NULL DEFAULT '[]',           -- JSON array of addresses
  sender TEXT,
  is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
  owner TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  -- The next due time the scheduler has not queued yet. Queuing a due time and moving
  -- this past it happen in one transaction: that is what makes each due time run once,
  -- across restarts too.
  next_run_ms INTEGER,
  retention_files INTEGER NOT NULL DEFAULT 30,
  retention_bytes INTEGER NOT NULL DEFAULT 536870912
);
CREATE INDEX reports_due ON reports (next_run_ms) WHERE next_run_ms IS NOT NULL;

CREATE TABLE report_runs (
  seq INTEGER PRIMARY KEY,                         -- queue order
  id TEXT NOT NULL UNIQUE,                         -- uuid; also the id of the file it stores
  report_id TEXT NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
  trigger TEXT NOT NULL CHECK (trigger IN ('schedule', 'request', 'catchUp')),
  requested_by TEXT,
  due_ms INTEGER NOT NULL,
  queued_ms INTEGER NOT NULL,
  started_ms INTEGER,
  finished_ms INTEGER,
  status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  reason TEXT,
  -- The definition as it was when the run was queued: a later change does not alter it.
  definition TEXT NOT NULL,
  format TEXT NOT NULL CHECK (format IN ('PDF', 'CSV')),
  file_name TEXT,
  file_path TEXT,                                  -- relative to the data directory
  size_bytes INTEGER,
  row_count INTEGER,
  truncated INTEGER NOT NULL DEFAULT 0,
  file_deleted_ms INTEGER,
  email_status TEXT NOT NULL DEFAULT 'none' CHECK (email_status IN ('none', 'pending', 'sent', 'partial', 'failed')),
  email_detail TEXT,
  email_attempts INTEGER NOT NULL DEFAULT 0,
  email_next_ms INTEGER                            -- when a pending e-mail is (re)tried
);
CREATE INDEX report_runs_report ON report_runs (report_id, seq);
CREATE INDEX report_runs_open ON report_runs (status, seq) WHERE status IN ('queued', 'running');
CREATE INDEX report_runs_mail ON report_runs (email_next_ms) WHERE email_status = 'pending';
