CREATE TABLE users (
  id INTEGER PRIMARY KEY,
  user_name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  email TEXT NOT NULL,
  first_name TEXT,
  last_name TEXT,
  phone TEXT,
  image TEXT,
  profile INTEGER NOT NULL CHECK (profile IN (10, 20, 30)),
  password_hash TEXT NOT NULL,
  is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  last_login_ms INTEGER,
  -- Tokens issued before this instant (ms) are void: password change, disable, demotion.
  tokens_valid_after_ms INTEGER NOT NULL DEFAULT 0,
  failed_logins INTEGER NOT NULL DEFAULT 0,
  locked_until_ms INTEGER NOT NULL DEFAULT 0
);

-- One session per login; its refresh tokens rotate within it and access tokens name it.
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER,
  revoked_reason TEXT
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  used_ms INTEGER
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

CREATE TABLE integration_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL COLLATE NOCASE UNIQUE,
  token_hash TEXT NOT NULL UNIQUE,
  profile INTEGER NOT NULL CHECK (profile IN (10, 20, 30)),
  created_by TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_used_ms INTEGER,
  revoked_ms INTEGER
);

-- AUTOINCREMENT: audit ids only ever increase, even after the newest row is gone.
CREATE TABLE audit_trail (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms INTEGER NOT NULL,
  severity INTEGER NOT NULL CHECK (severity BETWEEN 0 AND 7),
  category TEXT NOT NULL,
  user_name TEXT,
  source_ip TEXT,
  description TEXT NOT NULL,
  details TEXT NOT NULL,
  operation_id TEXT,
  outcome TEXT NOT NULL CHECK (outcome IN ('Succeeded', 'Failed', 'Refused')),
  asset_key TEXT,
  asset_name TEXT,
  asset_parent_id TEXT,
  asset_ip TEXT,
  asset_type TEXT NOT NULL DEFAULT 'Unknown',
  asset_sub_type TEXT NOT NULL DEFAULT 'None',
  asset_detail TEXT NOT NULL DEFAULT 'Unknown',
  asset_icon INTEGER NOT NULL DEFAULT -1
);
CREATE INDEX audit_trail_created ON audit_trail (created_ms);

CREATE TRIGGER audit_trail_no_update BEFORE UPDATE ON audit_trail
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;
CREATE TRIGGER audit_trail_no_delete BEFORE DELETE ON audit_trail
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;
