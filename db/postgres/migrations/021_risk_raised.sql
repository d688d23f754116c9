-- Risk notifications are raised behind the writes of events, not in them: a consumer of the
-- events' feed (db/postgres/risk-feed.ts) reads the risky events after its mark, raises or
-- repeats their notifications and moves the mark, in one transaction. Raised in the writing
-- transaction, the notification's update (a new row version in each of its twelve indexes,
-- the trigram one among them) took half of an event write's time.
--
-- Event ids become visible in id order (migration 004's feed lock), so the mark never passes
-- over an event still being written; the mark's row lock makes the consumers of several
-- processes take turns. Every event written before this migration was raised as it was written.
CREATE TABLE risk_raised (
  id integer PRIMARY KEY CHECK (id = 1),
  up_to bigint NOT NULL
);
INSERT INTO risk_raised (id, up_to) SELECT 1, coalesce((SELECT top FROM record_counts WHERE name = 'events'), 0);
