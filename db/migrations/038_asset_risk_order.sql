-- Asset discovery's default GraphQL order, riskLevel_desc, and its riskLevel filters read the
-- agents' and peripherals' risk from these indexes instead of computing it for every row
-- (a million peripherals: a second a page). Each expression is the one db/assets.ts reads
-- (FIELDS.riskLevel; a peripheral's without the rare models, which change hourly and are
-- folded in by the query). An index moves only when a column of its expression changes: a
-- check-in's times move neither.
CREATE INDEX agents_asset_risk ON agents ((max(CASE severity WHEN 0 THEN 10 WHEN 1 THEN 9 WHEN 2 THEN 8 WHEN 3 THEN 7 WHEN 4 THEN 5 WHEN 5 THEN 3 WHEN 6 THEN 1 WHEN 7 THEN 0 ELSE 0 END,
  has_attack_tool * 9, has_vulnerable * 7, has_unapproved * 4)), id);
CREATE INDEX peripherals_asset_risk ON peripherals ((max(CASE severity WHEN 0 THEN 10 WHEN 1 THEN 9 WHEN 2 THEN 8 WHEN 3 THEN 7 WHEN 4 THEN 5 WHEN 5 THEN 3 WHEN 6 THEN 1 WHEN 7 THEN 0 ELSE 0 END,
  is_attack_tool * CASE WHEN present THEN 9 ELSE 6 END, is_vulnerable * 7, is_unapproved * 4)), id);
-- A global search reads the agents' models and makers from this index rather than from every
-- agent's row (100,000 rows of adapters and texts: 290 ms).
CREATE INDEX agents_models ON agents (pc_model, manufacturer);
