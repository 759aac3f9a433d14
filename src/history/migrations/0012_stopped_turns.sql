-- Up Migration

-- A turn the user stopped (POST /api/threads/:threadId/stop): finished, its partial answer (if any)
-- stored and marked stopped. Unlike 'cancelled', the turn ended on the user's word with an answer.
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'superseded', 'cancelled', 'stopped'));

-- An answer cut short by a stop: what the model had streamed when the user stopped it.
ALTER TABLE messages ADD COLUMN stopped boolean NOT NULL DEFAULT false;

-- The stop (threadline_stop_turn, storing what the run streamed: threadline_streamed_texts and
-- threadline_insert_answer, shared with threadline_store_answer, which now leaves a stopped turn
-- as it is) and the run's log writer that learns of a stop (threadline_append_run_events):
-- src/history/schema/functions/.
