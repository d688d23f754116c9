-- Retention (lib/retention.ts): old events and audit records are archived, then deleted by
-- the retention job, and only by it.
--
-- The gate is opened by the job inside its own transaction, with the cutoff it prunes
-- before, and closed again before that transaction commits: no other connection ever sees
-- it open. Audit records stay immutable for everything else, and even the job cannot
-- delete a record newer than its cutoff.
CREATE TABLE retention_gate (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  open INTEGER NOT NULL DEFAULT 0 CHECK (open IN (0, 1)),
  before_ms INTEGER NOT NULL DEFAULT 0
);
INSERT INTO retention_gate (id, open, before_ms) VALUES (1, 0, 0);

DROP TRIGGER audit_trail_no_delete;
CREATE TRIGGER audit_trail_no_delete BEFORE DELETE ON audit_trail
WHEN NOT EXISTS (SELECT 1 FROM retention_gate WHERE id = 1 AND open = 1 AND old.created_ms < before_ms)
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;

-- The job takes what it deletes out of the query index's counts itself (db/event-index.ts
-- prune): the index need not start over.
DROP TRIGGER events_index_stale_delete;
CREATE TRIGGER events_index_stale_delete AFTER DELETE ON events
WHEN old.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')
  AND NOT EXISTS (SELECT 1 FROM retention_gate WHERE id = 1 AND open = 1)
BEGIN UPDATE record_index_state SET stale = 1 WHERE name = 'events'; END;

-- Records with ids up to this were pruned: a process whose counts in memory predate it
-- reads them again.
ALTER TABLE record_index_state ADD COLUMN pruned_through INTEGER NOT NULL DEFAULT 0;

-- Sizes of the data directory over time, for its growth and the time until the disk is full.
CREATE TABLE data_dir_samples (
  sampled_ms INTEGER PRIMARY KEY,
  bytes INTEGER NOT NULL,
  free_bytes INTEGER NOT NULL
);

-- Completed commands by age (the retention of command history).
CREATE INDEX agent_commands_done ON agent_commands (completed_ms) WHERE completed_ms IS NOT NULL;
CREATE INDEX agent_debug_logs_created ON agent_debug_logs (created_ms);
CREATE INDEX agentless_runs_recorded ON agentless_runs (recorded_ms);
