-- A bulk write of agents may give every row it writes the same new rev itself, drawn once
-- for the statement (db/gateway.ts disconnectMany, db/events.ts's latest-text shift): the
-- per-row trigger then stays out of it. A mass disconnect rewrote each row twice (the
-- trigger's own UPDATE) and bumped the counter once per agent. A list keeps an agent's JSON
-- under its id and rev, so a rev shared by the rows of one statement is still new for each.
-- Every other write leaves rev as it was and is counted here as before.
DROP TRIGGER agents_rev_update;
CREATE TRIGGER agents_rev_update AFTER UPDATE OF
  uuid, host_identifier, local_ip_address, os_version, pc_model, nics_text, operational_status, connection_status,
  display_status, approved_and_present, approved_and_disconnected, not_approved, latest_event_text, latest_minus1_event_text,
  latest_minus2_event_text, service_version, kb_driver_version, last_configured_ms, license_status,
  expiration_ms, license_account_id, license_account_name, severity, has_unapproved, has_vulnerable, has_attack_tool,
  vulnerable_or_wlv, in_action, model_tooltip, running_mode, switch_ip, switch_name, port_id, port_name, ethernets_count,
  hashtags
ON agents WHEN new.rev IS old.rev BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;
