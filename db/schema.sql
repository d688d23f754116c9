-- The schema after every migration of db/migrations (schema version 39).
-- Written by `npm run schema` (scripts/schema.ts); do not edit: change a migration and run it again.

CREATE TABLE agent_commands (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  type TEXT NOT NULL CHECK (type IN ('SetMode', 'UpdatePolicy', 'UpdateAgent', 'FetchDebugLogs')),
  parameters TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL DEFAULT 'Pending' CHECK (status IN ('Pending', 'Delivered', 'Succeeded', 'Failed', 'Cancelled')),
  created_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  delivered_ms INTEGER,
  completed_ms INTEGER,
  result_message TEXT,
  has_output INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agent_debug_logs (
  id INTEGER PRIMARY KEY,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  command_id INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  content TEXT NOT NULL
);

CREATE TABLE agent_errors (
  id INTEGER PRIMARY KEY,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  time_ms INTEGER NOT NULL,
  code TEXT,
  message TEXT NOT NULL
);

CREATE TABLE "agent_reenrollments" (
  agent_id INTEGER PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  id TEXT NOT NULL UNIQUE,                         -- a random UUID
  credential_hash TEXT NOT NULL UNIQUE,
  host_identifier TEXT NOT NULL,
  source_ip TEXT,
  requested_ms INTEGER NOT NULL
);

CREATE TABLE agent_text_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  agent_id INTEGER NOT NULL
);

CREATE TABLE "agentless_connections" (
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

CREATE TABLE agents (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,                      -- lower-case
  machine_id TEXT NOT NULL COLLATE NOCASE UNIQUE,
  credential_hash TEXT UNIQUE,                     -- sha256 of the pag_ credential
  enrolled_ms INTEGER NOT NULL,
  host_identifier TEXT NOT NULL,
  local_ip_address TEXT,
  os_version TEXT,
  manufacturer TEXT,
  pc_model TEXT,
  nics_json TEXT NOT NULL DEFAULT '[]',
  nics_text TEXT,
  ip_addresses TEXT,                               -- every address, space-separated (IpAddress filter)
  operational_status TEXT NOT NULL DEFAULT 'Free' CHECK (operational_status IN ('Armed', 'Free')),
  is_system_locked INTEGER NOT NULL DEFAULT 0,
  connection_status TEXT NOT NULL DEFAULT 'Disconnected' CHECK (connection_status IN ('Connected', 'Disconnected')),
  display_status TEXT NOT NULL DEFAULT 'Disconnected',
  approved_and_present INTEGER NOT NULL DEFAULT 0,
  approved_and_disconnected INTEGER NOT NULL DEFAULT 0,
  not_approved INTEGER NOT NULL DEFAULT 0,
  latest_event_text TEXT,
  latest_minus1_event_text TEXT,
  latest_minus2_event_text TEXT,
  service_version TEXT,
  kb_driver_version TEXT,
  last_updated_ms INTEGER,                         -- last check-in
  last_configured_ms INTEGER,                      -- last SetMode/UpdatePolicy that succeeded
  license_status TEXT NOT NULL DEFAULT 'Pending' CHECK (license_status IN ('Activated', 'Pending', 'Expired', 'Invalid')),
  expiration_ms INTEGER,
  license_account_id TEXT,
  license_account_name TEXT,
  severity INTEGER NOT NULL DEFAULT 6,
  has_unapproved INTEGER NOT NULL DEFAULT 0,
  has_vulnerable INTEGER NOT NULL DEFAULT 0,
  has_attack_tool INTEGER NOT NULL DEFAULT 0,
  vulnerable_or_wlv INTEGER NOT NULL DEFAULT 0,
  in_action INTEGER NOT NULL DEFAULT 0,
  model_tooltip TEXT,
  running_mode TEXT CHECK (running_mode IS NULL OR running_mode IN ('Standard', 'VDI', 'Server')),
  switch_ip TEXT,
  switch_name TEXT,
  port_id TEXT,
  port_name TEXT,
  ethernets_count INTEGER NOT NULL DEFAULT 0,
  hashtags TEXT,
  logged_on_users TEXT NOT NULL DEFAULT '[]',
  check_in_interval_s INTEGER NOT NULL DEFAULT 60,
  -- A digest of the last check-in's body: an unchanged check-in skips the comparison.
  state_digest TEXT
, rev INTEGER NOT NULL DEFAULT 0);

CREATE VIRTUAL TABLE agents_fts USING fts5 (uuid, ip_addresses, nics_text, tokenize = 'trigram');

CREATE TABLE alarm_attempts (
  id INTEGER PRIMARY KEY,
  outbox_id INTEGER NOT NULL,
  destination_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  duration_ms REAL NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed')),
  error TEXT
);

CREATE TABLE alarm_destinations (
  id TEXT PRIMARY KEY,                             -- uuid
  name TEXT NOT NULL,
  name_key TEXT NOT NULL UNIQUE,                   -- the name lower-cased (Unicode, not only ASCII): names are unique case-insensitively
  type TEXT NOT NULL CHECK (type IN ('syslog', 'webhook', 'email')),
  enabled INTEGER NOT NULL DEFAULT 1,
  min_severity INTEGER NOT NULL DEFAULT 4 CHECK (min_severity BETWEEN 0 AND 7),
  -- Category lists as ',USB,Host,' ('' for all): the outbox triggers match them with instr().
  categories TEXT NOT NULL DEFAULT '',
  audit_categories TEXT NOT NULL DEFAULT '',
  feed_events INTEGER NOT NULL DEFAULT 1,
  feed_audit INTEGER NOT NULL DEFAULT 0,
  feed_assets INTEGER NOT NULL DEFAULT 0,
  settings TEXT NOT NULL,                          -- JSON of the type's settings, with the webhook secret and header values
  created_ms INTEGER NOT NULL,
  created_by TEXT,
  updated_ms INTEGER NOT NULL,
  updated_by TEXT,
  -- The latest attempt, kept here so that listing destinations reads no attempt history.
  last_attempt_ms INTEGER,
  last_status TEXT CHECK (last_status IS NULL OR last_status IN ('delivered', 'failed')),
  last_error TEXT,
  last_delivered_ms INTEGER
, events_from INTEGER NOT NULL DEFAULT 0);

CREATE TABLE alarm_events_queued (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  up_to INTEGER NOT NULL
);

CREATE TABLE alarm_outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  destination_id TEXT NOT NULL,                    -- no foreign key: attempts outlive a removed destination
  feed TEXT NOT NULL CHECK (feed IN ('events', 'audit', 'assets')),
  record_id INTEGER NOT NULL,
  delivery_id TEXT NOT NULL,                       -- uuid, the same for every attempt
  queued_ms INTEGER NOT NULL,                      -- when it was queued (wall clock): retries stop 24 h later
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_ms INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  done_ms INTEGER                                  -- when it was delivered, failed for good or cancelled
, started_ms INTEGER, duration_ms REAL);

CREATE TABLE approvals (
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  vid TEXT NOT NULL,
  pid TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('Approved', 'Disapproved')),
  changed_ms INTEGER NOT NULL,
  changed_by TEXT NOT NULL,
  PRIMARY KEY (agent_id, vid, pid)
) WITHOUT ROWID;

CREATE TABLE asset_gram_rows (
  src INTEGER NOT NULL,
  gram TEXT NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY (src, gram, id)
) WITHOUT ROWID;

CREATE TABLE asset_grams (
  src INTEGER NOT NULL,
  gram TEXT NOT NULL,
  n INTEGER NOT NULL,
  -- Its rows are listed in asset_gram_rows: set while it is held by at most 2000 agents or
  -- 10000 peripherals (db/asset-grams.ts GRAM_CAPS), cleared when it passes that; a gram
  -- that falls back under it is read by walking an index until the next build.
  posted INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (src, gram)
) WITHOUT ROWID;

CREATE TABLE asset_locations (
  asset_type TEXT NOT NULL CHECK (asset_type IN ('Agent', 'Peripheral', 'AgentlessHost')),
  asset_key TEXT NOT NULL,
  location TEXT NOT NULL,                          -- JSON AssetFeedLocation
  published_ms INTEGER NOT NULL,
  PRIMARY KEY (asset_type, asset_key)
) WITHOUT ROWID;

CREATE TABLE asset_messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  asset_key TEXT,
  body TEXT NOT NULL                               -- the message, JSON
);

CREATE TABLE audit_kinds (
  id INTEGER PRIMARY KEY,
  severity INTEGER NOT NULL,
  category TEXT NOT NULL,
  operation_id TEXT,
  outcome TEXT NOT NULL,
  asset_type TEXT NOT NULL,
  asset_sub_type TEXT NOT NULL,
  asset_detail TEXT NOT NULL,
  asset_icon INTEGER NOT NULL
);

CREATE TABLE audit_refusal_counts (
  refusal_key TEXT PRIMARY KEY,
  first_id INTEGER NOT NULL,                       -- the record of the first refusal of the window
  window_end_ms INTEGER NOT NULL,
  repeats INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  source_ips TEXT NOT NULL DEFAULT ''              -- up to a few addresses the repeats came from, space-separated
) WITHOUT ROWID;

CREATE TABLE audit_rollup (
  level INTEGER NOT NULL,
  block INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  n INTEGER NOT NULL,
  min_ms INTEGER NOT NULL,
  max_ms INTEGER NOT NULL,
  PRIMARY KEY (level, block, kind)
) WITHOUT ROWID;

CREATE TABLE audit_trail (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms INTEGER NOT NULL,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  category TEXT NOT NULL,
  user_name TEXT,
  source_ip TEXT,
  description TEXT NOT NULL,
  details TEXT NOT NULL,
  operation_id TEXT,
  outcome TEXT NOT NULL CHECK (outcome IN ('Succeeded', 'Failed', 'Refused')),
  asset_key TEXT,
  asset_name TEXT,
  asset_parent_id TEXT,
  asset_ip TEXT,
  asset_type TEXT NOT NULL DEFAULT 'Unknown',
  asset_sub_type TEXT NOT NULL DEFAULT 'None',
  asset_detail TEXT NOT NULL DEFAULT 'Unknown',
  asset_icon INTEGER NOT NULL DEFAULT -1
, request_id TEXT, refusal_key TEXT);

CREATE TABLE catalogue (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('KnownAttackTool', 'VulnerableDevice')),
  vid TEXT NOT NULL,
  pid TEXT NOT NULL,
  name TEXT NOT NULL,
  vulnerability TEXT,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  reference TEXT,
  built_in INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  UNIQUE (kind, vid, pid)
);

CREATE TABLE data_dir_samples (
  sampled_ms INTEGER PRIMARY KEY,
  bytes INTEGER NOT NULL,
  free_bytes INTEGER NOT NULL
);

CREATE TABLE event_doc_ids (
  hi INTEGER PRIMARY KEY,                          -- the last id of the stretch
  lo INTEGER NOT NULL,                             -- its first id
  docs BLOB NOT NULL                               -- per id from lo to hi, its document as a 32-bit little-endian integer (0: no event)
);

CREATE TABLE event_doc_texts (
  id INTEGER PRIMARY KEY,
  details TEXT NOT NULL,
  peripheral_asset_id TEXT
);

CREATE TABLE event_docs (
  id INTEGER PRIMARY KEY,
  hash INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  source INTEGER NOT NULL,
  n INTEGER NOT NULL DEFAULT 0
);

CREATE VIRTUAL TABLE event_docs_fts USING fts5 (details, peripheral_asset_id, content = '', tokenize = 'trigram');

CREATE TABLE event_kind_ids (
  blk INTEGER NOT NULL,                            -- id >> 16
  kind INTEGER NOT NULL,                           -- event_kinds.id
  id INTEGER NOT NULL,
  PRIMARY KEY (blk, kind, id)
) WITHOUT ROWID;

CREATE TABLE event_kinds (
  id INTEGER PRIMARY KEY,
  event_code TEXT NOT NULL,
  severity INTEGER NOT NULL,
  category TEXT NOT NULL,
  peripheral_icon INTEGER NOT NULL,
  description TEXT NOT NULL,
  hashtags TEXT
);

CREATE TABLE event_rollup (
  level INTEGER NOT NULL,
  block INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  n INTEGER NOT NULL,
  min_ms INTEGER NOT NULL,
  max_ms INTEGER NOT NULL,
  PRIMARY KEY (level, block, kind)
) WITHOUT ROWID;

CREATE TABLE event_source_ids (
  blk INTEGER NOT NULL,                            -- id >> 18
  source INTEGER NOT NULL,                         -- event_sources.id
  id INTEGER NOT NULL,
  PRIMARY KEY (blk, source, id)
) WITHOUT ROWID;

CREATE TABLE event_sources (
  id INTEGER PRIMARY KEY,
  entity_id TEXT NOT NULL,
  asset_key TEXT,
  asset_name TEXT,
  n INTEGER NOT NULL DEFAULT 0
);

CREATE VIRTUAL TABLE event_sources_fts USING fts5 (entity_id, asset_key, asset_name, content = '', tokenize = 'trigram');

CREATE TABLE event_time_spans (
  sub INTEGER PRIMARY KEY,                         -- id >> 6
  min_ms INTEGER NOT NULL,
  max_ms INTEGER NOT NULL
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms INTEGER NOT NULL,
  event_code TEXT NOT NULL,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  category TEXT NOT NULL CHECK (category IN ('USB', 'Network', 'System', 'Host', 'General')),
  entity_id TEXT NOT NULL,
  description TEXT NOT NULL,
  details TEXT NOT NULL,
  hashtags TEXT,
  peripheral_icon INTEGER NOT NULL DEFAULT -1,
  asset_key TEXT,
  asset_name TEXT,
  peripheral_asset_id TEXT,
  peripheral_vid TEXT,                             -- for the risk insights; not in the API
  peripheral_pid TEXT
, alarm_destination_id TEXT);

CREATE TABLE health_notifications (
  id INTEGER PRIMARY KEY,
  group_name TEXT NOT NULL REFERENCES notification_groups (name),
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  first_ms INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  resolved_ms INTEGER,                             -- null: Open
  occurrences INTEGER NOT NULL DEFAULT 1,
  occurred_seq INTEGER NOT NULL,
  change_seq INTEGER NOT NULL,
  pinned_by TEXT,
  pinned_ms INTEGER,
  dismissed_by TEXT,
  dismissed_ms INTEGER
);

CREATE TABLE insight_cache (
  name TEXT PRIMARY KEY,
  computed_ms INTEGER NOT NULL,
  result TEXT NOT NULL
);

CREATE TABLE integration_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  token_hash TEXT NOT NULL UNIQUE,
  profile INTEGER NOT NULL CHECK (profile IN (10, 20, 30)),
  created_by TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_used_ms INTEGER,
  revoked_ms INTEGER
, created_by_user_id INTEGER);

CREATE TABLE login_failures (
  user_name TEXT NOT NULL COLLATE NOCASE,
  source TEXT NOT NULL,
  failures INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  locked_until_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_name, source)
) WITHOUT ROWID;

CREATE TABLE notification_counter (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL,
  risk_open INTEGER NOT NULL
);

CREATE TABLE notification_groups (
  name TEXT PRIMARY KEY,
  muted INTEGER NOT NULL DEFAULT 0 CHECK (muted IN (0, 1)),
  muted_by TEXT,
  muted_ms INTEGER,
  state TEXT NOT NULL DEFAULT 'Healthy' CHECK (state IN ('Healthy', 'Warning', 'Failed')),
  detail TEXT NOT NULL DEFAULT 'Not checked yet.',
  since_ms INTEGER,
  checked_ms INTEGER,
  change_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE notification_read_marks (
  user_key TEXT PRIMARY KEY,
  risk_seq INTEGER NOT NULL DEFAULT 0,
  health_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE peripheral_texts (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('vendor', 'product')),
  text TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0,                              -- the searchable text, lower-case
  UNIQUE (kind, text)
);

CREATE TABLE peripherals (
  id INTEGER PRIMARY KEY,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  agent_uuid TEXT NOT NULL,                        -- copy of agents.uuid (never changes), for sorting
  device_id TEXT NOT NULL,
  vid TEXT NOT NULL,                               -- upper-case hex
  pid TEXT NOT NULL,
  serial_number TEXT,
  description TEXT,
  status TEXT,
  manufacturer TEXT,
  caption TEXT,
  gui_vid TEXT,
  gui_pid TEXT,
  gui_serial TEXT,
  dev_icon INTEGER NOT NULL DEFAULT 0,
  class_code TEXT,
  subclass_code TEXT,
  protocol_code TEXT,
  hierarchy TEXT,
  parent_device_id TEXT,
  is_disabled INTEGER NOT NULL DEFAULT 0,
  present INTEGER NOT NULL DEFAULT 1,
  approved INTEGER NOT NULL DEFAULT 0,
  admin_status TEXT NOT NULL DEFAULT 'NotReviewed' CHECK (admin_status IN ('NotReviewed', 'Approved', 'Disapproved')),
  is_unapproved INTEGER NOT NULL DEFAULT 0,
  is_vulnerable INTEGER NOT NULL DEFAULT 0,
  is_attack_tool INTEGER NOT NULL DEFAULT 0,
  vulnerability TEXT,
  severity INTEGER NOT NULL DEFAULT 6,
  in_action INTEGER NOT NULL DEFAULT 0,
  vendor_text_id INTEGER REFERENCES peripheral_texts (id),
  product_text_id INTEGER REFERENCES peripheral_texts (id),
  first_seen_ms INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL,                   -- last check-in that listed it present
  UNIQUE (agent_id, device_id)
);

CREATE VIRTUAL TABLE peripherals_fts USING fts5 (device_id, content = '', contentless_delete = 1, tokenize = 'trigram');

CREATE TABLE record_index_state (
  name TEXT PRIMARY KEY,                           -- 'events' or 'audit_trail'
  indexed INTEGER NOT NULL DEFAULT 0,              -- every record with id <= indexed is counted below
  -- Set when an indexed record is changed or deleted (nothing does today): the indexer
  -- then starts again from nothing, and queries read the rows meanwhile.
  stale INTEGER NOT NULL DEFAULT 0
, pruned_through INTEGER NOT NULL DEFAULT 0, prunes INTEGER NOT NULL DEFAULT 0, docs_from INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;

CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  used_ms INTEGER
);

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

CREATE TABLE retention_gate (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  open INTEGER NOT NULL DEFAULT 0 CHECK (open IN (0, 1)),
  before_ms INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE risk_notification_events (
  notification_id INTEGER NOT NULL,
  event_id INTEGER NOT NULL,
  PRIMARY KEY (notification_id, event_id)
) WITHOUT ROWID;

CREATE TABLE risk_notification_kinds (
  event_code TEXT PRIMARY KEY,
  kind TEXT NOT NULL UNIQUE,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  title TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE risk_notifications (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  agent_uuid TEXT NOT NULL,
  host_identifier TEXT NOT NULL,
  host_ip TEXT,
  vid TEXT,
  pid TEXT,
  serial_number TEXT,
  device_id TEXT,
  device_name TEXT,
  vendor_name TEXT,
  device_key TEXT NOT NULL,                        -- VID:PID:serial, what "the same device" means
  title TEXT NOT NULL,
  description TEXT NOT NULL,                       -- the latest occurrence's event details
  occurrences INTEGER NOT NULL DEFAULT 1,
  first_ms INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  occurred_seq INTEGER NOT NULL,                   -- seq of the latest occurrence: read by whoever read up to it
  change_seq INTEGER NOT NULL,
  pinned_by TEXT,
  pinned_ms INTEGER,
  dismissed_by TEXT,
  dismissed_ms INTEGER
);

CREATE VIRTUAL TABLE risk_notifications_fts USING fts5 (
  host_identifier, agent_uuid, everything, content = '', contentless_delete = 1, tokenize = 'trigram'
);

CREATE TABLE row_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER,
  revoked_reason TEXT
);

CREATE TABLE "users" (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  email TEXT NOT NULL,
  first_name TEXT,
  last_name TEXT,
  phone TEXT,
  image TEXT,
  profile INTEGER NOT NULL CHECK (profile IN (10, 20, 30)),
  password_hash TEXT NOT NULL,
  is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  last_login_ms INTEGER,
  -- Tokens issued before this instant (ms) are void: password change, disable, demotion.
  tokens_valid_after_ms INTEGER NOT NULL DEFAULT 0);

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

CREATE VIEW alarm_attempt_history AS
  SELECT outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error FROM alarm_attempts
  UNION ALL
  SELECT id, destination_id, attempts, started_ms, duration_ms, 'delivered', NULL FROM alarm_outbox WHERE started_ms IS NOT NULL;

CREATE INDEX agent_commands_delivered ON agent_commands (status, delivered_ms) WHERE status = 'Delivered';

CREATE INDEX agent_commands_done ON agent_commands (completed_ms) WHERE completed_ms IS NOT NULL;

CREATE INDEX agent_commands_failed ON agent_commands (completed_ms, agent_id) WHERE status = 'Failed';

CREATE INDEX agent_commands_open ON agent_commands (agent_id, status, id);

CREATE INDEX agent_debug_logs_agent ON agent_debug_logs (agent_id, id);

CREATE INDEX agent_debug_logs_created ON agent_debug_logs (created_ms);

CREATE INDEX agent_errors_agent ON agent_errors (agent_id);

CREATE INDEX agent_errors_time_agent ON agent_errors (time_ms, agent_id);

CREATE INDEX agentless_connections_poller ON agentless_connections (poller_id, status);

CREATE INDEX agentless_connections_start ON agentless_connections (start_ms);

CREATE INDEX agentless_runs_connection ON agentless_runs (connection_id, start_ms);

CREATE INDEX agentless_runs_recorded ON agentless_runs (recorded_ms);

CREATE INDEX agents_asset_risk ON agents ((max(CASE severity WHEN 0 THEN 10 WHEN 1 THEN 9 WHEN 2 THEN 8 WHEN 3 THEN 7 WHEN 4 THEN 5 WHEN 5 THEN 3 WHEN 6 THEN 1 WHEN 7 THEN 0 ELSE 0 END,
  has_attack_tool * 9, has_vulnerable * 7, has_unapproved * 4)), id);

CREATE INDEX agents_attack_tool ON agents (has_attack_tool, host_identifier COLLATE NOCASE, uuid);

CREATE INDEX agents_attack_tool_count ON agents (has_attack_tool) WHERE has_attack_tool = 1;

CREATE INDEX agents_classes ON agents (in_action, operational_status, license_status, running_mode,
  severity, has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv, os_version, service_version);

CREATE INDEX agents_connected ON agents (last_updated_ms, display_status) WHERE connection_status = 'Connected';

CREATE INDEX agents_enrolled ON agents (enrolled_ms, id);

CREATE INDEX agents_host ON agents (host_identifier COLLATE NOCASE, uuid);

CREATE INDEX agents_last_configured ON agents (last_configured_ms, uuid);

CREATE INDEX agents_last_updated ON agents (last_updated_ms, uuid);

CREATE INDEX agents_license_expiry ON agents (expiration_ms)
  WHERE license_status IN ('Activated', 'Pending') AND expiration_ms IS NOT NULL;

CREATE INDEX agents_license_unactivated ON agents (license_status) WHERE license_status <> 'Activated';

CREATE INDEX agents_local_ip ON agents (local_ip_address COLLATE NOCASE);

CREATE INDEX agents_models ON agents (pc_model, manufacturer);

CREATE INDEX agents_severity ON agents (severity, uuid);

CREATE INDEX agents_unapproved ON agents (has_unapproved, host_identifier COLLATE NOCASE, uuid);

CREATE INDEX agents_unapproved_count ON agents (has_unapproved) WHERE has_unapproved = 1;

CREATE INDEX agents_vulnerable ON agents (has_vulnerable, host_identifier COLLATE NOCASE, uuid);

CREATE INDEX agents_vulnerable_count ON agents (has_vulnerable) WHERE has_vulnerable = 1;

CREATE INDEX agents_vulnerable_or_wlv_count ON agents (vulnerable_or_wlv) WHERE vulnerable_or_wlv = 1;

CREATE INDEX agents_waiting_for_seat ON agents (enrolled_ms, id) WHERE license_status = 'Pending';

CREATE INDEX alarm_attempts_outbox ON alarm_attempts (outbox_id);

CREATE INDEX alarm_attempts_started ON alarm_attempts (started_ms);

CREATE INDEX alarm_outbox_done ON alarm_outbox (done_ms) WHERE status <> 'pending';

CREATE INDEX alarm_outbox_failed ON alarm_outbox (destination_id, done_ms) WHERE status = 'failed';

CREATE INDEX alarm_outbox_pending ON alarm_outbox (destination_id, id) WHERE status = 'pending';

CREATE INDEX asset_grams_over_cap ON asset_grams (src, gram) WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;

CREATE INDEX asset_messages_created ON asset_messages (created_ms);

CREATE INDEX audit_refusal_counts_due ON audit_refusal_counts (window_end_ms);

CREATE INDEX audit_trail_created ON audit_trail (created_ms);

CREATE INDEX audit_trail_refusals ON audit_trail (refusal_key, created_ms) WHERE refusal_key IS NOT NULL;

CREATE INDEX catalogue_model ON catalogue (vid, pid);

CREATE INDEX event_docs_hash ON event_docs (hash);

CREATE INDEX event_sources_entity ON event_sources (entity_id);

CREATE INDEX events_created ON events (created_ms);

CREATE UNIQUE INDEX health_notifications_changes ON health_notifications (change_seq);

CREATE INDEX health_notifications_group ON health_notifications (group_name, id) WHERE dismissed_ms IS NULL;

CREATE UNIQUE INDEX health_notifications_open ON health_notifications (group_name) WHERE resolved_ms IS NULL;

CREATE INDEX integration_tokens_creator ON integration_tokens (created_by_user_id);

CREATE INDEX login_failures_last ON login_failures (last_ms);

CREATE INDEX notification_groups_changes ON notification_groups (change_seq);

CREATE INDEX peripherals_agent_uuid ON peripherals (agent_uuid, device_id, id);

CREATE INDEX peripherals_asset_risk ON peripherals ((max(CASE severity WHEN 0 THEN 10 WHEN 1 THEN 9 WHEN 2 THEN 8 WHEN 3 THEN 7 WHEN 4 THEN 5 WHEN 5 THEN 3 WHEN 6 THEN 1 WHEN 7 THEN 0 ELSE 0 END,
  is_attack_tool * CASE WHEN present THEN 9 ELSE 6 END, is_vulnerable * 7, is_unapproved * 4)), id);

CREATE INDEX peripherals_first_seen ON peripherals (first_seen_ms, id);

CREATE INDEX peripherals_model ON peripherals (vid, pid);

CREATE INDEX peripherals_present_class ON peripherals (dev_icon, approved) WHERE present = 1;

CREATE INDEX peripherals_present_model ON peripherals (vid, pid, agent_id) WHERE present = 1;

CREATE INDEX peripherals_product ON peripherals (product_text_id);

CREATE INDEX peripherals_risky ON peripherals (is_attack_tool, is_vulnerable) WHERE is_attack_tool = 1 OR is_vulnerable = 1;

CREATE INDEX peripherals_unapproved ON peripherals (is_unapproved) WHERE is_unapproved = 1;

CREATE INDEX peripherals_vendor ON peripherals (vendor_text_id);

CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

CREATE INDEX report_runs_mail ON report_runs (email_next_ms) WHERE email_status = 'pending';

CREATE INDEX report_runs_open ON report_runs (status, seq) WHERE status IN ('queued', 'running');

CREATE INDEX report_runs_report ON report_runs (report_id, seq);

CREATE INDEX reports_due ON reports (next_run_ms) WHERE next_run_ms IS NOT NULL;

CREATE UNIQUE INDEX risk_notifications_changes ON risk_notifications (change_seq);

CREATE INDEX risk_notifications_dismissed ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NOT NULL;

CREATE UNIQUE INDEX risk_notifications_key ON risk_notifications (agent_uuid, device_key, kind) WHERE dismissed_ms IS NULL;

CREATE INDEX risk_notifications_kind ON risk_notifications
  (kind, occurred_seq, severity, last_ms, first_ms, pinned_ms, vid, pid, dismissed_ms) WHERE dismissed_ms IS NULL;

CREATE INDEX risk_notifications_open ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NULL;

CREATE INDEX risk_notifications_open_severity ON risk_notifications
  (severity, id, kind, occurred_seq, last_ms, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NULL;

CREATE INDEX risk_notifications_pinned ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE pinned_ms IS NOT NULL;

CREATE INDEX risk_notifications_unread ON risk_notifications
  (occurred_seq, kind, severity, last_ms, first_ms, pinned_ms, vid, pid, dismissed_ms) WHERE dismissed_ms IS NULL;

CREATE INDEX sessions_user ON sessions (user_id);

CREATE TRIGGER agent_text_changes_delete AFTER DELETE ON agents BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (old.id);
END;

CREATE TRIGGER agent_text_changes_insert AFTER INSERT ON agents BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (new.id);
END;

CREATE TRIGGER agent_text_changes_update AFTER UPDATE OF host_identifier, os_version, pc_model, service_version,
  license_account_name, latest_event_text, hashtags ON agents
WHEN old.host_identifier IS NOT new.host_identifier OR old.os_version IS NOT new.os_version OR old.pc_model IS NOT new.pc_model
  OR old.service_version IS NOT new.service_version OR old.license_account_name IS NOT new.license_account_name
  OR old.latest_event_text IS NOT new.latest_event_text OR old.hashtags IS NOT new.hashtags
BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (new.id);
END;

CREATE TRIGGER agents_count_delete AFTER DELETE ON agents BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'agents'; END;

CREATE TRIGGER agents_count_insert AFTER INSERT ON agents BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'agents'; END;

CREATE TRIGGER agents_flags_delete AFTER DELETE ON agents
WHEN old.has_unapproved OR old.has_vulnerable OR old.has_attack_tool OR old.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n - CASE name
    WHEN 'agents.has_unapproved' THEN old.has_unapproved WHEN 'agents.has_vulnerable' THEN old.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN old.has_attack_tool ELSE old.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;

CREATE TRIGGER agents_flags_insert AFTER INSERT ON agents
WHEN new.has_unapproved OR new.has_vulnerable OR new.has_attack_tool OR new.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n + CASE name
    WHEN 'agents.has_unapproved' THEN new.has_unapproved WHEN 'agents.has_vulnerable' THEN new.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN new.has_attack_tool ELSE new.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;

CREATE TRIGGER agents_flags_update AFTER UPDATE OF has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv ON agents
WHEN old.has_unapproved IS NOT new.has_unapproved OR old.has_vulnerable IS NOT new.has_vulnerable
  OR old.has_attack_tool IS NOT new.has_attack_tool OR old.vulnerable_or_wlv IS NOT new.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n + CASE name
    WHEN 'agents.has_unapproved' THEN new.has_unapproved - old.has_unapproved WHEN 'agents.has_vulnerable' THEN new.has_vulnerable - old.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN new.has_attack_tool - old.has_attack_tool ELSE new.vulnerable_or_wlv - old.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;

CREATE TRIGGER agents_fts_delete AFTER DELETE ON agents BEGIN
  DELETE FROM agents_fts WHERE rowid = old.id;
END;

CREATE TRIGGER agents_fts_insert AFTER INSERT ON agents BEGIN
  INSERT INTO agents_fts (rowid, uuid, ip_addresses, nics_text) VALUES (new.id, new.uuid, new.ip_addresses, new.nics_text);
END;

CREATE TRIGGER agents_fts_update AFTER UPDATE OF uuid, ip_addresses, nics_text ON agents
WHEN old.uuid IS NOT new.uuid OR old.ip_addresses IS NOT new.ip_addresses OR old.nics_text IS NOT new.nics_text
BEGIN
  UPDATE agents_fts SET uuid = new.uuid, ip_addresses = new.ip_addresses, nics_text = new.nics_text WHERE rowid = new.id;
END;

CREATE TRIGGER agents_grams_delete BEFORE DELETE ON agents BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 0 AND gram IN (SELECT value FROM json_each(asset_grams(old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text)));
  DELETE FROM asset_gram_rows WHERE src = 0 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_grams(old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text)));
  UPDATE asset_grams SET n = n - c.k
    FROM (SELECT g.value AS gram, count(*) AS k FROM peripherals p, json_each(asset_grams(coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer))) g WHERE p.agent_id = old.id GROUP BY 1) AS c
    WHERE asset_grams.src = 2 AND asset_grams.gram = c.gram;
  DELETE FROM asset_gram_rows WHERE (src, gram, id) IN (SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_grams(coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer))) g WHERE p.agent_id = old.id);
END;

CREATE TRIGGER agents_grams_insert AFTER INSERT ON agents BEGIN
  INSERT INTO asset_grams (src, gram, n) SELECT 0, value, 1 FROM json_each(asset_grams(new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text)) WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_grams(new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text)) j CROSS JOIN asset_grams g ON g.src = 0 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;

CREATE TRIGGER agents_grams_update AFTER UPDATE OF host_identifier, uuid, local_ip_address, pc_model, manufacturer, nics_text ON agents
WHEN old.host_identifier IS NOT new.host_identifier OR old.uuid IS NOT new.uuid OR old.local_ip_address IS NOT new.local_ip_address OR old.pc_model IS NOT new.pc_model OR old.manufacturer IS NOT new.manufacturer OR old.nics_text IS NOT new.nics_text
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 0 AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.del'));
  DELETE FROM asset_gram_rows WHERE src = 0 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.del'));
  INSERT INTO asset_grams (src, gram, n) SELECT 0, value, 1 FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.add') WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.add') j CROSS JOIN asset_grams g ON g.src = 0 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;

CREATE TRIGGER agents_peripheral_grams_update AFTER UPDATE OF local_ip_address ON agents
WHEN old.local_ip_address IS NOT new.local_ip_address
BEGIN
  UPDATE asset_grams SET n = n - c.k
    FROM (SELECT g.value AS gram, count(*) AS k FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.del') g WHERE p.agent_id = new.id GROUP BY 1) AS c
    WHERE asset_grams.src = 2 AND asset_grams.gram = c.gram;
  DELETE FROM asset_gram_rows WHERE (src, gram, id) IN (SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.del') g WHERE p.agent_id = new.id);
  INSERT INTO asset_grams (src, gram, n)
    SELECT 2, g.value, count(*) FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.add') g WHERE p.agent_id = new.id GROUP BY 2
    ON CONFLICT DO UPDATE SET n = n + excluded.n;
  INSERT INTO asset_gram_rows (src, gram, id)
    SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.add') g CROSS JOIN asset_grams x ON x.src = 2 AND x.gram = g.value
    WHERE p.agent_id = new.id AND x.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;

CREATE TRIGGER agents_rev_insert AFTER INSERT ON agents BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;

CREATE TRIGGER agents_rev_update AFTER UPDATE OF
  uuid, host_identifier, local_ip_address, os_version, pc_model, nics_text, operational_status, connection_status,
  display_status, approved_and_present, approved_and_disconnected, not_approved, latest_event_text, latest_minus1_event_text,
  latest_minus2_event_text, service_version, kb_driver_version, last_configured_ms, license_status,
  expiration_ms, license_account_id, license_account_name, severity, has_unapproved, has_vulnerable, has_attack_tool,
  vulnerable_or_wlv, in_action, model_tooltip, running_mode, switch_ip, switch_name, port_id, port_name, ethernets_count,
  hashtags
ON agents WHEN new.rev IS old.rev BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;

CREATE TRIGGER asset_messages_alarm_outbox AFTER INSERT ON asset_messages BEGIN
  INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms)
  SELECT d.id, 'assets', new.id,
    lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
      || substr('89AB', 1 + (random() & 3), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  FROM alarm_destinations d
  WHERE d.enabled = 1 AND d.feed_assets = 1
  ORDER BY d.id;
END;

CREATE TRIGGER audit_trail_alarm_outbox AFTER INSERT ON audit_trail BEGIN
  INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms)
  SELECT d.id, 'audit', new.id,
    lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
      || substr('89AB', 1 + (random() & 3), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  FROM alarm_destinations d
  WHERE d.enabled = 1 AND d.feed_audit = 1 AND new.severity <= d.min_severity
    AND (d.audit_categories = '' OR instr(d.audit_categories, ',' || new.category || ',') > 0)
  ORDER BY d.id;
END;

CREATE TRIGGER audit_trail_no_delete BEFORE DELETE ON audit_trail
WHEN NOT EXISTS (SELECT 1 FROM retention_gate WHERE id = 1 AND open = 1 AND old.created_ms < before_ms)
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;

CREATE TRIGGER audit_trail_no_update BEFORE UPDATE ON audit_trail
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;

CREATE TRIGGER events_index_stale_delete AFTER DELETE ON events
WHEN old.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')
  AND NOT EXISTS (SELECT 1 FROM retention_gate WHERE id = 1 AND open = 1)
BEGIN UPDATE record_index_state SET stale = 1 WHERE name = 'events'; END;

CREATE TRIGGER events_index_stale_update AFTER UPDATE ON events
WHEN old.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')
BEGIN UPDATE record_index_state SET stale = 1 WHERE name = 'events'; END;

CREATE TRIGGER peripheral_texts_count_delete AFTER DELETE ON peripherals BEGIN
  UPDATE peripheral_texts SET n = n - 1 WHERE id IN (old.vendor_text_id, old.product_text_id);
END;

CREATE TRIGGER peripheral_texts_count_insert AFTER INSERT ON peripherals BEGIN
  UPDATE peripheral_texts SET n = n + 1 WHERE id IN (new.vendor_text_id, new.product_text_id);
END;

CREATE TRIGGER peripheral_texts_count_update AFTER UPDATE OF vendor_text_id, product_text_id ON peripherals
WHEN old.vendor_text_id IS NOT new.vendor_text_id OR old.product_text_id IS NOT new.product_text_id
BEGIN
  UPDATE peripheral_texts SET n = n - 1 WHERE id IN (old.vendor_text_id, old.product_text_id);
  UPDATE peripheral_texts SET n = n + 1 WHERE id IN (new.vendor_text_id, new.product_text_id);
END;

CREATE TRIGGER peripherals_count_delete AFTER DELETE ON peripherals BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'peripherals'; END;

CREATE TRIGGER peripherals_count_insert AFTER INSERT ON peripherals BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'peripherals'; END;

CREATE TRIGGER peripherals_fts_delete AFTER DELETE ON peripherals BEGIN
  DELETE FROM peripherals_fts WHERE rowid = old.id;
END;

CREATE TRIGGER peripherals_fts_insert AFTER INSERT ON peripherals BEGIN
  INSERT INTO peripherals_fts (rowid, device_id) VALUES (new.id, new.device_id);
END;

CREATE TRIGGER peripherals_fts_update AFTER UPDATE OF device_id ON peripherals WHEN old.device_id IS NOT new.device_id BEGIN
  DELETE FROM peripherals_fts WHERE rowid = old.id;
  INSERT INTO peripherals_fts (rowid, device_id) VALUES (new.id, new.device_id);
END;

CREATE TRIGGER peripherals_grams_delete AFTER DELETE ON peripherals
WHEN EXISTS (SELECT 1 FROM agents WHERE id = old.agent_id)
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 2 AND gram IN (SELECT value FROM json_each(asset_grams(coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer))));
  DELETE FROM asset_gram_rows WHERE src = 2 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_grams(coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer))));
END;

CREATE TRIGGER peripherals_grams_insert AFTER INSERT ON peripherals BEGIN
  INSERT INTO asset_grams (src, gram, n) SELECT 2, value, 1 FROM json_each(asset_grams(coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer))) WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_grams(coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer))) j CROSS JOIN asset_grams g ON g.src = 2 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;

CREATE TRIGGER peripherals_grams_update AFTER UPDATE OF gui_pid, caption, description, device_id, agent_uuid, gui_vid, manufacturer, agent_id ON peripherals
WHEN old.gui_pid IS NOT new.gui_pid OR old.caption IS NOT new.caption OR old.description IS NOT new.description OR old.device_id IS NOT new.device_id OR old.agent_uuid IS NOT new.agent_uuid OR old.gui_vid IS NOT new.gui_vid OR old.manufacturer IS NOT new.manufacturer OR old.agent_id IS NOT new.agent_id
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 2 AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.del'));
  DELETE FROM asset_gram_rows WHERE src = 2 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.del'));
  INSERT INTO asset_grams (src, gram, n) SELECT 2, value, 1 FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.add') WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.add') j CROSS JOIN asset_grams g ON g.src = 2 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;

CREATE TRIGGER risk_notifications_dismissed AFTER UPDATE OF dismissed_ms ON risk_notifications
WHEN old.dismissed_ms IS NULL AND new.dismissed_ms IS NOT NULL
BEGIN
  UPDATE notification_counter SET risk_open = risk_open - 1;
END;

CREATE TRIGGER risk_notifications_insert AFTER INSERT ON risk_notifications BEGIN
  UPDATE notification_counter SET risk_open = risk_open + (new.dismissed_ms IS NULL);
  INSERT INTO risk_notifications_fts (rowid, host_identifier, agent_uuid, everything)
  VALUES (new.id, new.host_identifier, new.agent_uuid,
    concat_ws(' ', new.kind, new.title, new.host_identifier, new.host_ip, new.agent_uuid, new.vid, new.pid,
      new.device_name, new.vendor_name, new.serial_number, new.device_id));
END;

CREATE TRIGGER risk_notifications_search AFTER UPDATE OF host_identifier, host_ip, device_name, vendor_name, title ON risk_notifications
WHEN old.host_identifier IS NOT new.host_identifier OR old.host_ip IS NOT new.host_ip OR old.device_name IS NOT new.device_name
  OR old.vendor_name IS NOT new.vendor_name OR old.title IS NOT new.title
BEGIN
  DELETE FROM risk_notifications_fts WHERE rowid = old.id;
  INSERT INTO risk_notifications_fts (rowid, host_identifier, agent_uuid, everything)
  VALUES (new.id, new.host_identifier, new.agent_uuid,
    concat_ws(' ', new.kind, new.title, new.host_identifier, new.host_ip, new.agent_uuid, new.vid, new.pid,
      new.device_name, new.vendor_name, new.serial_number, new.device_id));
END;
