-- Risk and system-health notifications, their groups, per-user read marks, and the change
-- counter the live stream follows.

-- Every change to a notification or a group takes the next `seq` and stores it in the
-- row's `change_seq`: the stream finds what changed since its last look with one read of
-- this row and one indexed range per table, however many subscribers there are.
-- `risk_open` counts the risk notifications not dismissed (the counts' totals, without a
-- pass over the table).
CREATE TABLE notification_counter (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL,
  risk_open INTEGER NOT NULL
);
INSERT INTO notification_counter (id, seq, risk_open) VALUES (1, 0, 0);

-- Which events raise which kind of risk notification, at which severity, and its title
-- (followed by the host's name). A kind without an event here is never raised.
CREATE TABLE risk_notification_kinds (
  event_code TEXT PRIMARY KEY,
  kind TEXT NOT NULL UNIQUE,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  title TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO risk_notification_kinds (event_code, kind, severity, title) VALUES
  ('0x110005', 'KnownAttackTool', 2, 'Known attack tool connected to '),
  ('0x110006', 'VulnerablePeripheral', 3, 'Vulnerable peripheral on '),
  ('0x110007', 'WhitelistViolation', 4, 'Whitelist violation on '),
  ('0x110004', 'UnapprovedPeripheralOnArmedAgent', 4, 'Unapproved peripheral blocked on ');

-- One per kind, agent and device (VID, PID, serial) while it is not dismissed.
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
CREATE UNIQUE INDEX risk_notifications_key ON risk_notifications (agent_uuid, device_key, kind) WHERE dismissed_ms IS NULL;
CREATE UNIQUE INDEX risk_notifications_changes ON risk_notifications (change_seq);
-- The list's indexes: every column a filter or the usual sorts read, so that counts and
-- pages are read from an index alone; the page's rows are then read by id. Not dismissed
-- (the default view) by last seen and by severity, dismissed ones by last seen.
CREATE INDEX risk_notifications_open ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NULL;
CREATE INDEX risk_notifications_open_severity ON risk_notifications
  (severity, id, kind, occurred_seq, last_ms, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NULL;
CREATE INDEX risk_notifications_dismissed ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE dismissed_ms IS NOT NULL;
-- By kind (the usual filter), and pinned ones (a few).
CREATE INDEX risk_notifications_kind ON risk_notifications
  (kind, occurred_seq, severity, last_ms, first_ms, pinned_ms, vid, pid, dismissed_ms) WHERE dismissed_ms IS NULL;
CREATE INDEX risk_notifications_pinned ON risk_notifications
  (last_ms, id, kind, severity, occurred_seq, first_ms, pinned_ms, vid, pid, occurrences, dismissed_ms) WHERE pinned_ms IS NOT NULL;
-- Read state: whoever read up to a change number has the ones that occurred after it unread.
CREATE INDEX risk_notifications_unread ON risk_notifications
  (occurred_seq, kind, severity, last_ms, first_ms, pinned_ms, vid, pid, dismissed_ms) WHERE dismissed_ms IS NULL;

-- The events behind each notification.
CREATE TABLE risk_notification_events (
  notification_id INTEGER NOT NULL,
  event_id INTEGER NOT NULL,
  PRIMARY KEY (notification_id, event_id)
) WITHOUT ROWID;

-- "Contains" filters and globalSearch: trigram index, contentless (the text stays in the table).
CREATE VIRTUAL TABLE risk_notifications_fts USING fts5 (
  host_identifier, agent_uuid, everything, content = '', contentless_delete = 1, tokenize = 'trigram'
);
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
CREATE TRIGGER risk_notifications_dismissed AFTER UPDATE OF dismissed_ms ON risk_notifications
WHEN old.dismissed_ms IS NULL AND new.dismissed_ms IS NOT NULL
BEGIN
  UPDATE notification_counter SET risk_open = risk_open - 1;
END;

-- Every risky event, whatever wrote it, raises or repeats its risk notification in the
-- same transaction. The peripheral and the agent are read as they are now (the gateway
-- writes them before the events of a check-in).
CREATE TRIGGER events_risk_notification AFTER INSERT ON events
WHEN new.asset_key IS NOT NULL AND new.event_code IN (SELECT event_code FROM risk_notification_kinds)
BEGIN
  UPDATE notification_counter SET seq = seq + 1;
  INSERT INTO risk_notifications (kind, severity, agent_uuid, host_identifier, host_ip, vid, pid, serial_number, device_id,
    device_name, vendor_name, device_key, title, description, first_ms, last_ms, occurred_seq, change_seq)
  SELECT k.kind, k.severity, new.asset_key, coalesce(a.host_identifier, new.asset_name, new.entity_id), a.local_ip_address,
    coalesce(p.vid, new.peripheral_vid), coalesce(p.pid, new.peripheral_pid), p.serial_number,
    coalesce(p.device_id, new.peripheral_asset_id), p.gui_pid, p.gui_vid,
    concat_ws(':', coalesce(p.vid, new.peripheral_vid, ''), coalesce(p.pid, new.peripheral_pid, ''),
      coalesce(p.serial_number, new.peripheral_asset_id, '')),
    k.title || coalesce(a.host_identifier, new.asset_name, new.entity_id), substr(new.details, 1, 2000),
    new.created_ms, new.created_ms, c.seq, c.seq
  FROM risk_notification_kinds k
  JOIN notification_counter c ON c.id = 1
  LEFT JOIN agents a ON a.uuid = new.asset_key
  -- By (agent_id, device_id): the table's own unique key, there even while a bulk load drops the other indexes.
  LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = new.peripheral_asset_id
  WHERE k.event_code = new.event_code
  ON CONFLICT (agent_uuid, device_key, kind) WHERE dismissed_ms IS NULL DO UPDATE SET
    occurrences = occurrences + 1,
    last_ms = max(last_ms, excluded.last_ms),
    host_identifier = excluded.host_identifier,
    host_ip = coalesce(excluded.host_ip, host_ip),
    device_name = coalesce(excluded.device_name, device_name),
    vendor_name = coalesce(excluded.vendor_name, vendor_name),
    title = excluded.title,
    description = excluded.description,
    occurred_seq = excluded.occurred_seq,
    change_seq = excluded.change_seq;
  INSERT INTO risk_notification_events (notification_id, event_id)
  SELECT id, new.id FROM risk_notifications WHERE change_seq = (SELECT seq FROM notification_counter WHERE id = 1);
END;

-- System-health groups: one per health check, with its latest result (a group is listed
-- once the contract names it).
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
INSERT INTO notification_groups (name) VALUES
  ('Database'), ('Authentication'), ('DiskSpace'), ('AlarmDelivery'), ('Reports'), ('WorkerPoller'), ('License');
CREATE INDEX notification_groups_changes ON notification_groups (change_seq);

-- Opened by a failing check, resolved when it passes again; at most one open per group.
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
CREATE UNIQUE INDEX health_notifications_open ON health_notifications (group_name) WHERE resolved_ms IS NULL;
CREATE INDEX health_notifications_group ON health_notifications (group_name, id) WHERE dismissed_ms IS NULL;
CREATE UNIQUE INDEX health_notifications_changes ON health_notifications (change_seq);

-- Read state per user: everything that last occurred at or before the mark is read.
-- `user_key`: `user:<account id>` or `token:<integration token id>`.
CREATE TABLE notification_read_marks (
  user_key TEXT PRIMARY KEY,
  risk_seq INTEGER NOT NULL DEFAULT 0,
  health_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
