-- The check-in time (last_updated_ms) no longer moves an agent's rev: unchanged check-ins
-- write it thousands of times a second in a live fleet, a trigger on every such write
-- tripled its cost (8 to 27 µs), and each one threw away the agent's kept JSON. The list
-- reads the time with the page and puts it in the kept JSON as it serves it.
--
-- Every other column agentView reads (db/agents.ts VIEW_COLUMNS) is listed; a test fails
-- when one is missing. A write that leaves the values as they were still counts. The
-- trigger's own write sets only rev, which is not listed, so it does not fire it again.
DROP TRIGGER agents_rev_update;
CREATE TRIGGER agents_rev_update AFTER UPDATE OF
  uuid, host_identifier, local_ip_address, os_version, pc_model, nics_text, operational_status, connection_status,
  display_status, approved_and_present, approved_and_disconnected, not_approved, latest_event_text, latest_minus1_event_text,
  latest_minus2_event_text, service_version, kb_driver_version, last_configured_ms, license_status,
  expiration_ms, license_account_id, license_account_name, severity, has_unapproved, has_vulnerable, has_attack_tool,
  vulnerable_or_wlv, in_action, model_tooltip, running_mode, switch_ip, switch_name, port_id, port_name, ethernets_count,
  hashtags
ON agents BEGIN
  UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev';
  UPDATE agents SET rev = (SELECT n FROM row_counts WHERE name = 'agents.rev') WHERE id = new.id;
END;
