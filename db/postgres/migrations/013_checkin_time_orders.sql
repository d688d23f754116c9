-- The agents list sorted or filtered by its check-in time (lastUpdated) walks agent_checkins:
-- since migration 011 agents has no index on that time (its write is a HOT update), and
-- without one such a page sorted every agent (85 ms at 50,000 agents, growing with the
-- fleet). One index for each direction the list sorts in, nulls last both ways as SQLite
-- puts them (db/postgres/agent-filters.ts orderBy). They cost the narrow table an index
-- entry each per check-in, not the agents' 48.
CREATE INDEX agent_checkins_time_asc ON agent_checkins (last_updated_ms ASC NULLS LAST);
CREATE INDEX agent_checkins_time_desc ON agent_checkins (last_updated_ms DESC NULLS LAST);
