-- Up Migration

-- Server-to-server API keys. A key reads tl_<id>_<secret>: the id finds the row, and only a hash of
-- the secret is stored, so a copy of this table cannot be used to call the API.
CREATE TABLE api_keys (
  id           text        PRIMARY KEY,
  user_id      text        NOT NULL,
  name         text        NOT NULL,
  secret_hash  bytea       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at);
