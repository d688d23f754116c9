-- The ids each day holds: per table and UTC day of creation, the lowest and highest id
-- written into the day and how many records.
--
-- An id names no day partition, so a read by ids alone (a feed page after FromEventId, the
-- alarm queue's slice after its mark, records looked up by id) plans and probes every day's
-- partition: with a year of them, 80 to 200 ms a read. Ids follow the order of writing, not
-- of creation (a record written today with last month's time gets a new id in last month's
-- partition), so no single cut-off maps ids to days: each day keeps its own span, and a read
-- of an id range is bounded to the days whose span meets it.
--
-- Kept by the insert trigger, in the writing transaction and under the feed lock that orders
-- the writers: a reader that reads the spans and record_counts.top in one statement finds every
-- record up to top inside a span. Spans only widen (records deleted row by row leave them: a
-- span wider than its records costs a probe, never a record); a day whose partition is dropped
-- loses its row with it (db/postgres/events-retention.ts), TRUNCATE all of the table's. A
-- day's n is the records it holds: a read counts the whole days of an id range from it.
CREATE TABLE record_days (
  name text NOT NULL CHECK (name IN ('events', 'audit_trail')),
  day_ms bigint NOT NULL,
  low bigint NOT NULL,
  high bigint NOT NULL,
  -- The records the day holds.
  n bigint NOT NULL,
  PRIMARY KEY (name, day_ms)
);

-- Writers wait here until this commits (an INSERT's lock conflicts with SHARE): the spans
-- below see every record committed before, and every insert after runs the trigger below.
LOCK TABLE events, audit_trail IN SHARE MODE;

CREATE OR REPLACE FUNCTION record_counts_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE record_counts r SET n = r.n + a.n, top = greatest(r.top, a.top)
    FROM (SELECT count(*) AS n, coalesce(max(id), 0) AS top FROM added) a
   WHERE r.name = TG_TABLE_NAME;
  INSERT INTO record_days AS d (name, day_ms, low, high, n)
  SELECT TG_TABLE_NAME, floor(created_ms / 86400000.0)::bigint * 86400000, min(id), max(id), count(*) FROM added GROUP BY 2
  ON CONFLICT (name, day_ms) DO UPDATE SET low = least(d.low, excluded.low), high = greatest(d.high, excluded.high), n = d.n + excluded.n;
  RETURN NULL;
END $$;

-- Records deleted row by row (retention's part of a day) leave their day's span and are
-- subtracted from its count: a day's n is the records it holds, so that the matches of an id
-- range are counted from the whole days in it without reading them.
CREATE OR REPLACE FUNCTION record_counts_pruned() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  gone bigint := (SELECT count(*) FROM pruned);
BEGIN
  IF gone > 0 THEN
    UPDATE record_counts SET n = n - gone, prunes = prunes + 1 WHERE name = TG_TABLE_NAME;
    UPDATE record_days d SET n = d.n - p.n
      FROM (SELECT floor(created_ms / 86400000.0)::bigint * 86400000 AS day_ms, count(*) AS n FROM pruned GROUP BY 1) p
     WHERE d.name = TG_TABLE_NAME AND d.day_ms = p.day_ms;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION record_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE record_counts SET n = 0, prunes = prunes + 1 WHERE name = TG_TABLE_NAME;
  DELETE FROM record_days WHERE name = TG_TABLE_NAME;
  RETURN NULL;
END $$;

-- A table's spans counted from its records (an index-only read of its (created_ms, id)
-- index): here once, and after a bulk load that ran without the triggers (scripts/pg-load.ts).
CREATE FUNCTION record_days_recount(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF tbl NOT IN ('events', 'audit_trail') THEN
    RAISE EXCEPTION 'record_days_recount: % is not partitioned by day', tbl;
  END IF;
  DELETE FROM record_days WHERE name = tbl;
  EXECUTE format('INSERT INTO record_days (name, day_ms, low, high, n)
    SELECT %L, floor(created_ms / 86400000.0)::bigint * 86400000, min(id), max(id), count(*) FROM %I GROUP BY 2', tbl, tbl);
END $$;

SELECT record_days_recount('events');
SELECT record_days_recount('audit_trail');

-- The alarm queue's slice (as in 015) reads the events after its mark from the days that hold
-- them: at the head of the feed, today's partition alone.
CREATE OR REPLACE FUNCTION alarm_queue_events(max_rows integer, now_ms bigint) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  mark bigint;
  last_id bigint;
  start_id bigint;
  takers integer;
  lim integer;
  queued integer;
  read_n integer;
  read_to bigint;
  from_ms bigint;
  to_ms bigint;
BEGIN
  -- One queuer at a time, and before the outbox ids are drawn.
  PERFORM pg_advisory_xact_lock(7022100501);
  SELECT up_to INTO mark FROM alarm_events_queued WHERE id = 1;
  SELECT top INTO last_id FROM record_counts WHERE name = 'events';
  last_id := coalesce(last_id, 0);
  IF last_id <= mark THEN
    RETURN 0;
  END IF;
  SELECT count(*), min(events_from) INTO takers, start_id FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1;
  -- None takes them, or none takes events this old: passed over without reading them.
  start_id := greatest(mark, least(last_id, coalesce(start_id, last_id)));
  IF start_id >= last_id THEN
    UPDATE alarm_events_queued SET up_to = last_id WHERE id = 1;
    RETURN 0;
  END IF;
  lim := greatest(1, max_rows / takers);
  -- The days that hold ids after the mark (read after last_id: every id up to it is in them).
  SELECT min(day_ms), max(day_ms) + 86400000 INTO from_ms, to_ms FROM record_days WHERE name = 'events' AND high > start_id AND low <= last_id;
  WITH e AS (
    SELECT ev.id, ev.created_ms, ev.severity, ev.category, ev.alarm_destination_id FROM events ev
    WHERE ev.id > start_id AND ev.id <= last_id AND ev.created_ms >= from_ms AND ev.created_ms < to_ms ORDER BY ev.id LIMIT lim
  ), q AS (
    INSERT INTO alarm_outbox (destination_id, feed, record_id, record_ms, delivery_id, queued_ms)
    SELECT d.id, 'events', e.id, e.created_ms, gen_random_uuid()::text, now_ms
    FROM e JOIN alarm_destinations d ON d.enabled = 1 AND d.feed_events = 1 AND e.id > d.events_from AND e.severity <= d.min_severity
      AND (d.categories = '' OR position(',' || e.category || ',' IN d.categories) > 0)
      -- An alarm delivery failure is never delivered to the destination it is about.
      AND d.id IS DISTINCT FROM e.alarm_destination_id
    ORDER BY e.id, d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM e), (SELECT max(id) FROM e) INTO queued, read_n, read_to;
  -- Fewer than asked: the rest up to the last id were removed (retention) meanwhile.
  UPDATE alarm_events_queued SET up_to = CASE WHEN read_n < lim THEN last_id ELSE read_to END WHERE id = 1;
  RETURN queued;
END $$;
