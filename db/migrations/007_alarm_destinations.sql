-- Alarm destinations and their durable delivery outbox.

-- The destination an "Alarm delivery failure" event is about: never delivered to it.
ALTER TABLE events ADD COLUMN alarm_destination_id TEXT;
