-- Deleting an agent deletes its reported errors (ON DELETE CASCADE): without an index led by
-- agent_id, every deletion scanned the whole table.
CREATE INDEX agent_errors_agent ON agent_errors (agent_id);
