-- Global searches of one or two characters over assets (db/asset-grams.ts): per source
-- (0 agents, 2 peripherals), how many rows hold each gram of one or two characters of their
-- searched texts (folded as LIKE folds), and the rows of the rare grams. The texts are
-- those of FIELDS (db/assets-fields.ts: name, key, ipAddress, model, vendor; an agent's
-- adapters): a peripheral's ipAddress is its agent's address, so an agent's address change
-- moves its peripherals' grams too. Triggers call asset_grams(), an app-defined function.
CREATE TABLE asset_grams (
  src INTEGER NOT NULL,
  gram TEXT NOT NULL,
  n INTEGER NOT NULL,
  -- Its rows are listed in asset_gram_rows: set while it is held by at most 2000 agents or
  -- 10000 peripherals (db/asset-grams.ts GRAM_CAPS), cleared when it passes that; a gram
  -- that falls back under it is read by walking an index until the next build.
  posted INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (src, gram)
) WITHOUT ROWID;
-- Nearly always empty: the grams whose rows must stop being listed.
CREATE INDEX asset_grams_over_cap ON asset_grams (src, gram) WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
CREATE TABLE asset_gram_rows (
  src INTEGER NOT NULL,
  gram TEXT NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY (src, gram, id)
) WITHOUT ROWID;


-- Inserts and deletes count every gram of the row; updates only those that differ
-- (asset_gram_diff: the grams of the old texts not in the new, and the reverse).
CREATE TRIGGER agents_grams_insert AFTER INSERT ON agents BEGIN
  INSERT INTO asset_grams (src, gram, n) SELECT 0, value, 1 FROM json_each(asset_grams(new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text)) WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_grams(new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text)) j CROSS JOIN asset_grams g ON g.src = 0 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;
CREATE TRIGGER agents_grams_update AFTER UPDATE OF host_identifier, uuid, local_ip_address, pc_model, manufacturer, nics_text ON agents
WHEN old.host_identifier IS NOT new.host_identifier OR old.uuid IS NOT new.uuid OR old.local_ip_address IS NOT new.local_ip_address OR old.pc_model IS NOT new.pc_model OR old.manufacturer IS NOT new.manufacturer OR old.nics_text IS NOT new.nics_text
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 0 AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.del'));
  DELETE FROM asset_gram_rows WHERE src = 0 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.del'));
  INSERT INTO asset_grams (src, gram, n) SELECT 0, value, 1 FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.add') WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_gram_diff(old.id, new.id, 6, old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text, new.host_identifier, new.uuid, new.local_ip_address, new.pc_model, new.manufacturer, new.nics_text), '$.add') j CROSS JOIN asset_grams g ON g.src = 0 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;
-- A peripheral's ipAddress is its agent's: every peripheral of the agent moves.
CREATE TRIGGER agents_peripheral_grams_update AFTER UPDATE OF local_ip_address ON agents
WHEN old.local_ip_address IS NOT new.local_ip_address
BEGIN
  UPDATE asset_grams SET n = n - c.k
    FROM (SELECT g.value AS gram, count(*) AS k FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.del') g WHERE p.agent_id = new.id GROUP BY 1) AS c
    WHERE asset_grams.src = 2 AND asset_grams.gram = c.gram;
  DELETE FROM asset_gram_rows WHERE (src, gram, id) IN (SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.del') g WHERE p.agent_id = new.id);
  INSERT INTO asset_grams (src, gram, n)
    SELECT 2, g.value, count(*) FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.add') g WHERE p.agent_id = new.id GROUP BY 2
    ON CONFLICT DO UPDATE SET n = n + excluded.n;
  INSERT INTO asset_gram_rows (src, gram, id)
    SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_gram_diff(p.id, p.id, 4, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer), coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, new.local_ip_address, coalesce(p.gui_vid, p.manufacturer)), '$.add') g CROSS JOIN asset_grams x ON x.src = 2 AND x.gram = g.value
    WHERE p.agent_id = new.id AND x.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;
-- Before the agent goes: its peripherals, deleted by the cascade after it, no longer find
-- its address (their own trigger then leaves them to this one).
CREATE TRIGGER agents_grams_delete BEFORE DELETE ON agents BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 0 AND gram IN (SELECT value FROM json_each(asset_grams(old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text)));
  DELETE FROM asset_gram_rows WHERE src = 0 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_grams(old.host_identifier, old.uuid, old.local_ip_address, old.pc_model, old.manufacturer, old.nics_text)));
  UPDATE asset_grams SET n = n - c.k
    FROM (SELECT g.value AS gram, count(*) AS k FROM peripherals p, json_each(asset_grams(coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer))) g WHERE p.agent_id = old.id GROUP BY 1) AS c
    WHERE asset_grams.src = 2 AND asset_grams.gram = c.gram;
  DELETE FROM asset_gram_rows WHERE (src, gram, id) IN (SELECT 2, g.value, p.id FROM peripherals p, json_each(asset_grams(coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, old.local_ip_address, coalesce(p.gui_vid, p.manufacturer))) g WHERE p.agent_id = old.id);
END;

CREATE TRIGGER peripherals_grams_insert AFTER INSERT ON peripherals BEGIN
  INSERT INTO asset_grams (src, gram, n) SELECT 2, value, 1 FROM json_each(asset_grams(coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer))) WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_grams(coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer))) j CROSS JOIN asset_grams g ON g.src = 2 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;
CREATE TRIGGER peripherals_grams_update AFTER UPDATE OF gui_pid, caption, description, device_id, agent_uuid, gui_vid, manufacturer, agent_id ON peripherals
WHEN old.gui_pid IS NOT new.gui_pid OR old.caption IS NOT new.caption OR old.description IS NOT new.description OR old.device_id IS NOT new.device_id OR old.agent_uuid IS NOT new.agent_uuid OR old.gui_vid IS NOT new.gui_vid OR old.manufacturer IS NOT new.manufacturer OR old.agent_id IS NOT new.agent_id
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 2 AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.del'));
  DELETE FROM asset_gram_rows WHERE src = 2 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.del'));
  INSERT INTO asset_grams (src, gram, n) SELECT 2, value, 1 FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.add') WHERE true ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO asset_gram_rows (src, gram, id) SELECT g.src, g.gram, new.id FROM json_each(asset_gram_diff(old.id, new.id, 4, coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer), coalesce(new.gui_pid, new.caption, new.description, new.device_id), new.agent_uuid || '/' || new.device_id, (SELECT local_ip_address FROM agents WHERE id = new.agent_id), coalesce(new.gui_vid, new.manufacturer)), '$.add') j CROSS JOIN asset_grams g ON g.src = 2 AND g.gram = j.value WHERE g.posted;
  DELETE FROM asset_gram_rows WHERE (src, gram) IN (SELECT src, gram FROM asset_grams WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END);
  UPDATE asset_grams SET posted = 0 WHERE posted AND n > CASE src WHEN 0 THEN 2000 ELSE 10000 END;
END;
CREATE TRIGGER peripherals_grams_delete AFTER DELETE ON peripherals
WHEN EXISTS (SELECT 1 FROM agents WHERE id = old.agent_id)
BEGIN
  UPDATE asset_grams SET n = n - 1 WHERE src = 2 AND gram IN (SELECT value FROM json_each(asset_grams(coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer))));
  DELETE FROM asset_gram_rows WHERE src = 2 AND id = old.id AND gram IN (SELECT value FROM json_each(asset_grams(coalesce(old.gui_pid, old.caption, old.description, old.device_id), old.agent_uuid || '/' || old.device_id, (SELECT local_ip_address FROM agents WHERE id = old.agent_id), coalesce(old.gui_vid, old.manufacturer))));
END;

-- The rows there already (the same statements as db/asset-grams.ts BUILD_ASSET_GRAMS).
CREATE TEMP TABLE asset_grams_build (src INTEGER, j TEXT);
INSERT INTO temp.asset_grams_build SELECT 0, asset_gram_index(2000, a.id, a.host_identifier, a.uuid, a.local_ip_address, a.pc_model, a.manufacturer, a.nics_text) FROM agents a;
INSERT INTO temp.asset_grams_build SELECT 2, asset_gram_index(10000, p.id, coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, a.local_ip_address, coalesce(p.gui_vid, p.manufacturer))
  FROM peripherals p JOIN agents a ON a.id = p.agent_id;
INSERT INTO asset_grams (src, gram, n, posted)
  SELECT b.src, g.key, g.value ->> 0, g.value -> 1 <> 'null' FROM temp.asset_grams_build b, json_each(b.j) g WHERE b.j IS NOT NULL;
INSERT INTO asset_gram_rows (src, gram, id)
  SELECT b.src, g.key, r.value FROM temp.asset_grams_build b, json_each(b.j) g, json_each(g.value, '$[1]') r
  WHERE b.j IS NOT NULL AND g.value -> 1 <> 'null';
DROP TABLE temp.asset_grams_build;
