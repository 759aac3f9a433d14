-- Up Migration

-- When a user last had memories forgotten (the memory API, or the forget tool): a fact proposed
-- from a message written before then is not stored (memories-sql.ts insertExtractedMemory), so a
-- memory the user deleted never comes back from a turn whose extraction ran late (queued behind
-- the user's others, or retrying). One row per user, under a digest of the user id like
-- user_erasures; erasing the user deletes it (src/history/users.ts).
CREATE TABLE memory_forgets (
  user_key bytea PRIMARY KEY,
  forgotten_at timestamptz NOT NULL
);
