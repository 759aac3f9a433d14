-- A turn's tool call needs approval: in one statement, records it pending (id p_id, expiring in
-- p_expires_seconds) and logs tool.approval.requested, unless a row under p_id exists already (a
-- replay, retry or rerun of the same call): then nothing is written and the recorded row is
-- returned, decided or not, so a decision is never asked for twice. The thread is share-locked
-- first, as every log writer does. Returns no row when run p_run_id has no turn.
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
  RETURN NEXT v_row;
END
$$;
