-- Every write of an agent row gives it a new `rev`, drawn from one counter for all agents,
-- whoever writes it. A list keeps each agent's answer (its JSON) under its id and rev, and
-- serves it again while the row has the same rev: reading 38 columns and serializing them
-- was most of the cost of a page. Rows older than this migration share rev 0 (their ids
-- tell them apart); a row inserted later under a reused id has a rev of its own.
ALTER TABLE agents ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
INSERT INTO row_counts (name, n) VALUES ('agents.rev', 0);

CREATE TRIGGER agents_rev_insert AFTER INSERT ON agents BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;
-- The trigger's own write changes rev, so it does not fire itself again (recursive
-- triggers are on); a write that leaves every column as it was still counts as a write.
CREATE TRIGGER agents_rev_update AFTER UPDATE ON agents WHEN new.rev IS old.rev BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;
