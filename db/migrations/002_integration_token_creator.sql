-- An integration token acts with at most its creator's current profile, and stops working
-- when its creator is disabled or deleted (tokens without a known creator never work).
ALTER TABLE integration_tokens ADD COLUMN created_by_user_id INTEGER;
CREATE INDEX integration_tokens_creator ON integration_tokens (created_by_user_id);
