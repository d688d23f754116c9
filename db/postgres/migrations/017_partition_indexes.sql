-- The secondary indexes of events and the audit trail on every day's partition.
--
-- A database copied from SQLite by scripts/pg-load.ts before it was corrected holds them on
-- the partitioned tables alone: the copy made them again from their definitions, which read
-- back `ON ONLY`, so each was left invalid and built on no partition, and every filter, sort
-- and search read whole partitions. Each such index is made again here, on every partition
-- (minutes for millions of records, once). Anywhere else there is none, and nothing to do.
DO $$
DECLARE
  ix record;
BEGIN
  FOR ix IN
    SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid IN ('events'::regclass, 'audit_trail'::regclass) AND NOT i.indisvalid
  LOOP
    EXECUTE format('DROP INDEX %I', ix.name);
    EXECUTE replace(ix.def, ' ON ONLY ', ' ON ');
  END LOOP;
END $$;
