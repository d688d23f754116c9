-- The agents of each risk flag, counted as every agent is (migration 018): what a list
-- filtered by that flag alone answers as recordsFiltered (SQLite's row_counts keeps the same
-- totals). Counted over the flag's partial index instead, the 13,000 agents with unapproved
-- peripherals of 100,000 took 100 ms a page: check-ins update the agents' rows all the time,
-- so the index cannot answer without visiting each row.
--
-- Kept by statement-level triggers over transition tables: one UPDATE of table_rows for a
-- statement whatever it changed, and none when it changed no count, so that the check-ins'
-- updates, which change no flag, leave the rows and their locks alone. A statement that
-- changes a flag holds its row until its transaction ends, as migration 018's counts do.
ALTER TABLE table_rows DROP CONSTRAINT table_rows_name_check;
ALTER TABLE table_rows ADD CONSTRAINT table_rows_name_check
  CHECK (name IN ('agents', 'peripherals', 'agents.has_unapproved', 'agents.has_vulnerable', 'agents.has_attack_tool', 'agents.vulnerable_or_wlv'));

LOCK TABLE agents IN SHARE MODE;
INSERT INTO table_rows (name, n)
SELECT v.name, v.n
FROM (SELECT count(*) FILTER (WHERE has_unapproved = 1) AS u, count(*) FILTER (WHERE has_vulnerable = 1) AS v,
             count(*) FILTER (WHERE has_attack_tool = 1) AS t, count(*) FILTER (WHERE vulnerable_or_wlv = 1) AS w
      FROM agents) c,
LATERAL (VALUES ('agents.has_unapproved', c.u), ('agents.has_vulnerable', c.v), ('agents.has_attack_tool', c.t), ('agents.vulnerable_or_wlv', c.w)) v (name, n);

-- Adds k agents and the flagged among them (negative: removes them).
CREATE FUNCTION agent_rows_moved(k bigint, u bigint, v bigint, t bigint, w bigint) RETURNS void LANGUAGE sql AS $$
  UPDATE table_rows SET n = table_rows.n + d.delta
  FROM (VALUES ('agents', k), ('agents.has_unapproved', u), ('agents.has_vulnerable', v), ('agents.has_attack_tool', t), ('agents.vulnerable_or_wlv', w)) d (name, delta)
  WHERE table_rows.name = d.name AND d.delta <> 0
$$;

CREATE FUNCTION agent_rows_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  SELECT count(*) AS k, count(*) FILTER (WHERE has_unapproved = 1) AS u, count(*) FILTER (WHERE has_vulnerable = 1) AS v,
         count(*) FILTER (WHERE has_attack_tool = 1) AS t, count(*) FILTER (WHERE vulnerable_or_wlv = 1) AS w
  INTO c FROM added;
  IF c.k > 0 THEN
    PERFORM agent_rows_moved(c.k, c.u, c.v, c.t, c.w);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION agent_rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  SELECT count(*) AS k, count(*) FILTER (WHERE has_unapproved = 1) AS u, count(*) FILTER (WHERE has_vulnerable = 1) AS v,
         count(*) FILTER (WHERE has_attack_tool = 1) AS t, count(*) FILTER (WHERE vulnerable_or_wlv = 1) AS w
  INTO c FROM removed;
  IF c.k > 0 THEN
    PERFORM agent_rows_moved(-c.k, -c.u, -c.v, -c.t, -c.w);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION agent_flags_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  a record;
  b record;
BEGIN
  SELECT count(*) FILTER (WHERE has_unapproved = 1) AS u, count(*) FILTER (WHERE has_vulnerable = 1) AS v,
         count(*) FILTER (WHERE has_attack_tool = 1) AS t, count(*) FILTER (WHERE vulnerable_or_wlv = 1) AS w
  INTO a FROM after;
  SELECT count(*) FILTER (WHERE has_unapproved = 1) AS u, count(*) FILTER (WHERE has_vulnerable = 1) AS v,
         count(*) FILTER (WHERE has_attack_tool = 1) AS t, count(*) FILTER (WHERE vulnerable_or_wlv = 1) AS w
  INTO b FROM before;
  IF (a.u, a.v, a.t, a.w) IS DISTINCT FROM (b.u, b.v, b.t, b.w) THEN
    PERFORM agent_rows_moved(0, a.u - b.u, a.v - b.v, a.t - b.t, a.w - b.w);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION agent_rows_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE table_rows SET n = 0 WHERE name = 'agents' OR name LIKE 'agents.%';
  RETURN NULL;
END $$;

DROP TRIGGER agents_counted_in ON agents;
DROP TRIGGER agents_counted_out ON agents;
DROP TRIGGER agents_counted_empty ON agents;
CREATE TRIGGER agents_counted_in AFTER INSERT ON agents REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION agent_rows_added();
CREATE TRIGGER agents_counted_out AFTER DELETE ON agents REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION agent_rows_removed();
CREATE TRIGGER agents_flags_counted AFTER UPDATE ON agents REFERENCING OLD TABLE AS before NEW TABLE AS after
  FOR EACH STATEMENT EXECUTE FUNCTION agent_flags_changed();
CREATE TRIGGER agents_counted_empty AFTER TRUNCATE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION agent_rows_emptied();
