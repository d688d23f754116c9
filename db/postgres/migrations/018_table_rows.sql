-- Every agent and every peripheral, counted: what a list answers as recordsTotal, read from
-- one row instead of counted over the table on every page. At 100,000 agents that count is
-- a sequential scan of the agents' 17,000 pages (100-120 ms a page of 50, most of it), and
-- a million peripherals take longer.
--
-- (SQLite keeps its counts of column values in a table named row_counts; this one is
-- another, and named otherwise so that scripts/pg-load.ts copies nothing into it.)
--
-- Kept by statement-level triggers over transition tables: a bulk write adds one update.
-- A statement that inserts or deletes nothing (an upsert of unchanged peripherals, on every
-- check-in) leaves the row alone, so that unchanged check-ins never wait on its lock. A
-- statement that does holds it until its transaction ends: the writes that add or remove
-- agents and peripherals (enrollments, first check-ins, deletions) commit one after the
-- other, as the events' writes do on record_counts.
CREATE TABLE table_rows (
  name text PRIMARY KEY CHECK (name IN ('agents', 'peripherals')),
  n bigint NOT NULL
);

LOCK TABLE agents, peripherals IN SHARE MODE;
INSERT INTO table_rows (name, n) VALUES ('agents', (SELECT count(*) FROM agents)), ('peripherals', (SELECT count(*) FROM peripherals));

CREATE FUNCTION table_rows_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  k bigint := (SELECT count(*) FROM added);
BEGIN
  IF k > 0 THEN
    UPDATE table_rows SET n = n + k WHERE name = TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION table_rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  k bigint := (SELECT count(*) FROM removed);
BEGIN
  IF k > 0 THEN
    UPDATE table_rows SET n = n - k WHERE name = TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION table_rows_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE table_rows SET n = 0 WHERE name = TG_TABLE_NAME;
  RETURN NULL;
END $$;

CREATE TRIGGER agents_counted_in AFTER INSERT ON agents REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_added();
CREATE TRIGGER agents_counted_out AFTER DELETE ON agents REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_removed();
CREATE TRIGGER agents_counted_empty AFTER TRUNCATE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_emptied();
CREATE TRIGGER peripherals_counted_in AFTER INSERT ON peripherals REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_added();
CREATE TRIGGER peripherals_counted_out AFTER DELETE ON peripherals REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_removed();
CREATE TRIGGER peripherals_counted_empty AFTER TRUNCATE ON peripherals
  FOR EACH STATEMENT EXECUTE FUNCTION table_rows_emptied();
