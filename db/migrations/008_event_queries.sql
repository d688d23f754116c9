-- Event and audit-trail queries: counts, dictionaries and indexes of the lists, the
-- integration feeds and their exports.

-- recordsTotal of the event and audit lists, without counting millions of rows.
INSERT INTO row_counts (name, n) VALUES ('events', (SELECT count(*) FROM events)), ('audit_trail', (SELECT count(*) FROM audit_trail));
CREATE TRIGGER events_count_insert AFTER INSERT ON events BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'events'; END;
CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'events'; END;
CREATE TRIGGER audit_trail_count_insert AFTER INSERT ON audit_trail BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'audit_trail'; END;
