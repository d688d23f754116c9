-- A page of the agents list is found as its ids first, walking the sort's index with OFFSET
-- (db/postgres/agent-filters.ts pageStatement). Those indexes held the sort's expressions
-- only, so each row walked past was read from the table for its id: a page deep in the list
-- (PageNumber=500 of 50) read 25,000 rows scattered over the table, 540 ms at 100,000 agents
-- (15,000 blocks of a 134 MB table). With the id and the columns of the expressions in the
-- index (the planner takes an index-only scan only when every column a query names is in
-- it), the walk reads the index alone: 19 ms, no heap fetch where the visibility map says
-- all-visible. Every column included is indexed already: no update that was HOT stops being so.
DROP INDEX agents_host_order;
CREATE INDEX agents_host_order ON agents ((lower(host_identifier COLLATE "C")), (uuid COLLATE "C")) INCLUDE (id, host_identifier, uuid);
DROP INDEX agents_uuid_order;
CREATE INDEX agents_uuid_order ON agents ((uuid COLLATE "C")) INCLUDE (id, uuid);
DROP INDEX agents_severity_order;
CREATE INDEX agents_severity_order ON agents (severity, (uuid COLLATE "C")) INCLUDE (id, uuid);
