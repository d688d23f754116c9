-- What every part of the PostgreSQL schema uses.

-- Trigram indexes for "contains" filters and global search (a trusted extension: the
-- database's owner may create it).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Work that one node at a time may do (a loop marked as a singleton): the holder renews its
-- lease before it expires; another node takes it over once it has. `fence` grows with every
-- change of holder, so a holder that lost its lease cannot write as if it still had it.
CREATE TABLE leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  fence bigint NOT NULL,
  expires_at timestamptz NOT NULL
);
