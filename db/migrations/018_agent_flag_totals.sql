-- The agent list's flag filters alone (HasUnapprovedPeripherals=True and the like) are
-- counted from these totals, kept by triggers, instead of through the flags' indexes
-- (13,000 flagged agents of 100,000: 0.28 ms a count, most of what such a page costs
-- besides its rows).
INSERT INTO row_counts (name, n)
SELECT 'agents.has_unapproved', coalesce(sum(has_unapproved), 0) FROM agents UNION ALL
SELECT 'agents.has_vulnerable', coalesce(sum(has_vulnerable), 0) FROM agents UNION ALL
SELECT 'agents.has_attack_tool', coalesce(sum(has_attack_tool), 0) FROM agents UNION ALL
SELECT 'agents.vulnerable_or_wlv', coalesce(sum(vulnerable_or_wlv), 0) FROM agents;
CREATE TRIGGER agents_flags_insert AFTER INSERT ON agents
WHEN new.has_unapproved OR new.has_vulnerable OR new.has_attack_tool OR new.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n + CASE name
    WHEN 'agents.has_unapproved' THEN new.has_unapproved WHEN 'agents.has_vulnerable' THEN new.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN new.has_attack_tool ELSE new.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;
CREATE TRIGGER agents_flags_delete AFTER DELETE ON agents
WHEN old.has_unapproved OR old.has_vulnerable OR old.has_attack_tool OR old.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n - CASE name
    WHEN 'agents.has_unapproved' THEN old.has_unapproved WHEN 'agents.has_vulnerable' THEN old.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN old.has_attack_tool ELSE old.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;
CREATE TRIGGER agents_flags_update AFTER UPDATE OF has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv ON agents
WHEN old.has_unapproved IS NOT new.has_unapproved OR old.has_vulnerable IS NOT new.has_vulnerable
  OR old.has_attack_tool IS NOT new.has_attack_tool OR old.vulnerable_or_wlv IS NOT new.vulnerable_or_wlv
BEGIN
  UPDATE row_counts SET n = n + CASE name
    WHEN 'agents.has_unapproved' THEN new.has_unapproved - old.has_unapproved WHEN 'agents.has_vulnerable' THEN new.has_vulnerable - old.has_vulnerable
    WHEN 'agents.has_attack_tool' THEN new.has_attack_tool - old.has_attack_tool ELSE new.vulnerable_or_wlv - old.vulnerable_or_wlv END
  WHERE name IN ('agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv');
END;
