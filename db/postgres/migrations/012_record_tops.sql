-- The newest id written of events and of the audit trail, kept beside their totals.
--
-- `max(id)` over the partitioned tables visits every day's partition (its plan and an index
-- probe each): with a year of partitions the alarm queue's "anything new?" and every feed
-- page's horizon cost about a second. The statement trigger that counts the added records
-- keeps their greatest id too, in the writing transaction and under the feed lock that
-- orders the writers, so a reader sees `top` move exactly as it sees the rows. It never goes
-- down: retention and TRUNCATE take records away, not ids (the sequences go on from there).
ALTER TABLE record_counts ADD COLUMN top bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION record_counts_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE record_counts r SET n = r.n + a.n, top = greatest(r.top, a.top)
    FROM (SELECT count(*) AS n, coalesce(max(id), 0) AS top FROM added) a
   WHERE r.name = TG_TABLE_NAME;
  RETURN NULL;
END $$;

-- After the ALTER above (which holds record_counts until this commits), so every record
-- committed before is seen; a writer already inside the old trigger body then counts without
-- its top, which the next write's greatest() makes good.
UPDATE record_counts SET top = (SELECT coalesce(max(id), 0) FROM events) WHERE name = 'events';
UPDATE record_counts SET top = (SELECT coalesce(max(id), 0) FROM audit_trail) WHERE name = 'audit_trail';
