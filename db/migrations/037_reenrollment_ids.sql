-- A held re-enrollment has an id of its own, new each time a later enrollment replaces the
-- one held: an Administrator's decision names the id of the request it reviewed, so that a
-- replacement arriving meanwhile is not approved in its place. Held rows get ids now.
CREATE TABLE agent_reenrollments_new (
  agent_id INTEGER PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  id TEXT NOT NULL UNIQUE,                         -- a random UUID
  credential_hash TEXT NOT NULL UNIQUE,
  host_identifier TEXT NOT NULL,
  source_ip TEXT,
  requested_ms INTEGER NOT NULL
);
INSERT INTO agent_reenrollments_new (agent_id, id, credential_hash, host_identifier, source_ip, requested_ms)
  SELECT agent_id,
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2) || '-'
      || substr('89ab', 1 + abs(random() % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))),
    credential_hash, host_identifier, source_ip, requested_ms
  FROM agent_reenrollments;
DROP TABLE agent_reenrollments;
ALTER TABLE agent_reenrollments_new RENAME TO agent_reenrollments;
