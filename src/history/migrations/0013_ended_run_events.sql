-- Up Migration

-- What a run logs while it answers is refused once its turn has ended by any recorder's hand —
-- stopped by the user, cancelled, or failed — not only once stopped: an inference step of a
-- cancelled run that is still executing (Inngest cancels between steps) would otherwise log text
-- after the turn's stream.ended, and a reader would show an answer that never ends. A completed,
-- superseded or skipped turn is not refused: the run itself wrote that ending. The writer learns
-- it (ended true) and stops calling the model.
--
-- Its result column changes name (stopped -> ended), which CREATE OR REPLACE cannot do: dropped and
-- created again here, in one transaction, so the function is never missing for an instance still
-- running. A database migrated from scratch never had the old one (IF EXISTS). Current body:
-- src/history/schema/functions/threadline_append_run_events.sql.
DROP FUNCTION IF EXISTS threadline_append_run_events(uuid, text, integer, jsonb);
CREATE FUNCTION threadline_append_run_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS TABLE (last_id bigint, ended boolean)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  ended := EXISTS (SELECT 1 FROM turns u WHERE u.run_id = p_run_id AND u.status IN ('stopped', 'cancelled', 'failed'));
  last_id := CASE WHEN NOT ended THEN threadline_append_events(p_thread_id, p_run_id, p_attempt, p_events) END;
  RETURN NEXT;
END
$$;

-- threadline_streamed_texts now ignores a step whose text is whitespace alone (a stop during
-- whitespace stores no answer made of it): src/history/schema/functions/.
