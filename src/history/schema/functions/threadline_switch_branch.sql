-- PUT /api/threads/:threadId/messages/:messageId/current, one statement under the thread's lock:
-- makes the branch through p_message_id (a user message, or an answer: that variant) the thread's
-- current path. The path runs from the thread's first message down the parent pointers to the
-- message (each ancestor with the answer variant its child followed), then on below it: at each
-- user message its answer variant on the path, else its latest; then the child that follows that
-- variant on the path, else the latest one. Rows leave and join the path in two updates (the
-- one-current-answer index is checked row by row); the path version is bumped, a summary that
-- reaches a changed turn is dropped (no summary covers a turn off the path), and the log says
-- thread.path.changed, in the same transaction.
-- Refused, changing nothing: an unknown or another user's thread, a message not of the thread,
-- a turn still running on the thread ('thread_busy', naming its run).
CREATE OR REPLACE FUNCTION threadline_switch_branch(p_thread_id uuid, p_user_id text, p_message_id uuid)
RETURNS TABLE (refusal text, running_run_id text, running_message_id uuid, changed integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_target messages%ROWTYPE;
  v_users uuid[];
  v_variants integer[];
  v_cur uuid;
  v_var integer;
  v_next uuid;
  v_off integer;
  v_on integer;
  v_off_seq bigint;
  v_on_seq bigint;
  v_version bigint;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  IF v_owner IS NULL THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::text, NULL::uuid, NULL::integer; RETURN;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::text, NULL::uuid, NULL::integer; RETURN;
  END IF;
  SELECT * INTO v_target FROM messages m WHERE m.id = p_message_id AND m.thread_id = p_thread_id AND m.kind IN ('user', 'agent');
  IF v_target.id IS NULL THEN
    RETURN QUERY SELECT 'message_not_found', NULL::text, NULL::uuid, NULL::integer; RETURN;
  END IF;
  -- The unfinished turn the thread is answering (busy-sql.ts selectBusyTurn's predicate and order).
  SELECT t.run_id, t.message_id INTO running_run_id, running_message_id FROM turns t JOIN messages m ON m.id = t.message_id
    WHERE t.thread_id = p_thread_id AND threadline_turn_unfinished(t.status)
    ORDER BY m.on_path DESC, m.seq, t.started_at, t.run_id LIMIT 1;
  IF running_run_id IS NOT NULL THEN
    RETURN QUERY SELECT 'thread_busy', running_run_id, running_message_id, NULL::integer; RETURN;
  END IF;

  -- The ancestors, each with the variant its child followed (unknown: its latest).
  IF v_target.kind = 'agent' THEN
    v_cur := v_target.answers; v_var := v_target.variant;
  ELSE
    v_cur := v_target.id; v_var := NULL;
  END IF;
  WITH RECURSIVE up AS (
    SELECT m.parent_id AS id, m.parent_variant AS variant FROM messages m WHERE m.id = v_cur
    UNION ALL
    SELECT m.parent_id, m.parent_variant FROM up JOIN messages m ON m.id = up.id
  )
  SELECT coalesce(array_agg(up.id), '{}'),
         coalesce(array_agg(coalesce(up.variant, (SELECT max(a.variant) FROM messages a WHERE a.answers = up.id))), '{}')
    INTO v_users, v_variants
    FROM up WHERE up.id IS NOT NULL;

  -- The message and below it.
  LOOP
    IF v_var IS NULL THEN
      SELECT coalesce(max(a.variant) FILTER (WHERE a.on_path), max(a.variant)) INTO v_var FROM messages a WHERE a.answers = v_cur;
    END IF;
    v_users := v_users || v_cur;
    v_variants := v_variants || v_var;
    SELECT m.id INTO v_next FROM messages m
      WHERE m.parent_id = v_cur AND m.kind = 'user' AND (m.parent_variant IS NULL OR m.parent_variant IS NOT DISTINCT FROM v_var)
      ORDER BY m.on_path DESC, m.seq DESC LIMIT 1;
    EXIT WHEN v_next IS NULL;
    v_cur := v_next;
    v_var := NULL;
  END LOOP;

  -- Membership by hashed subplans (a thread's whole path is compared, not row by row against the arrays).
  WITH off AS (
    UPDATE messages m SET on_path = false
    WHERE m.thread_id = p_thread_id AND m.on_path AND m.kind IN ('user', 'agent')
      AND NOT CASE WHEN m.kind = 'user' THEN m.id IN (SELECT p.u FROM unnest(v_users) AS p(u))
                   ELSE (m.answers, m.variant) IN (SELECT p.u, p.v FROM unnest(v_users, v_variants) AS p(u, v) WHERE p.v IS NOT NULL) END
    RETURNING m.turn_seq
  ) SELECT count(*), min(off.turn_seq) INTO v_off, v_off_seq FROM off;
  WITH joined AS (
    UPDATE messages m SET on_path = true
    WHERE m.thread_id = p_thread_id AND NOT m.on_path AND m.kind IN ('user', 'agent')
      AND CASE WHEN m.kind = 'user' THEN m.id IN (SELECT p.u FROM unnest(v_users) AS p(u))
               ELSE (m.answers, m.variant) IN (SELECT p.u, p.v FROM unnest(v_users, v_variants) AS p(u, v) WHERE p.v IS NOT NULL) END
    RETURNING m.turn_seq
  ) SELECT count(*), min(joined.turn_seq) INTO v_on, v_on_seq FROM joined;

  IF v_off + v_on > 0 THEN
    DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id
      AND s.covers_through_turn_seq >= least(coalesce(v_off_seq, v_on_seq), coalesce(v_on_seq, v_off_seq));
    UPDATE threads t SET path_version = t.path_version + 1, updated_at = now() WHERE t.id = p_thread_id
      RETURNING t.path_version INTO v_version;
    PERFORM threadline_append_events(p_thread_id, NULL, 0, jsonb_build_array(jsonb_build_object(
      'key', 'thread.path.changed', 'event', 'thread.path.changed',
      'data', jsonb_build_object('messageId', p_message_id, 'pathVersion', v_version))));
  END IF;
  refusal := NULL;
  running_run_id := NULL;
  running_message_id := NULL;
  changed := v_off + v_on;
  RETURN NEXT;
END
$$;
