-- Counts of the agent list's flag filters (HasUnapprovedPeripherals=True and the like).
-- The list's own indexes for them (migration 003) also hold the host name and uuid, for the
-- page's order: counting 13,000 flagged agents of 100,000 read about a megabyte of them,
-- 0.47 ms. These hold the flagged agents' ids alone, a few bytes an entry, and the planner
-- counts through them.
CREATE INDEX agents_unapproved_count ON agents (has_unapproved) WHERE has_unapproved = 1;
CREATE INDEX agents_vulnerable_count ON agents (has_vulnerable) WHERE has_vulnerable = 1;
CREATE INDEX agents_attack_tool_count ON agents (has_attack_tool) WHERE has_attack_tool = 1;
CREATE INDEX agents_vulnerable_or_wlv_count ON agents (vulnerable_or_wlv) WHERE vulnerable_or_wlv = 1;
