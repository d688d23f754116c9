-- An agent's check-in time off the agents' indexes, so that writing it is a HOT update.
--
-- Every check-in writes agents.last_updated_ms (an unchanged one in the gateway's batch once
-- a second, db/postgres/gateway.ts heartbeats). While that column was in an index, each
-- write was a new row version with an entry in every one of the table's indexes (48, 16 of
-- them GIN): about 9 KB of WAL for an unchanged check-in. Without an index on it, and with
-- room left in each page for the new version, the write is a HOT update of the row alone.
--
-- The queries that walked those indexes by time (the disconnect sweeper's "connected and
-- quiet since", the connected agents latest first) walk agent_checkins instead: one narrow
-- row per agent, its time and whether it is connected, kept equal to the agent's by the
-- triggers below in the same statement, so a reader of either sees the same values. The
-- agents list sorted or filtered by lastUpdated scans the agents instead (docs/operating.md
-- "Capacity": what those reads cost).

DROP INDEX agents_connected;
DROP INDEX agents_last_updated;
DROP INDEX agents_last_updated_desc;

CREATE TABLE agent_checkins (
  agent_id bigint PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  last_updated_ms bigint,
  connected boolean NOT NULL
) WITH (fillfactor = 70);

INSERT INTO agent_checkins (agent_id, last_updated_ms, connected)
SELECT id, last_updated_ms, connection_status = 'Connected' FROM agents;

-- Latest first (loggedAgents); walked backwards, the oldest first (the sweeper's staleAgents).
CREATE INDEX agent_checkins_connected ON agent_checkins (last_updated_ms DESC NULLS LAST) WHERE connected;

CREATE FUNCTION agent_checkins_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO agent_checkins (agent_id, last_updated_ms, connected) VALUES (new.id, new.last_updated_ms, new.connection_status = 'Connected');
  RETURN NULL;
END
$$;

CREATE FUNCTION agent_checkins_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE agent_checkins SET last_updated_ms = new.last_updated_ms, connected = new.connection_status = 'Connected' WHERE agent_id = new.id;
  RETURN NULL;
END
$$;

CREATE TRIGGER agents_checkin_insert AFTER INSERT ON agents FOR EACH ROW EXECUTE FUNCTION agent_checkins_insert();

CREATE TRIGGER agents_checkin_update AFTER UPDATE OF last_updated_ms, connection_status ON agents FOR EACH ROW
WHEN (old.last_updated_ms IS DISTINCT FROM new.last_updated_ms OR old.connection_status IS DISTINCT FROM new.connection_status)
EXECUTE FUNCTION agent_checkins_update();

-- Room in each page for a row's next version (a HOT update needs it on the same page). The
-- table is not rewritten (that would lock it for minutes at a large fleet): a row on a page
-- filled before now moves, once, at its next write to a page filled only this far, and is
-- written HOT from then on.
ALTER TABLE agents SET (fillfactor = 70);
ANALYZE agent_checkins;
