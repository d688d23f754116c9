-- Host names and the agent fields that few distinct values fill (OS version, model, agent
-- version, licence account, latest event text, hashtags) are searched in memory
-- (db/agent-texts.ts): through the trigram index they cost 1-8 ms a search at 100,000
-- agents, because host names share their site and department parts and the other fields
-- repeat the same texts on thousands of agents, so their trigrams' lists are long.
--
-- agents_fts keeps what is unique to each agent (uuid, addresses, network adapters), and
-- agent_text_changes notes every agent inserted or deleted, or whose in-memory fields
-- changed, whoever wrote it: the memory follows the table through these notes.
DROP TRIGGER agents_fts_insert;
DROP TRIGGER agents_fts_update;
DROP TRIGGER agents_fts_delete;
DROP TABLE agents_fts;

CREATE VIRTUAL TABLE agents_fts USING fts5 (uuid, ip_addresses, nics_text, tokenize = 'trigram');
INSERT INTO agents_fts (rowid, uuid, ip_addresses, nics_text) SELECT id, uuid, ip_addresses, nics_text FROM agents;
CREATE TRIGGER agents_fts_insert AFTER INSERT ON agents BEGIN
  INSERT INTO agents_fts (rowid, uuid, ip_addresses, nics_text) VALUES (new.id, new.uuid, new.ip_addresses, new.nics_text);
END;
CREATE TRIGGER agents_fts_update AFTER UPDATE OF uuid, ip_addresses, nics_text ON agents
WHEN old.uuid IS NOT new.uuid OR old.ip_addresses IS NOT new.ip_addresses OR old.nics_text IS NOT new.nics_text
BEGIN
  UPDATE agents_fts SET uuid = new.uuid, ip_addresses = new.ip_addresses, nics_text = new.nics_text WHERE rowid = new.id;
END;
CREATE TRIGGER agents_fts_delete AFTER DELETE ON agents BEGIN
  DELETE FROM agents_fts WHERE rowid = old.id;
END;

-- AUTOINCREMENT: a note's number is never used again, even after the notes before it are
-- pruned, so a reader can tell notes it missed from notes that never were.
CREATE TABLE agent_text_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  agent_id INTEGER NOT NULL
);
INSERT INTO agent_text_changes (agent_id) VALUES (0);
DELETE FROM agent_text_changes;
CREATE TRIGGER agent_text_changes_insert AFTER INSERT ON agents BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (new.id);
END;
CREATE TRIGGER agent_text_changes_update AFTER UPDATE OF host_identifier, os_version, pc_model, service_version,
  license_account_name, latest_event_text, hashtags ON agents
WHEN old.host_identifier IS NOT new.host_identifier OR old.os_version IS NOT new.os_version OR old.pc_model IS NOT new.pc_model
  OR old.service_version IS NOT new.service_version OR old.license_account_name IS NOT new.license_account_name
  OR old.latest_event_text IS NOT new.latest_event_text OR old.hashtags IS NOT new.hashtags
BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (new.id);
END;
CREATE TRIGGER agent_text_changes_delete AFTER DELETE ON agents BEGIN
  INSERT INTO agent_text_changes (agent_id) VALUES (old.id);
END;
