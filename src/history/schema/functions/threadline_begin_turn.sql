-- history.append-user-message, one statement: checks the thread's owner (creating a new thread,
-- named after its first message, only once nothing refuses), stores the user message once under
-- the client's id, and records the run as a turn on it. Returns the stored text: the words the
-- model answers.
--
-- p_busy is the chat message's busy policy (src/history/busy.ts): 'reject' refuses a new message
-- while another turn of the thread is unfinished, before anything is written, raising SQLSTATE
-- TL409 with the unfinished turn's run and message ids as JSON in the DETAIL (the refusal names
-- the turn, which the result row has no columns for). A message already stored (a retried step, a
-- re-delivered event) is never refused: it was accepted. The other policies change nothing here.
--
-- The history steps that write (this one, threadline_store_answer, threadline_stop_turn) are one
-- statement each: a PL/pgSQL function is one round trip and one atomic statement, and, unlike a
-- data-modifying CTE, each of its queries sees what committed before the thread's row lock was
-- granted (READ COMMITTED takes a snapshot per query in a volatile function). Refusals are
-- returned, not raised, and are decided before any write.
CREATE OR REPLACE FUNCTION threadline_begin_turn(
  p_thread_id uuid, p_user_id text, p_message_id uuid, p_text text, p_client_timestamp timestamptz,
  p_run_id text, p_kind text, p_event_id text, p_context jsonb, p_busy text DEFAULT 'enqueue'
) RETURNS TABLE (refusal text, message_seq bigint, stored_text text, variant integer, status text, skip_reason text)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_message messages%ROWTYPE;
  v_turn turns%ROWTYPE;
  v_current integer;
  v_max integer;
  v_max_turn integer;
  v_earlier integer;
  v_busy record;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  SELECT * INTO v_message FROM messages m WHERE m.id = p_message_id;

  IF v_owner IS NULL THEN
    -- A chat message creates an unknown thread (AgentKit's createThread upserts: clients such as
    -- useAgent make thread ids themselves); a new thread without a given id is named after its
    -- first message, so a re-run of the event finds the same thread. A regenerate needs a thread.
    IF p_kind <> 'chat' THEN
      RETURN QUERY SELECT 'thread_not_found', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
    END IF;
    IF v_message.id IS NOT NULL THEN
      RETURN QUERY SELECT 'message_in_use', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
    END IF;
    -- A concurrent first run of the same message may create it first: then lock what it created.
    INSERT INTO threads (id, user_id) VALUES (p_thread_id, p_user_id) ON CONFLICT (id) DO NOTHING;
    SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
    SELECT * INTO v_message FROM messages m WHERE m.id = p_message_id;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
  END IF;

  IF v_message.id IS NOT NULL AND (v_message.thread_id <> p_thread_id OR v_message.kind <> 'user') THEN
    RETURN QUERY SELECT 'message_in_use', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
  END IF;
  -- A chat message re-sent under its id must carry the same words; a regenerate answers the stored ones.
  IF v_message.id IS NOT NULL AND p_kind = 'chat' AND v_message.content ->> 'text' IS DISTINCT FROM p_text THEN
    RETURN QUERY SELECT 'message_text_differs', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
  END IF;
  IF v_message.id IS NULL THEN
    IF p_kind = 'regenerate' THEN
      RETURN QUERY SELECT 'message_not_found', NULL::bigint, NULL::text, NULL::integer, NULL::text, NULL::text; RETURN;
    END IF;
    IF p_busy = 'reject' THEN
      SELECT t.run_id, t.message_id INTO v_busy FROM turns t JOIN messages m ON m.id = t.message_id
        WHERE t.thread_id = p_thread_id AND threadline_turn_unfinished(t.status)
        ORDER BY m.on_path DESC, m.seq, t.started_at, t.run_id LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'thread % is answering message %', p_thread_id, v_busy.message_id USING ERRCODE = 'TL409',
          DETAIL = jsonb_build_object('runId', v_busy.run_id, 'messageId', v_busy.message_id)::text;
      END IF;
    END IF;
    UPDATE threads t SET last_seq = t.last_seq + 1, updated_at = now() WHERE t.id = p_thread_id
      RETURNING t.last_seq INTO v_message.seq;
    INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, client_timestamp)
      VALUES (p_message_id, p_thread_id, v_message.seq, v_message.seq, 'user', 'user', jsonb_build_object('text', p_text), p_client_timestamp)
      RETURNING * INTO v_message;
  END IF;

  -- The same run asking again (a retried step) gets the same answer back.
  SELECT * INTO v_turn FROM turns t WHERE t.run_id = p_run_id;
  IF FOUND THEN
    RETURN QUERY SELECT NULL::text, v_message.seq, v_message.content ->> 'text', v_turn.variant,
      CASE WHEN v_turn.status = 'skipped' THEN 'skipped' ELSE 'running' END,
      CASE WHEN v_turn.status = 'skipped' THEN 'already recorded as skipped' END;
    RETURN;
  END IF;

  -- Which variant the run writes, or why it writes nothing:
  -- - a chat turn answers a message once; running its event again (a re-run) is a recorded no-op,
  --   and two chat runs on an unanswered message share the first variant (the first to store wins);
  -- - a regenerate writes a new variant, past any variant a running or completed turn holds, so two
  --   regenerates started together each keep their answer; running the same regenerate event again
  --   reuses its variant (a failed turn stored nothing, so its number may be used again).
  SELECT max(m.variant) FILTER (WHERE m.on_path), coalesce(max(m.variant), 0) INTO v_current, v_max
    FROM messages m WHERE m.answers = p_message_id;
  variant := NULL;
  skip_reason := NULL;
  IF NOT v_message.on_path THEN
    variant := v_max; status := 'skipped'; skip_reason := 'the message is no longer on the thread''s current path';
  ELSIF p_kind = 'chat' THEN
    IF v_current IS NOT NULL THEN
      variant := v_current; status := 'skipped'; skip_reason := 'the message already has an answer: regenerate it for a new one';
    ELSE
      variant := v_max + 1; status := 'running';
    END IF;
  ELSE
    SELECT t.variant INTO v_earlier FROM turns t
      WHERE p_event_id IS NOT NULL AND t.event_id = p_event_id AND t.message_id = p_message_id
      ORDER BY t.started_at LIMIT 1;
    IF v_earlier IS NULL THEN
      SELECT coalesce(max(t.variant), 0) INTO v_max_turn FROM turns t
        WHERE t.message_id = p_message_id AND t.status IN ('running', 'completed');
      variant := greatest(v_max, v_max_turn) + 1; status := 'running';
    ELSIF EXISTS (SELECT 1 FROM messages m WHERE m.answers = p_message_id AND m.variant = v_earlier) THEN
      variant := v_earlier; status := 'skipped'; skip_reason := 'this regenerate event already produced its answer';
    ELSE
      variant := v_earlier; status := 'running';
    END IF;
  END IF;

  INSERT INTO turns (run_id, thread_id, message_id, kind, event_id, variant, status, context, finished_at)
    VALUES (p_run_id, p_thread_id, p_message_id, p_kind, p_event_id, variant, status, p_context,
            CASE WHEN status = 'running' THEN NULL ELSE now() END);
  refusal := NULL;
  message_seq := v_message.seq;
  stored_text := v_message.content ->> 'text';
  RETURN NEXT;
END
$$;
