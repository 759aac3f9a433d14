-- Up Migration

-- A running turn whose step failed and will be retried: what clients show meanwhile ("retrying
-- (2 of 5): <cause>") instead of a turn that looks hung for the minutes Inngest's backoff takes.
-- {attempt, maxAttempts, cause, nextAttemptAt?} of the latest failed attempt; NULL once the retried
-- step succeeded. Only a running turn carries it: the messages API reads it as status `retrying`.
ALTER TABLE turns ADD COLUMN retrying jsonb;

-- Written, with turn.retrying in the log, by threadline_turn_retrying (src/history/schema/functions).
