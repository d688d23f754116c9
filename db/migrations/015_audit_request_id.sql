-- The request that wrote an audit record: the x-request-id its answer carried and the reqId
-- of its log line, so that a record leads to the request's log (and a log line to its
-- record). Null for records written before, and for those the service writes itself.
ALTER TABLE audit_trail ADD COLUMN request_id TEXT;
