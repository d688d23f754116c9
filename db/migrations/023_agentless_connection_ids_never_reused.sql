-- foreign keys: off
-- A connection's id is never given again, for the reason accounts' are not (migration 022):
-- a client acting on a deleted connection's id must not reach the next one created. Rebuilt
-- the same way, foreign keys off so that dropping the old table does not cascade to the runs.
CREATE TABLE agentless_connections_rebuilt (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  address TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (protocol IN ('SSH', 'WinRM')),
  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
  use_tls INTEGER NOT NULL DEFAULT 0,
  user_name TEXT NOT NULL,
  credential_type TEXT NOT NULL CHECK (credential_type IN ('Password', 'PrivateKey')),
  -- AES-256-GCM of the JSON {password, privateKey, privateKeyPassphrase}; the key is not in the database.
  credentials BLOB NOT NULL,
  credentials_updated_ms INTEGER NOT NULL,
  is_override_defaults INTEGER NOT NULL DEFAULT 0,
  polling_interval_s INTEGER,                      -- null: the system default
  timeout_s INTEGER,
  poller_id TEXT REFERENCES worker_pollers (id) ON DELETE SET NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  -- The latest run (Pending: none yet).
  status TEXT NOT NULL DEFAULT 'Pending' CHECK (status IN ('Pending', 'Running', 'Reachable', 'Unreachable', 'Failed')),
  status_description TEXT,
  status_error TEXT,
  run_id TEXT,
  start_ms INTEGER,
  end_ms INTEGER,
  last_reachable_ms INTEGER,
  -- The status of the latest finished run: a change between reachable and not raises an event.
  last_result TEXT,
  -- The failed runs before the latest, newest first (JSON array, at most 10), as the list shows them.
  prev_errors TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO agentless_connections_rebuilt (id, name, address, protocol, port, use_tls, user_name, credential_type, credentials, credentials_updated_ms, is_override_defaults, polling_interval_s, timeout_s, poller_id, created_ms, updated_ms, status, status_description, status_error, run_id, start_ms, end_ms, last_reachable_ms, last_result, prev_errors)
SELECT id, name, address, protocol, port, use_tls, user_name, credential_type, credentials, credentials_updated_ms, is_override_defaults, polling_interval_s, timeout_s, poller_id, created_ms, updated_ms, status, status_description, status_error, run_id, start_ms, end_ms, last_reachable_ms, last_result, prev_errors FROM agentless_connections;
DROP TABLE agentless_connections;
ALTER TABLE agentless_connections_rebuilt RENAME TO agentless_connections;
CREATE INDEX agentless_connections_poller ON agentless_connections (poller_id, status);
CREATE INDEX agentless_connections_start ON agentless_connections (start_ms);
-- (sqlite_sequence has no key: a row for the table is made only when there is none.)
INSERT INTO sqlite_sequence (name, seq) SELECT 'agentless_connections', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'agentless_connections');
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max(id) FROM agentless_connections), 0)) WHERE name = 'agentless_connections';
