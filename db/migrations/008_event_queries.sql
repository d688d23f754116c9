-- Event and audit-trail queries: what makes counting and finding records fast at millions
-- of rows, kept off the write path.
--
-- Writing an event stays one row insert (the gateway writes thousands a second): these
-- tables are brought up to date afterwards, in batches, by the indexer in
-- db/event-index.ts, up to a high-water mark (`indexed`). A query reads them for the
-- records up to the mark and the rows themselves above it, so every answer is exact
-- however far behind the indexer is.

CREATE TABLE record_index_state (
  name TEXT PRIMARY KEY,                           -- 'events' or 'audit_trail'
  indexed INTEGER NOT NULL DEFAULT 0,              -- every record with id <= indexed is counted below
  -- Set when an indexed record is changed or deleted (nothing does today): the indexer
  -- then starts again from nothing, and queries read the rows meanwhile.
  stale INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO record_index_state (name) VALUES ('events'), ('audit_trail');

-- Kinds: the combinations of the low-cardinality fields that occur (an event code comes
-- with its severity, category and description; a few dozen combinations in all).
CREATE TABLE event_kinds (
  id INTEGER PRIMARY KEY,
  event_code TEXT NOT NULL,
  severity INTEGER NOT NULL,
  category TEXT NOT NULL,
  peripheral_icon INTEGER NOT NULL,
  description TEXT NOT NULL,
  hashtags TEXT
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

-- Counts per block of ids and kind, with the block's time span per kind: level 0 blocks
-- hold 4096 ids, level 1 blocks 65536. A count over a time or id range adds whole blocks
-- and reads rows only where a block straddles an end; a page skips blocks without matches.
CREATE TABLE event_rollup (
  level INTEGER NOT NULL,
  block INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  n INTEGER NOT NULL,
  min_ms INTEGER NOT NULL,
  max_ms INTEGER NOT NULL,
  PRIMARY KEY (level, block, kind)
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

-- Sources: each distinct (eventEntityID, assetKey, assetName), with how many indexed
-- events carry it (about one per host: 100,000 hosts make 100,000 rows, not millions).
-- "Contains" on a source, asset key or asset name searches these through the trigram
-- index, not the events.
CREATE TABLE event_sources (
  id INTEGER PRIMARY KEY,
  entity_id TEXT NOT NULL,
  asset_key TEXT,
  asset_name TEXT,
  n INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX event_sources_entity ON event_sources (entity_id);
CREATE VIRTUAL TABLE event_sources_fts USING fts5 (entity_id, asset_key, asset_name, content = '', tokenize = 'trigram');

-- Documents: each distinct (kind, source, peripheralAssetId, details), with its count.
-- Details repeat (the same device on the same host connects and disconnects day after
-- day), so "contains" on details and GlobalSearch look through the distinct texts and
-- add up their counts. Found by a hash of the whole key.
CREATE TABLE event_docs (
  id INTEGER PRIMARY KEY,
  hash INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  source INTEGER NOT NULL,
  n INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX event_docs_hash ON event_docs (hash);
CREATE TABLE event_doc_texts (
  id INTEGER PRIMARY KEY,
  details TEXT NOT NULL,
  peripheral_asset_id TEXT
);
CREATE VIRTUAL TABLE event_docs_fts USING fts5 (details, peripheral_asset_id, content = '', tokenize = 'trigram');

-- Indexed events are never changed or deleted by the service; should anything do it,
-- the indexer starts over rather than answer from counts that no longer hold.
CREATE TRIGGER events_index_stale_update AFTER UPDATE ON events
WHEN old.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')
BEGIN UPDATE record_index_state SET stale = 1 WHERE name = 'events'; END;
CREATE TRIGGER events_index_stale_delete AFTER DELETE ON events
WHEN old.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')
BEGIN UPDATE record_index_state SET stale = 1 WHERE name = 'events'; END;
