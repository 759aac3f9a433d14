-- Records a failed attempt of run p_run_id's turn (turns.retrying) and logs turn.retrying (under
-- p_key, once per failed attempt) in one statement; nothing once the turn has ended (completed,
-- failed, stopped…). The thread is locked before the turn row, in the order the stop and the
-- answer take them. Returns the event's id, or NULL when nothing was written.
CREATE OR REPLACE FUNCTION threadline_turn_retrying(p_run_id text, p_key text, p_retry jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_thread uuid;
BEGIN
  SELECT t.thread_id INTO v_thread FROM turns t WHERE t.run_id = p_run_id;
  IF v_thread IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM 1 FROM threads t WHERE t.id = v_thread FOR KEY SHARE;
  UPDATE turns SET retrying = p_retry WHERE run_id = p_run_id AND status = 'running';
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN threadline_append_events(v_thread, p_run_id, 0,
    jsonb_build_array(jsonb_build_object('key', p_key, 'event', 'turn.retrying', 'data', p_retry)));
END
$$;
