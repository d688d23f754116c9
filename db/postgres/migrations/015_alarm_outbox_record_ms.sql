-- Each queued event and audit record keeps its creation time beside its id.
--
-- The delivery worker reads a page's records by id. Events and audit records are partitioned
-- by day of creation, and an id alone names no day: every day's partition was planned and
-- probed (with a year of them, about half a second for ten events). With the time the read
-- is bounded to the days of the page's records. NULL for rows queued before this migration
-- and for asset messages (read by id alone, as before). Adding a column without a default
-- rewrites nothing, and a node of the previous version, which names its columns, goes on
-- working: the queueing functions below are the database's, so its queued rows carry the
-- time too.
ALTER TABLE alarm_outbox ADD COLUMN record_ms bigint;

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
  WITH e AS (
    SELECT ev.id, ev.created_ms, ev.severity, ev.category, ev.alarm_destination_id FROM events ev WHERE ev.id > start_id AND ev.id <= last_id ORDER BY ev.id LIMIT lim
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

CREATE OR REPLACE FUNCTION audit_trail_alarm_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM alarm_destinations d WHERE d.enabled = 1 AND d.feed_audit = 1 AND NEW.severity <= d.min_severity
      AND (d.audit_categories = '' OR position(',' || NEW.category || ',' IN d.audit_categories) > 0)
  ) THEN
    RETURN NULL;
  END IF;
  PERFORM alarm_queue_before('audit', now_ms);
  INSERT INTO alarm_outbox (destination_id, feed, record_id, record_ms, delivery_id, queued_ms)
  SELECT d.id, 'audit', NEW.id, NEW.created_ms, gen_random_uuid()::text, now_ms
  FROM alarm_destinations d
  WHERE d.enabled = 1 AND d.feed_audit = 1 AND NEW.severity <= d.min_severity
    AND (d.audit_categories = '' OR position(',' || NEW.category || ',' IN d.audit_categories) > 0)
  ORDER BY d.id;
  RETURN NULL;
END $$;
