-- The agents and peripherals lists' indexes beyond migration 003's (db/postgres/agent-filters.ts).
-- They replace SQLite's agents_fts, peripherals_fts and in-memory dictionaries (db/agent-texts.ts).

-- "Contains" filters and GlobalSearch are ILIKE '%term%': trigram GIN indexes serve them from
-- 3 characters. GlobalSearch ORs every column below, so each has one (a bitmap OR of them all).
CREATE INDEX agents_host_trgm ON agents USING gin (host_identifier gin_trgm_ops);
CREATE INDEX agents_uuid_trgm ON agents USING gin (uuid gin_trgm_ops);
CREATE INDEX agents_ip_addresses_trgm ON agents USING gin (ip_addresses gin_trgm_ops);
CREATE INDEX agents_nics_trgm ON agents USING gin (nics_text gin_trgm_ops);
CREATE INDEX agents_os_version_trgm ON agents USING gin (os_version gin_trgm_ops);
CREATE INDEX agents_pc_model_trgm ON agents USING gin (pc_model gin_trgm_ops);
CREATE INDEX agents_service_version_trgm ON agents USING gin (service_version gin_trgm_ops);
CREATE INDEX agents_license_account_trgm ON agents USING gin (license_account_name gin_trgm_ops);
CREATE INDEX agents_latest_event_trgm ON agents USING gin (latest_event_text gin_trgm_ops);
CREATE INDEX agents_hashtags_trgm ON agents USING gin (hashtags gin_trgm_ops);

CREATE INDEX peripherals_device_id_trgm ON peripherals USING gin (device_id gin_trgm_ops);
CREATE INDEX peripheral_texts_trgm ON peripheral_texts USING gin (text gin_trgm_ops);

-- Sort orders: SQLite's NOCASE is lower(col COLLATE "C") here and BINARY is COLLATE "C",
-- whatever the database's locale, so these indexes name those collations (003's lower(col)
-- ones are in the database's). Each serves its order ascending and, walked back, descending.
CREATE INDEX agents_host_order ON agents ((lower(host_identifier COLLATE "C")), (uuid COLLATE "C"));
CREATE INDEX agents_uuid_order ON agents ((uuid COLLATE "C"));
CREATE INDEX agents_severity_order ON agents (severity, (uuid COLLATE "C"));
-- Latest check-in first, never-seen agents last (the console's common order).
CREATE INDEX agents_last_updated_desc ON agents (last_updated_ms DESC NULLS LAST, (uuid COLLATE "C") DESC);

-- A flag filter with the host order (the console's risk views) walks its flagged agents only.
CREATE INDEX agents_unapproved_host ON agents ((lower(host_identifier COLLATE "C")), (uuid COLLATE "C")) WHERE has_unapproved = 1;
CREATE INDEX agents_vulnerable_host ON agents ((lower(host_identifier COLLATE "C")), (uuid COLLATE "C")) WHERE has_vulnerable = 1;
CREATE INDEX agents_attack_tool_host ON agents ((lower(host_identifier COLLATE "C")), (uuid COLLATE "C")) WHERE has_attack_tool = 1;

CREATE INDEX peripherals_uuid_order ON peripherals ((agent_uuid COLLATE "C"), (device_id COLLATE "C"), id);
