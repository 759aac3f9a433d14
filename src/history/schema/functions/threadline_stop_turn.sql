-- POST /api/threads/:threadId/stop, in one statement under the thread's lock: run p_run_id's turn
-- on the user's thread, if still running, is recorded as stopped; what it streamed so far is
-- stored as its answer variant (one result, id p_result_id, one assistant text per inference
-- step), marked stopped; nothing is stored when nothing was streamed. The log gets turn.stopped
-- then stream.ended {status: stopped} in the same transaction. A turn no longer running (finished,
-- or stopped before) changes nothing: refusal 'not_running'. A tool call of the turn awaiting approval
-- is recorded denied by the stop (tool.approval.decided, before turn.stopped): the run's wait ends
-- with the run's cancellation, and no later decision can approve it.
CREATE OR REPLACE FUNCTION threadline_stop_turn(p_thread_id uuid, p_user_id text, p_run_id text, p_result_id uuid, p_agent_name text)
RETURNS TABLE (refusal text, message_id uuid, variant integer, stored integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_turn turns%ROWTYPE;
  v_message messages%ROWTYPE;
  v_texts jsonb;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  IF v_owner IS NULL THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::uuid, NULL::integer, NULL::integer; RETURN;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::uuid, NULL::integer, NULL::integer; RETURN;
  END IF;
  UPDATE turns t SET status = 'stopped', error = NULL, finished_at = now()
    WHERE t.run_id = p_run_id AND t.thread_id = p_thread_id AND t.status = 'running'
    RETURNING * INTO v_turn;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'not_running', NULL::uuid, NULL::integer, NULL::integer; RETURN;
  END IF;

  PERFORM threadline_record_decisions(ARRAY(
      SELECT a.id FROM tool_approvals a
      WHERE a.thread_id = p_thread_id AND a.message_id = v_turn.message_id AND a.status = 'pending'),
    p_run_id, 'denied', 'stop', 'the turn was stopped', NULL);

  SELECT * INTO v_message FROM messages m WHERE m.id = v_turn.message_id;
  v_texts := threadline_streamed_texts(p_thread_id, p_run_id);
  stored := 0;
  IF jsonb_array_length(v_texts) > 0 THEN
    stored := threadline_insert_answer(p_thread_id, v_turn.message_id, v_message.seq, v_message.on_path, v_turn.variant,
      v_turn.kind = 'regenerate',
      jsonb_build_array(jsonb_build_object('id', p_result_id, 'agentName', p_agent_name, 'content', jsonb_build_object(
        'output', (SELECT jsonb_agg(jsonb_build_object('type', 'text', 'role', 'assistant', 'content', x.text) ORDER BY x.ord)
                   FROM jsonb_array_elements(v_texts) WITH ORDINALITY AS x(text, ord)),
        'toolCalls', '[]'::jsonb))),
      true);
  END IF;
  PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(
    jsonb_build_object('key', 'turn.stopped', 'event', 'turn.stopped',
      'data', jsonb_build_object('runId', p_run_id, 'messageId', v_turn.message_id, 'variant', v_turn.variant, 'answerStored', stored > 0)),
    jsonb_build_object('key', 'stream.ended', 'event', 'stream.ended',
      'data', jsonb_build_object('scope', 'network', 'status', 'stopped', 'runId', p_run_id, 'messageId', v_turn.message_id, 'variant', v_turn.variant))));
  refusal := NULL;
  message_id := v_turn.message_id;
  variant := v_turn.variant;
  RETURN NEXT;
END
$$;
