-- history.append-results, one statement (as threadline_begin_turn): stores a turn's answer
-- (threadline_insert_answer) and completes the turn. Under the thread's lock, the answer of a user
-- message still on the current path becomes its current answer (a regenerate also takes the later
-- turns off the path); the answer of a message that left the path meanwhile is stored off the path
-- and its turn marked superseded, so the path never holds an answer without its question. The
-- stream ends (stream.ended) in the transaction that stores the answer. It also reports whether
-- the run's threadline/turn.finished is wanted: by a later turn (later_unfinished, below), or by
-- title-thread (untitled: the thread has no title yet).
--
-- Except for a turn ended meanwhile by another hand, which stays as recorded: stopped by the user,
-- cancelled, or failed (presumed lost by a later turn, or its failure recorded). Its run may go on
-- (Inngest cancels between steps: a step already executing runs to its end), and its late answer
-- must not replace the stopped one, bring an answer to a turn whose log already ended it without
-- one, nor turn that ending into 'completed'. It stores nothing, logs nothing, and reports the
-- turn's status ('stopped', 'cancelled' or 'failed'), as threadline_append_run_events refuses
-- what such a run logs.
CREATE OR REPLACE FUNCTION threadline_store_answer(
  p_thread_id uuid, p_user_id text, p_run_id text, p_message_id uuid, p_message_seq bigint, p_variant integer,
  p_detach_later_turns boolean, p_results jsonb, p_context jsonb
) RETURNS TABLE (refusal text, inserted integer, status text, later_unfinished boolean, untitled boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_on_path boolean;
  v_ended text;
BEGIN
  SELECT t.user_id, t.title IS NULL INTO v_owner, untitled FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  IF v_owner IS NULL THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::integer, NULL::text, NULL::boolean, NULL::boolean; RETURN;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::integer, NULL::text, NULL::boolean, NULL::boolean; RETURN;
  END IF;
  -- The message by its key alone, its thread and kind checked in the select list: in the WHERE
  -- clause, kind = 'user' let the planner pick a scan of a partial index on user messages
  -- (messages_parent_idx) over the primary key while the table's statistics were young, reading
  -- every user message of the database (0.1 ms after a few hundred, growing with them).
  SELECT CASE WHEN m.thread_id = p_thread_id AND m.kind = 'user' THEN m.on_path END,
         (SELECT t.status FROM turns t WHERE t.run_id = p_run_id AND t.status IN ('stopped', 'cancelled', 'failed'))
    INTO v_on_path, v_ended
    FROM messages m WHERE m.id = p_message_id;
  IF v_on_path IS NULL THEN
    RETURN QUERY SELECT 'message_not_found', NULL::integer, NULL::text, NULL::boolean, NULL::boolean; RETURN;
  END IF;
  IF v_ended IS NOT NULL THEN
    RETURN QUERY SELECT NULL::text, 0, v_ended, NULL::boolean, NULL::boolean; RETURN;
  END IF;

  inserted := threadline_insert_answer(p_thread_id, p_message_id, p_message_seq, v_on_path, p_variant, p_detach_later_turns, p_results, false);
  status := CASE WHEN v_on_path THEN 'completed' ELSE 'superseded' END;
  UPDATE turns t SET status = threadline_store_answer.status, error = NULL, finished_at = now(),
    context = CASE WHEN p_context IS NULL THEN t.context ELSE coalesce(t.context, '{}'::jsonb) || p_context END
    WHERE t.run_id = p_run_id;
  -- The stream ends in the transaction that stores the answer: a reader that sees it finds the answer.
  PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(jsonb_build_object(
    'key', 'stream.ended', 'event', 'stream.ended',
    'data', jsonb_build_object('scope', 'network', 'status', status, 'runId', p_run_id, 'messageId', p_message_id, 'variant', p_variant))));
  -- later_unfinished: whether a turn that may wait for this one is unfinished (one on this message
  -- or a later one, a superset of those history.find-earlier-turn puts behind it). False lets the
  -- run skip its turn.finished when nothing else wants it (untitled: title-thread does). It is
  -- race-free because the thread's row lock is held: a turn that began before this statement is
  -- seen here, and one that begins after it sees this turn finished, in threadline_begin_turn
  -- (under the same lock) and in every lookup after, so it never waits for this run.
  later_unfinished := EXISTS (
    SELECT 1 FROM turns t JOIN messages m ON m.id = t.message_id
    WHERE t.thread_id = p_thread_id AND t.status = 'running' AND t.run_id <> p_run_id AND m.seq >= p_message_seq);
  refusal := NULL;
  RETURN NEXT;
END
$$;
