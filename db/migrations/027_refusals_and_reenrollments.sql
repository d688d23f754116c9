-- Repeated refusals are kept as one record per window: the first refusal of a kind (actor,
-- operation, outcome, status, reason) is written with its key, and the repeats within its
-- window are counted in audit_refusal_counts, whose row becomes one summary record when the
-- window closes. The counter table holds one row per kind refused in the open window only.
ALTER TABLE audit_trail ADD COLUMN refusal_key TEXT;
CREATE INDEX audit_trail_refusals ON audit_trail (refusal_key, created_ms) WHERE refusal_key IS NOT NULL;
CREATE TABLE audit_refusal_counts (
  refusal_key TEXT PRIMARY KEY,
  first_id INTEGER NOT NULL,                       -- the record of the first refusal of the window
  window_end_ms INTEGER NOT NULL,
  repeats INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  source_ips TEXT NOT NULL DEFAULT ''              -- up to a few addresses the repeats came from, space-separated
) WITHOUT ROWID;
CREATE INDEX audit_refusal_counts_due ON audit_refusal_counts (window_end_ms);

-- A re-enrollment of an enrolled machine that did not prove the agent's current credential:
-- held (one per agent, the latest replaces the one before) until an Administrator approves
-- it, when its credential replaces the agent's, or rejects it. Only the hash is kept.
CREATE TABLE agent_reenrollments (
  agent_id INTEGER PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  credential_hash TEXT NOT NULL UNIQUE,
  host_identifier TEXT NOT NULL,
  source_ip TEXT,
  requested_ms INTEGER NOT NULL
);

-- An attempt to move an enrolled identity is a risk notification of its own.
INSERT INTO risk_notification_kinds (event_code, kind, severity, title) VALUES
  ('0x310006', 'AgentReEnrollmentHeld', 3, 'Re-enrollment held for approval: ');
