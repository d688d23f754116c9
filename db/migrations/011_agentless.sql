-- Agentless connections, the worker pollers that check them, their check runs, and the
-- locations last published to the asset feed.

CREATE TABLE worker_pollers (
  id TEXT PRIMARY KEY,                             -- uuid, lower-case
  name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  credential_hash TEXT NOT NULL UNIQUE,            -- sha256 of the ppl_ credential
  host_name TEXT,
  ip_address TEXT,                                 -- source address of its last call
  version TEXT,
  is_activated INTEGER NOT NULL DEFAULT 0,
  activation_changed_ms INTEGER,
  activation_changed_by TEXT,
  last_heartbeat_ms INTEGER,
  started_ms INTEGER,                              -- when the poller process started (reported)
  active_checks INTEGER,
  -- Set by the sweeper when heartbeats stop, cleared by the next heartbeat (one event each way).
  offline_since_ms INTEGER,
  created_ms INTEGER NOT NULL,
  -- Changes whenever the poller's connections, their settings or credentials change.
  assignments_revision INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE agentless_connections (
  id INTEGER PRIMARY KEY,
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
CREATE INDEX agentless_connections_poller ON agentless_connections (poller_id, status);
CREATE INDEX agentless_connections_start ON agentless_connections (start_ms);

-- Runs as reported, kept per connection only as far back as the previous errors reach.
CREATE TABLE agentless_runs (
  run_id TEXT PRIMARY KEY,
  connection_id INTEGER NOT NULL REFERENCES agentless_connections (id) ON DELETE CASCADE,
  poller_id TEXT,
  status TEXT NOT NULL CHECK (status IN ('Running', 'Reachable', 'Unreachable', 'Failed')),
  start_ms INTEGER NOT NULL,
  end_ms INTEGER,
  description TEXT,
  error TEXT,
  recorded_ms INTEGER NOT NULL
);
CREATE INDEX agentless_runs_connection ON agentless_runs (connection_id, start_ms);

-- What the asset feed last published of each asset's location (SendMonitorOldLocation).
-- Peripherals are keyed by what identifies the device itself (VID, PID and serial), so
-- that one plugged into another agent is recognised as moved.
CREATE TABLE asset_locations (
  asset_type TEXT NOT NULL CHECK (asset_type IN ('Agent', 'Peripheral', 'AgentlessHost')),
  asset_key TEXT NOT NULL,
  location TEXT NOT NULL,                          -- JSON AssetFeedLocation
  published_ms INTEGER NOT NULL,
  PRIMARY KEY (asset_type, asset_key)
) WITHOUT ROWID;
