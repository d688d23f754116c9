-- The document (event_docs.id) of each indexed event, by stretch of ids, written by the
-- indexer with the rest of its batch (db/event-index.ts). A text filter over a time range
-- then tells the matches of its range from these ids and the documents that match (one pass
-- over 4 bytes an event, not a test of every row's texts), and its pages find their ids the
-- same way. A document per event and not counts per block: nearly every event is a document
-- of its own (the same device on the same host, a new detail text each time), so counts per
-- (block, document) would be a row per event, and would still leave the pages to the rows.
CREATE TABLE event_doc_ids (
  hi INTEGER PRIMARY KEY,                          -- the last id of the stretch
  lo INTEGER NOT NULL,                             -- its first id
  docs BLOB NOT NULL                               -- per id from lo to hi, its document as a 32-bit little-endian integer (0: no event)
);
-- The indexed events from this id up have their documents above. Those indexed before this
-- version are added by the indexer when it has nothing new to index, newest first; until
-- then queries over them read the rows as before.
ALTER TABLE record_index_state ADD COLUMN docs_from INTEGER NOT NULL DEFAULT 1;
UPDATE record_index_state SET docs_from = indexed + 1;
