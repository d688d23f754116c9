-- Failed logins are counted per user name and source address (an IPv4 address or an IPv6
-- /64), not per account: failures from elsewhere cannot lock a user out, and a name that
-- has no account is counted and locked exactly like one that has, so that the answers
-- never tell which names exist.
CREATE TABLE login_failures (
  user_name TEXT NOT NULL COLLATE NOCASE,
  source TEXT NOT NULL,
  failures INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  locked_until_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_name, source)
) WITHOUT ROWID;
CREATE INDEX login_failures_last ON login_failures (last_ms);

ALTER TABLE users DROP COLUMN failed_logins;
ALTER TABLE users DROP COLUMN locked_until_ms;
