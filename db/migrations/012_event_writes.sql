-- Writing an event: the row, its time index, and the alarm outbox. Three costs leave the
-- per-row write path here.
--
-- 1. The index of events by asset key. Its keys are random (a uuid per host), so each
--    insert dirtied its own index page: at millions of events that index alone cost two
--    thirds of an insert. The indexer (db/event-index.ts) keeps its replacement instead,
--    a batch at a time: the events of each source by block of 2^18 ids. Keyed by block
--    first, a batch lands on the last block's few hundred pages, and a search for a few
--    sources reads one short range per block (queries read the rows above the indexer's
--    mark as before).
DROP INDEX IF EXISTS events_asset;
CREATE TABLE event_source_ids (
  blk INTEGER NOT NULL,                            -- id >> 18
  source INTEGER NOT NULL,                         -- event_sources.id
  id INTEGER NOT NULL,
  PRIMARY KEY (blk, source, id)
) WITHOUT ROWID;
-- The events indexed so far (none on a new database).
INSERT INTO event_source_ids (blk, source, id)
SELECT e.id >> 18, s.id, e.id
FROM record_index_state st
JOIN events e ON e.id <= st.indexed
JOIN event_sources s ON s.entity_id = e.entity_id AND s.asset_key IS e.asset_key AND s.asset_name IS e.asset_name
WHERE st.name = 'events' AND st.stale = 0
ORDER BY 1, 2, 3;

-- 2. The index of events by code and time: each of the twenty-odd codes in a commit of a
--    hundred events dirtied its own page, half of the pages such a commit wrote. The
--    indexer keeps the events of each kind by block of 2^16 ids (the rollup's level 1
--    blocks) instead: the rollup's cells say which blocks hold a kind in a time span, and
--    this table finds its events there.
DROP INDEX IF EXISTS events_code;
CREATE TABLE event_kind_ids (
  blk INTEGER NOT NULL,                            -- id >> 16
  kind INTEGER NOT NULL,                           -- event_kinds.id
  id INTEGER NOT NULL,
  PRIMARY KEY (blk, kind, id)
) WITHOUT ROWID;
INSERT INTO event_kind_ids (blk, kind, id)
SELECT e.id >> 16, k.id, e.id
FROM record_index_state st
JOIN events e ON e.id <= st.indexed
JOIN event_kinds k ON k.event_code = e.event_code AND k.severity = e.severity AND k.category = e.category
  AND k.peripheral_icon = e.peripheral_icon AND k.description = e.description AND k.hashtags IS e.hashtags
WHERE st.name = 'events' AND st.stale = 0
ORDER BY 1, 2, 3;

-- 3. The risk-notification trigger. A trigger that writes a full-text index makes SQLite
--    keep a statement journal for every event insert (about half the insert's cost, risky
--    or not). db/events.ts raises the notifications of a batch of events in the same
--    transaction instead, one upsert per notification however many of its events the
--    batch holds; the seeds call the same code.
DROP TRIGGER IF EXISTS events_risk_notification;
