-- The time span of each stretch of 64 event ids, written by the indexer with its batch
-- (db/event-index.ts). A time range cuts the 4096-id blocks at its two ends; the events of
-- such a block whose kind's span straddles the range's end were each read from their rows
-- to tell whether they are in it. With these spans only the stretches that straddle it
-- are (events arrive nearly in time order: one or two stretches a block).
-- Spans stay as they are when events are pruned: still bounds of what is left.
CREATE TABLE event_time_spans (
  sub INTEGER PRIMARY KEY,                         -- id >> 6
  min_ms INTEGER NOT NULL,
  max_ms INTEGER NOT NULL
);
-- The events written so far (those not indexed yet get the same spans from the indexer).
INSERT INTO event_time_spans (sub, min_ms, max_ms) SELECT id >> 6, min(created_ms), max(created_ms) FROM events GROUP BY id >> 6;
