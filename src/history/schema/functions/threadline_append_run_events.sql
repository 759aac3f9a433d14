-- What a turn's run logs while it answers (in-process inference's text.delta batches, AgentKit's
-- chunks), as threadline_append_events, refused once its turn has ended by any recorder's hand —
-- stopped by the user, cancelled, or failed: an inference step of a cancelled run that is still
-- executing (Inngest cancels between steps) would otherwise log text after the turn's
-- stream.ended, and a reader would show an answer that never ends. A completed, superseded or
-- skipped turn is not refused: the run itself wrote that ending. The writer learns it (ended true)
-- and stops calling the model. The thread's row is share-locked first: a stop holds it for update,
-- so a batch waits for the stop to commit and then sees the turn stopped; the partial answer holds
-- exactly the text logged before it. A cancellation or failure share-locks the thread too, so the
-- batch reads the turn's row share-locked: an ending that updated it first is seen, one that comes
-- after waits for the batch, and no batch is logged after the ending's stream.ended.
CREATE OR REPLACE FUNCTION threadline_append_run_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS TABLE (last_id bigint, ended boolean)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  SELECT coalesce(bool_or(u.status IN ('stopped', 'cancelled', 'failed')), false) INTO ended
    FROM (SELECT t.status FROM turns t WHERE t.run_id = p_run_id FOR SHARE) u;
  last_id := CASE WHEN NOT ended THEN threadline_append_events(p_thread_id, p_run_id, p_attempt, p_events) END;
  RETURN NEXT;
END
$$;
