-- Retention prunes by time (lib/retention.ts), whatever the id order: what it deletes is a
-- set of ids, no longer every id up to a mark. Each prune counts one here, so that a process
-- whose counts in memory predate it reads them again. (pruned_through stays: the highest id
-- pruned so far.)
ALTER TABLE record_index_state ADD COLUMN prunes INTEGER NOT NULL DEFAULT 0;
