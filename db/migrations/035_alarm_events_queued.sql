-- The deliveries of events are queued behind the writes, by the delivery worker
-- (db/alarms.ts queueEvents), not by the statement that stores the events: a burst of events
-- is stored at the speed of the events alone, whatever the number of destinations, and the
-- worker queues them in id order a slice at a time. up_to is the last event id whose
-- deliveries are queued (those before this migration were queued by their writes).
CREATE TABLE alarm_events_queued (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  up_to INTEGER NOT NULL
);
INSERT INTO alarm_events_queued (id, up_to) VALUES (1, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0));
-- A destination receives the events after this id: those stored once it was created, or
-- enabled again, or subscribed to events again (not those of the time before).
ALTER TABLE alarm_destinations ADD COLUMN events_from INTEGER NOT NULL DEFAULT 0;
UPDATE alarm_destinations SET events_from = (SELECT up_to FROM alarm_events_queued);
