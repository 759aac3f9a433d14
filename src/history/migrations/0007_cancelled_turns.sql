-- Up Migration

-- A cancelled run is recorded as such (Inngest calls no onFailure for it), so its thread is
-- released at once. 'superseded' comes from 0006 (an answer stored off the current path).
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'superseded', 'cancelled'));
