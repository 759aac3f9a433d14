-- Up Migration

-- A turn the user stopped (POST /api/threads/:threadId/stop): finished, its partial answer (if any)
-- stored and marked stopped. Unlike 'cancelled', the turn ended on the user's word with an answer.
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'superseded', 'cancelled', 'stopped'));

-- An answer cut short by a stop: what the model had streamed when the user stopped it.
ALTER TABLE messages ADD COLUMN stopped boolean NOT NULL DEFAULT false;

-- Stores an answer variant (results [{id, agentName, content}] with ids derived by the caller, so
-- storing twice inserts nothing): the current answer of a user message still on the path (a
-- regenerate also takes the later turns off it), else off the path. The caller holds the thread's
-- row lock. Shared by threadline_store_answer and threadline_stop_turn; returns the rows inserted.
CREATE FUNCTION threadline_insert_answer(
  p_thread_id uuid, p_message_id uuid, p_message_seq bigint, p_on_path boolean, p_variant integer,
  p_detach_later_turns boolean, p_results jsonb, p_stopped boolean
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer := jsonb_array_length(p_results);
  v_changed integer := 0;
  v_rows integer;
  v_first bigint;
  v_inserted integer;
BEGIN
  IF v_count = 0 OR EXISTS (SELECT 1 FROM messages m WHERE m.answers = p_message_id AND m.variant = p_variant) THEN
    RETURN 0;
  END IF;
  IF p_on_path THEN
    UPDATE messages m SET on_path = false WHERE m.answers = p_message_id AND m.on_path;
    GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
    IF p_detach_later_turns THEN
      UPDATE messages m SET on_path = false WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq > p_message_seq;
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
    END IF;
    -- A new answer to a message the summary covers changes what the summary stands for.
    DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= p_message_seq;
    GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
  END IF;
  UPDATE threads t SET last_seq = t.last_seq + v_count, path_version = t.path_version + CASE WHEN v_changed > 0 THEN 1 ELSE 0 END, updated_at = now()
    WHERE t.id = p_thread_id RETURNING t.last_seq - v_count + 1 INTO v_first;
  INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, stopped)
    SELECT (r.item ->> 'id')::uuid, p_thread_id, v_first + r.ord - 1, p_message_seq, 'agent', r.item ->> 'agentName',
           r.item -> 'content', p_message_id, p_variant, r.ord - 1, p_on_path, p_stopped
    FROM jsonb_array_elements(p_results) WITH ORDINALITY AS r(item, ord)
    ON CONFLICT (id) DO NOTHING;
  GET DIAGNOSTICS v_inserted = ROW_COUNT;
  RETURN v_inserted;
END
$$;

-- history.append-results, as in 0011, except for a turn the user stopped meanwhile: its run may go
-- on until Inngest's cancellation lands (a step already executing runs to its end), and its late
-- answer must not replace the stopped one nor end the stream a second time. It stores nothing and
-- reports 'stopped'.
CREATE OR REPLACE FUNCTION threadline_store_answer(
  p_thread_id uuid, p_user_id text, p_run_id text, p_message_id uuid, p_message_seq bigint, p_variant integer,
  p_detach_later_turns boolean, p_results jsonb, p_context jsonb
) RETURNS TABLE (refusal text, inserted integer, status text)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_on_path boolean;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  IF v_owner IS NULL THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::integer, NULL::text; RETURN;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::integer, NULL::text; RETURN;
  END IF;
  SELECT m.on_path INTO v_on_path FROM messages m WHERE m.id = p_message_id AND m.thread_id = p_thread_id AND m.kind = 'user';
  IF v_on_path IS NULL THEN
    RETURN QUERY SELECT 'message_not_found', NULL::integer, NULL::text; RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM turns t WHERE t.run_id = p_run_id AND t.status = 'stopped') THEN
    RETURN QUERY SELECT NULL::text, 0, 'stopped'; RETURN;
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
  refusal := NULL;
  RETURN NEXT;
END
$$;

-- The text a run streamed so far (text.delta rows of in-process inference, data {runId, stepId,
-- attempt, delta}), one string per inference step, in the order the steps started: per step only
-- its latest attempt counts, its deltas concatenated in id order. The same rule as streamedTexts
-- in src/stream/deltas.ts. Read through the log's (run_id, attempt, key) index.
CREATE FUNCTION threadline_streamed_texts(p_thread_id uuid, p_run_id text)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH deltas AS (
    SELECT e.id, e.data ->> 'stepId' AS step_id, (e.data ->> 'attempt')::numeric AS attempt, e.data ->> 'delta' AS delta
    FROM thread_events e
    WHERE e.run_id = p_run_id AND e.thread_id = p_thread_id AND e.event = 'text.delta'
      AND e.data ->> 'runId' = p_run_id
      AND jsonb_typeof(e.data -> 'stepId') = 'string' AND jsonb_typeof(e.data -> 'attempt') = 'number' AND jsonb_typeof(e.data -> 'delta') = 'string'
  ), steps AS (
    SELECT d.step_id, min(d.id) AS first_id, string_agg(d.delta, '' ORDER BY d.id) AS text
    FROM deltas d
    WHERE d.attempt = (SELECT max(l.attempt) FROM deltas l WHERE l.step_id = d.step_id)
    GROUP BY d.step_id
  )
  SELECT coalesce(jsonb_agg(to_jsonb(s.text) ORDER BY s.first_id), '[]'::jsonb) FROM steps s WHERE s.text <> ''
$$;

-- What a turn's run logs while it answers (in-process inference's text.delta batches, AgentKit's
-- chunks), as threadline_append_events, except for a run whose turn the user stopped: nothing more
-- is logged after its ending, and the writer learns it (stopped true), so streaming inference
-- stops calling the model. The thread's row is share-locked first: a stop holds it for update, so
-- a batch waits for the stop to commit and then sees the turn stopped; the partial answer holds
-- exactly the text logged before it.
CREATE FUNCTION threadline_append_run_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS TABLE (last_id bigint, stopped boolean)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  stopped := EXISTS (SELECT 1 FROM turns u WHERE u.run_id = p_run_id AND u.status = 'stopped');
  last_id := CASE WHEN NOT stopped THEN threadline_append_events(p_thread_id, p_run_id, p_attempt, p_events) END;
  RETURN NEXT;
END
$$;

-- POST /api/threads/:threadId/stop, in one statement under the thread's lock: run p_run_id's turn
-- on the user's thread, if still running, is recorded as stopped; what it streamed so far is
-- stored as its answer variant (one result, id p_result_id, one assistant text per inference
-- step), marked stopped; nothing is stored when nothing was streamed. The log gets turn.stopped
-- then stream.ended {status: stopped} in the same transaction. A turn no longer running (finished,
-- or stopped before) changes nothing: refusal 'not_running'.
CREATE FUNCTION threadline_stop_turn(p_thread_id uuid, p_user_id text, p_run_id text, p_result_id uuid, p_agent_name text)
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

-- Down Migration
DROP FUNCTION threadline_stop_turn(uuid, text, text, uuid, text);
DROP FUNCTION threadline_append_run_events(uuid, text, integer, jsonb);
DROP FUNCTION threadline_streamed_texts(uuid, text);
CREATE OR REPLACE FUNCTION threadline_store_answer(
  p_thread_id uuid, p_user_id text, p_run_id text, p_message_id uuid, p_message_seq bigint, p_variant integer,
  p_detach_later_turns boolean, p_results jsonb, p_context jsonb
) RETURNS TABLE (refusal text, inserted integer, status text)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_on_path boolean;
  v_count integer := jsonb_array_length(p_results);
  v_changed integer := 0;
  v_rows integer;
  v_first bigint;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  IF v_owner IS NULL THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::integer, NULL::text; RETURN;
  END IF;
  IF v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_owned', NULL::integer, NULL::text; RETURN;
  END IF;
  SELECT m.on_path INTO v_on_path FROM messages m WHERE m.id = p_message_id AND m.thread_id = p_thread_id AND m.kind = 'user';
  IF v_on_path IS NULL THEN
    RETURN QUERY SELECT 'message_not_found', NULL::integer, NULL::text; RETURN;
  END IF;

  inserted := 0;
  IF v_count > 0 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.answers = p_message_id AND m.variant = p_variant) THEN
    IF v_on_path THEN
      UPDATE messages m SET on_path = false WHERE m.answers = p_message_id AND m.on_path;
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
      IF p_detach_later_turns THEN
        UPDATE messages m SET on_path = false WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq > p_message_seq;
        GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
      END IF;
      -- A new answer to a message the summary covers changes what the summary stands for.
      DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= p_message_seq;
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
    END IF;
    UPDATE threads t SET last_seq = t.last_seq + v_count, path_version = t.path_version + CASE WHEN v_changed > 0 THEN 1 ELSE 0 END, updated_at = now()
      WHERE t.id = p_thread_id RETURNING t.last_seq - v_count + 1 INTO v_first;
    INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path)
      SELECT (r.item ->> 'id')::uuid, p_thread_id, v_first + r.ord - 1, p_message_seq, 'agent', r.item ->> 'agentName',
             r.item -> 'content', p_message_id, p_variant, r.ord - 1, v_on_path
      FROM jsonb_array_elements(p_results) WITH ORDINALITY AS r(item, ord)
      ON CONFLICT (id) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
  END IF;

  status := CASE WHEN v_on_path THEN 'completed' ELSE 'superseded' END;
  UPDATE turns t SET status = threadline_store_answer.status, error = NULL, finished_at = now(),
    context = CASE WHEN p_context IS NULL THEN t.context ELSE coalesce(t.context, '{}'::jsonb) || p_context END
    WHERE t.run_id = p_run_id;
  PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(jsonb_build_object(
    'key', 'stream.ended', 'event', 'stream.ended',
    'data', jsonb_build_object('scope', 'network', 'status', status, 'runId', p_run_id, 'messageId', p_message_id, 'variant', p_variant))));
  refusal := NULL;
  RETURN NEXT;
END
$$;
DROP FUNCTION threadline_insert_answer(uuid, uuid, bigint, boolean, integer, boolean, jsonb, boolean);
ALTER TABLE messages DROP COLUMN stopped;
UPDATE turns SET status = 'cancelled', error = 'stopped' WHERE status = 'stopped';
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'superseded', 'cancelled'));
