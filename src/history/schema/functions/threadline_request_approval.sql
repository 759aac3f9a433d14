-- A turn's tool call needs approval: in one statement, records it pending (id p_id, expiring in
-- p_expires_seconds) and logs tool.approval.requested, unless a row under p_id exists already (a
-- replay, retry or rerun of the same call): then nothing is written and the recorded row is
-- returned, decided or not, so a decision is never asked for twice. The thread is share-locked
-- first, as every log writer does. Returns no row when run p_run_id has no turn.
--
-- A turn already ended by another hand (its run's step was executing when it was stopped,
-- cancelled or failed) gets the call recorded denied at once, as that ending denies a pending one
-- (threadline_stop_turn; threadline_turn_ended_approvals, which spares it while another run of the
-- message runs, as a re-run of the event asks under the same id): nothing stays pending for a turn
-- that can no longer run the call. The turn's row is share-locked after the thread, in the order
-- the endings take them, so an ending that comes after the read waits for the insert and denies it.
CREATE OR REPLACE FUNCTION threadline_request_approval(p_id uuid, p_run_id text, p_tool_call_id text, p_tool_name text,
  p_arguments jsonb, p_expires_seconds integer)
RETURNS SETOF tool_approvals
LANGUAGE plpgsql AS $$
DECLARE
  v_turn turns%ROWTYPE;
  v_row tool_approvals%ROWTYPE;
BEGIN
  SELECT * INTO v_turn FROM turns t WHERE t.run_id = p_run_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  PERFORM 1 FROM threads t WHERE t.id = v_turn.thread_id FOR KEY SHARE;
  SELECT * INTO v_turn FROM turns t WHERE t.run_id = p_run_id FOR SHARE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  INSERT INTO tool_approvals (id, thread_id, run_id, message_id, tool_call_id, tool_name, arguments, expires_at)
    VALUES (p_id, v_turn.thread_id, p_run_id, v_turn.message_id, p_tool_call_id, p_tool_name, p_arguments,
      now() + make_interval(secs => p_expires_seconds))
    ON CONFLICT (id) DO NOTHING
    RETURNING * INTO v_row;
  IF NOT FOUND THEN
    RETURN QUERY SELECT * FROM tool_approvals a WHERE a.id = p_id;
    RETURN;
  END IF;
  PERFORM threadline_append_events(v_row.thread_id, p_run_id, 0, jsonb_build_array(jsonb_build_object(
    'key', 'tool.approval.requested.' || p_id, 'event', 'tool.approval.requested',
    'data', threadline_approval_event(v_row))));
  IF v_turn.status = 'stopped' OR (v_turn.status IN ('cancelled', 'failed') AND NOT EXISTS (
      SELECT 1 FROM turns r WHERE r.message_id = v_turn.message_id AND r.status = 'running' AND r.run_id <> p_run_id)) THEN
    SELECT * INTO v_row FROM threadline_record_decisions(ARRAY[p_id], p_run_id, 'denied',
      CASE WHEN v_turn.status = 'stopped' THEN 'stop' ELSE 'turn-ended' END,
      'the turn ' || CASE v_turn.status WHEN 'stopped' THEN 'was stopped' WHEN 'cancelled' THEN 'was cancelled' ELSE 'failed' END,
      NULL);
  END IF;
  RETURN NEXT v_row;
END
$$;
