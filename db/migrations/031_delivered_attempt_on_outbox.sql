-- A delivered attempt is kept on the outbox row it delivered instead of a row of its own in
-- alarm_attempts: one TCP syslog write of 500 lines wrote 500 attempt rows (and two index
-- entries each), which cost the worker more than the write itself. Retried and failed
-- attempts stay rows of alarm_attempts; so does a delivered one whose delivery was no
-- longer pending (cancelled meanwhile), and every attempt recorded before this version.
ALTER TABLE alarm_outbox ADD COLUMN started_ms INTEGER;   -- the delivered attempt's start; null: none here
ALTER TABLE alarm_outbox ADD COLUMN duration_ms REAL;     -- and how long it took

-- Every attempt of every delivery, as alarm_attempts alone held them before: read attempts here.
CREATE VIEW alarm_attempt_history AS
  SELECT outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error FROM alarm_attempts
  UNION ALL
  SELECT id, destination_id, attempts, started_ms, duration_ms, 'delivered', NULL FROM alarm_outbox WHERE started_ms IS NOT NULL;
