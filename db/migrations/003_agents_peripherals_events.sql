-- Agents, their peripherals, approvals, commands, the risk catalogue and events.
--
-- Flags, counters and severities are stored, not computed when read: lists filter and
-- sort on them over 100,000 agents and a million peripherals, so they must be indexed.
-- db/agent-state.ts is the one place that recomputes them after a change.

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
);
-- Sort orders of the list; each ends in uuid, the tie-breaker.
CREATE INDEX agents_host ON agents (host_identifier COLLATE NOCASE, uuid);
CREATE INDEX agents_last_configured ON agents (last_configured_ms, uuid);
CREATE INDEX agents_last_updated ON agents (last_updated_ms, uuid);
CREATE INDEX agents_connection ON agents (connection_status, last_updated_ms);
CREATE INDEX agents_unapproved ON agents (has_unapproved, host_identifier COLLATE NOCASE, uuid);
CREATE INDEX agents_vulnerable ON agents (has_vulnerable, host_identifier COLLATE NOCASE, uuid);
CREATE INDEX agents_attack_tool ON agents (has_attack_tool, host_identifier COLLATE NOCASE, uuid);
CREATE INDEX agents_severity ON agents (severity, uuid);

-- "Contains" filters and GlobalSearch: trigram index (LIKE '%x%' uses it from 3 characters).
CREATE VIRTUAL TABLE agents_fts USING fts5 (
  uuid, host_identifier, ip_addresses, os_version, service_version, hashtags, everything,
  tokenize = 'trigram'
);
CREATE TRIGGER agents_fts_insert AFTER INSERT ON agents BEGIN
  INSERT INTO agents_fts (rowid, uuid, host_identifier, ip_addresses, os_version, service_version, hashtags, everything)
  VALUES (new.id, new.uuid, new.host_identifier, new.ip_addresses, new.os_version, new.service_version, new.hashtags,
    concat_ws(' ', new.uuid, new.host_identifier, new.local_ip_address, new.os_version, new.pc_model, new.nics_text,
      new.service_version, new.license_account_name, new.latest_event_text, new.hashtags));
END;
CREATE TRIGGER agents_fts_update AFTER UPDATE OF uuid, host_identifier, local_ip_address, ip_addresses, os_version, pc_model,
  nics_text, service_version, license_account_name, latest_event_text, hashtags ON agents
WHEN old.host_identifier IS NOT new.host_identifier OR old.local_ip_address IS NOT new.local_ip_address
  OR old.ip_addresses IS NOT new.ip_addresses OR old.os_version IS NOT new.os_version OR old.pc_model IS NOT new.pc_model
  OR old.nics_text IS NOT new.nics_text OR old.service_version IS NOT new.service_version
  OR old.license_account_name IS NOT new.license_account_name OR old.latest_event_text IS NOT new.latest_event_text
  OR old.hashtags IS NOT new.hashtags
BEGIN
  UPDATE agents_fts SET host_identifier = new.host_identifier, ip_addresses = new.ip_addresses, os_version = new.os_version,
    service_version = new.service_version, hashtags = new.hashtags,
    everything = concat_ws(' ', new.uuid, new.host_identifier, new.local_ip_address, new.os_version, new.pc_model, new.nics_text,
      new.service_version, new.license_account_name, new.latest_event_text, new.hashtags)
  WHERE rowid = new.id;
END;
CREATE TRIGGER agents_fts_delete AFTER DELETE ON agents BEGIN
  DELETE FROM agents_fts WHERE rowid = old.id;
END;

-- Vendor and product texts of peripherals, interned: a million peripherals share a few
-- thousand of them, so "contains" on vendor or product scans this small table, not theirs.
CREATE TABLE peripheral_texts (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('vendor', 'product')),
  text TEXT NOT NULL,                              -- the searchable text, lower-case
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
CREATE INDEX peripherals_agent_uuid ON peripherals (agent_uuid, device_id, id);
CREATE INDEX peripherals_model ON peripherals (vid, pid);
CREATE INDEX peripherals_vendor ON peripherals (vendor_text_id);
CREATE INDEX peripherals_product ON peripherals (product_text_id);
CREATE INDEX peripherals_unapproved ON peripherals (is_unapproved) WHERE is_unapproved = 1;
CREATE INDEX peripherals_risky ON peripherals (is_attack_tool, is_vulnerable) WHERE is_attack_tool = 1 OR is_vulnerable = 1;

-- The administrators' decision per agent and model; peripherals.approved follows it.
CREATE TABLE approvals (
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  vid TEXT NOT NULL,
  pid TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('Approved', 'Disapproved')),
  changed_ms INTEGER NOT NULL,
  changed_by TEXT NOT NULL,
  PRIMARY KEY (agent_id, vid, pid)
) WITHOUT ROWID;

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
CREATE INDEX catalogue_model ON catalogue (vid, pid);
-- Shipped entries; deleting one is permanent (migrations run once).
INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, reference, built_in, created_ms, created_by) VALUES
  ('9d3f6a2e-1b7c-4c5d-8e0f-2a4b6c8d0e1f', 'KnownAttackTool', '0483', '5740', 'Multi-tool with keystroke injection (example)',
   'Can emulate a keyboard and inject keystrokes.', 2, NULL, 1, 1730419200000, 'system'),
  ('1f0c6b8e-7d2a-4e31-9b5c-3a8d0e6f4c21', 'KnownAttackTool', '1D6B', '0104', 'Composite gadget used by injection implants (example)',
   'A Linux USB gadget presenting itself as a keyboard: typical of keystroke-injection implants.', 2, NULL, 1, 1730419200000, 'system'),
  ('c2a9e4d7-5f3b-4a18-8e6c-9d1b7f2a0c54', 'KnownAttackTool', '16C0', '0486', 'Teensy-based HID injector (example)',
   'A programmable microcontroller board that enumerates as a keyboard.', 2, NULL, 1, 1730419200000, 'system'),
  ('7e4b2c90-3a6d-4f85-b1c7-0d9e8a5f3b62', 'VulnerableDevice', '046D', 'C52B', 'Wireless receiver with unpatched firmware (example)',
   'Keystroke injection over the air (e.g. CVE-2019-13052).', 3, 'https://nvd.nist.gov/vuln/detail/CVE-2019-13052', 1, 1730419200000, 'system'),
  ('a5d3f1e8-9c7b-4b2a-8f60-1e4d7c9b2a83', 'VulnerableDevice', '1915', '0102', '2.4 GHz receiver without link encryption (example)',
   'Unencrypted keyboard traffic can be read and injected (MouseJack class).', 3, NULL, 1, 1730419200000, 'system');

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
CREATE INDEX agent_commands_open ON agent_commands (agent_id, status, id);
CREATE INDEX agent_commands_delivered ON agent_commands (status, delivered_ms) WHERE status = 'Delivered';
CREATE INDEX agent_commands_completed ON agent_commands (completed_ms) WHERE status = 'Failed';

CREATE TABLE agent_debug_logs (
  id INTEGER PRIMARY KEY,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  command_id INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  content TEXT NOT NULL
);
CREATE INDEX agent_debug_logs_agent ON agent_debug_logs (agent_id, id);

-- Errors agents report about themselves at check-in (errorTotal).
CREATE TABLE agent_errors (
  id INTEGER PRIMARY KEY,
  agent_id INTEGER NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  time_ms INTEGER NOT NULL,
  code TEXT,
  message TEXT NOT NULL
);
CREATE INDEX agent_errors_time ON agent_errors (time_ms);

-- Events. AUTOINCREMENT: ids only ever increase, so that feeds polled by id never repeat.
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
);
CREATE INDEX events_created ON events (created_ms);
CREATE INDEX events_asset ON events (asset_key, id);
CREATE INDEX events_code ON events (event_code, created_ms);

-- Cached results of the "Reload"-able risk insights.
CREATE TABLE insight_cache (
  name TEXT PRIMARY KEY,
  computed_ms INTEGER NOT NULL,
  result TEXT NOT NULL
);

-- Row counts kept by triggers: recordsTotal of a list must not count a million rows.
CREATE TABLE row_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO row_counts (name, n) VALUES ('agents', 0), ('peripherals', 0);
CREATE TRIGGER agents_count_insert AFTER INSERT ON agents BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'agents'; END;
CREATE TRIGGER agents_count_delete AFTER DELETE ON agents BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'agents'; END;
CREATE TRIGGER peripherals_count_insert AFTER INSERT ON peripherals BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'peripherals'; END;
CREATE TRIGGER peripherals_count_delete AFTER DELETE ON peripherals BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'peripherals'; END;
