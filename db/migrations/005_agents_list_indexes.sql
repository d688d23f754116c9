-- Search structures of the agent and peripheral lists and an index for the operations
-- that name agents by their identifiers (measured at 100,000 agents and a million
-- peripherals).

-- "Contains" on a peripheral's deviceID or serial (which is the last part of the
-- deviceID): serials are nearly all distinct, so they cannot be interned like vendor and
-- product names, and a pass over a million of them takes 150-250 ms. A trigram index
-- answers in about a millisecond; it costs about 130 MB per million peripherals and a
-- few hundredths of a millisecond per new peripheral. Contentless: the text stays in
-- the peripherals table only.
CREATE VIRTUAL TABLE peripherals_fts USING fts5 (device_id, content = '', contentless_delete = 1, tokenize = 'trigram');
INSERT INTO peripherals_fts (rowid, device_id) SELECT id, device_id FROM peripherals;
CREATE TRIGGER peripherals_fts_insert AFTER INSERT ON peripherals BEGIN
  INSERT INTO peripherals_fts (rowid, device_id) VALUES (new.id, new.device_id);
END;
CREATE TRIGGER peripherals_fts_update AFTER UPDATE OF device_id ON peripherals WHEN old.device_id IS NOT new.device_id BEGIN
  DELETE FROM peripherals_fts WHERE rowid = old.id;
  INSERT INTO peripherals_fts (rowid, device_id) VALUES (new.id, new.device_id);
END;
CREATE TRIGGER peripherals_fts_delete AFTER DELETE ON peripherals BEGIN
  DELETE FROM peripherals_fts WHERE rowid = old.id;
END;

-- agents/configuration and peripherals/command may name an agent by its address alone.
CREATE INDEX agents_local_ip ON agents (local_ip_address COLLATE NOCASE);
