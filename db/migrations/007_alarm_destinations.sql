-- Alarm destinations and their durable delivery outbox.

-- The destination an "Alarm delivery failure" event is about: never delivered to it.
ALTER TABLE events ADD COLUMN alarm_destination_id TEXT;

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
);

-- Messages of the asset feed (asset producer), kept so that the outbox can refer to them.
CREATE TABLE asset_messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  asset_key TEXT,
  body TEXT NOT NULL                               -- the message, JSON
);
CREATE INDEX asset_messages_created ON asset_messages (created_ms);

-- One row per record and destination to deliver it to. Rows are written by the triggers
-- below, in the transaction that stores the record: whatever writes an event, an audit
-- record or an asset message (API, gateway, sweeper, scripts), its alarms are queued with
-- it or not at all. The id order is the record order each destination receives.
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
);
CREATE INDEX alarm_outbox_pending ON alarm_outbox (destination_id, id) WHERE status = 'pending';
CREATE INDEX alarm_outbox_failed ON alarm_outbox (destination_id, done_ms) WHERE status = 'failed';
CREATE INDEX alarm_outbox_done ON alarm_outbox (done_ms) WHERE status <> 'pending';

-- Every delivery attempt, kept after its destination is removed.
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
CREATE INDEX alarm_attempts_outbox ON alarm_attempts (outbox_id);
CREATE INDEX alarm_attempts_started ON alarm_attempts (started_ms);

-- A random (version 4) uuid and the wall clock in ms, in plain SQL: the triggers must work
-- on every connection, including scripts that register no functions.
CREATE TRIGGER events_alarm_outbox AFTER INSERT ON events BEGIN
  INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms)
  SELECT d.id, 'events', new.id,
    lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
      || substr('89AB', 1 + (random() & 3), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  FROM alarm_destinations d
  WHERE d.enabled = 1 AND d.feed_events = 1 AND new.severity <= d.min_severity
    AND (d.categories = '' OR instr(d.categories, ',' || new.category || ',') > 0)
    -- An alarm delivery failure is never delivered to the destination it is about.
    AND d.id IS NOT new.alarm_destination_id
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
