-- The outbox rows of events are queued by the statement that stores them (db/events.ts
-- recordMany: one INSERT ... SELECT per call over the new ids), not by a trigger run for
-- every event row: the trigger's program cost about as much as the row itself. Events are
-- written only through recordMany; the bulk loaders (scripts/seed*.ts) queue no deliveries.
DROP TRIGGER events_alarm_outbox;
