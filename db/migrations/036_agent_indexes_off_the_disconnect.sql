-- A mass disconnect rewrites every quiet agent's connection and display status. Each index
-- holding either column moves an entry per agent: at 20,000 agents the classes' 13 columns
-- and the connection index were 60% of the update's time. Now:
-- * agents_classes leaves both out: the classification counts them from agents_connected.
-- * agents_connected holds the connected agents only (the sweeper's and the logged agents'
--   reads, and the display status of each): a disconnect deletes an entry and adds none.
--   A disconnected agent's display status is Disconnected (db/agent-state.ts decides it
--   before anything else, and the sweeper's disconnect sets both).
DROP INDEX agents_classes;
CREATE INDEX agents_classes ON agents (in_action, operational_status, license_status, running_mode,
  severity, has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv, os_version, service_version);
DROP INDEX agents_connection;
CREATE INDEX agents_connected ON agents (last_updated_ms, display_status) WHERE connection_status = 'Connected';
