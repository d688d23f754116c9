-- The event queue's slice reads no event past the last id it took as its bound.
--
-- Migration 005's alarm_queue_events read the last id in one statement and the events after
-- the mark in the next: each statement of a function sees what has committed when it starts,
-- so events committed between the two were queued in that slice although the mark was then
-- set to the older last id, and the next slice queued them again, under new delivery ids (a
-- destination received those events twice). The events read are now bounded by that last
-- id, and the last id is the one the writers keep (migration 012's record_counts.top: max(id)
-- visits every day's partition); the loops that queue everything stop on it too.
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
    SELECT ev.id, ev.severity, ev.category, ev.alarm_destination_id FROM events ev WHERE ev.id > start_id AND ev.id <= last_id ORDER BY ev.id LIMIT lim
  ), q AS (
    INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms)
    SELECT d.id, 'events', e.id, gen_random_uuid()::text, now_ms
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

CREATE OR REPLACE FUNCTION alarm_queue_all_events(now_ms bigint) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  total integer := 0;
BEGIN
  LOOP
    total := total + alarm_queue_events(1000, now_ms);
    EXIT WHEN (SELECT up_to FROM alarm_events_queued WHERE id = 1) >= (SELECT top FROM record_counts WHERE name = 'events');
  END LOOP;
  RETURN total;
END $$;

CREATE OR REPLACE FUNCTION alarm_queue_before(feed text, now_ms bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1
      AND CASE feed WHEN 'audit' THEN feed_audit = 1 ELSE feed_assets = 1 END
  ) AND (SELECT up_to FROM alarm_events_queued WHERE id = 1) < (SELECT top FROM record_counts WHERE name = 'events') THEN
    PERFORM alarm_queue_all_events(now_ms);
  END IF;
END $$;
