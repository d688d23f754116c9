-- foreign keys: off
-- An account's id is never given again. With INTEGER PRIMARY KEY alone, SQLite gives the
-- next account max(id) + 1: deleting the newest account made its id the next one's, and
-- whatever named the old account by id passed to the new one (an integration token whose
-- creator was deleted worked again, acting as the new account; read marks carried over).
-- The table is rebuilt with AUTOINCREMENT as SQLite's ALTER TABLE documentation says, with
-- foreign keys off so that dropping the old table does not cascade to the sessions.
CREATE TABLE users_rebuilt (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
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
INSERT INTO users_rebuilt (id, user_name, email, first_name, last_name, phone, image, profile, password_hash, is_active,
  created_ms, updated_ms, last_login_ms, tokens_valid_after_ms, failed_logins, locked_until_ms)
SELECT id, user_name, email, first_name, last_name, phone, image, profile, password_hash, is_active,
  created_ms, updated_ms, last_login_ms, tokens_valid_after_ms, failed_logins, locked_until_ms FROM users;
DROP TABLE users;
ALTER TABLE users_rebuilt RENAME TO users;

-- Ids of accounts deleted before this version may still be named (a token's creator, a
-- read mark): new ids start above all of them.
-- (sqlite_sequence has no key: a row for the table is made only when there is none.)
INSERT INTO sqlite_sequence (name, seq) SELECT 'users', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'users');
UPDATE sqlite_sequence SET seq = max(
  seq,
  coalesce((SELECT max(id) FROM users), 0),
  coalesce((SELECT max(created_by_user_id) FROM integration_tokens), 0),
  coalesce((SELECT max(CAST(substr(user_key, 6) AS INTEGER)) FROM notification_read_marks WHERE user_key LIKE 'user:%'), 0)
) WHERE name = 'users';
-- Read marks of accounts that are gone belong to no one.
DELETE FROM notification_read_marks WHERE user_key LIKE 'user:%' AND CAST(substr(user_key, 6) AS INTEGER) NOT IN (SELECT id FROM users);
