-- Up Migration

-- A per-thread log of what a client shows while a turn runs (AgentKit's streaming chunks, and
-- Threadline's own turn endings), read by GET /api/threads/:threadId/events.
--
-- Ids are per thread and assigned under a per-thread counter row lock, so they commit in id order:
-- the next writer of a thread waits for the counter until the earlier one commits. A reader that
-- has seen id k can never later find a committed row with an id below k (which a global sequence,
-- allocated before commit, would allow), so "everything after k" is a complete resume point.
CREATE TABLE thread_event_counters (
  thread_id uuid PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
  last_id bigint NOT NULL DEFAULT 0
);

-- (run_id, attempt, key) makes writing idempotent: a retried step or a re-entered function writes
-- the same keys again and inserts nothing. key: AgentKit's chunk id (publish-<sequence>:<event>) or
-- the name of a turn's ending; attempt: 0 for everything written so far (per-attempt model deltas
-- come later). run_id is NULL for events outside a run (never deduplicated).
CREATE TABLE thread_events (
  thread_id uuid NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  id bigint NOT NULL,
  run_id text,
  attempt integer NOT NULL DEFAULT 0,
  key text NOT NULL,
  event text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, id),
  UNIQUE (run_id, attempt, key)
);

-- Pruning by age reads the oldest rows first.
CREATE INDEX thread_events_created_idx ON thread_events (created_at);

-- Appends events ([{key, event, data}], in order) to a thread's log, skipping keys this run and
-- attempt already wrote. The thread's row is share-locked first (a concurrent delete waits or
-- goes first, never deadlocks with the counter), then the counter row, before looking for the
-- keys, so two writers of the same key cannot both miss the other. NOTIFY carries the thread and
-- the last id only: listeners re-read the table. Returns the last id written (NULL: nothing
-- written, or the thread is gone).
CREATE FUNCTION threadline_append_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_new jsonb;
  v_count integer;
  v_first bigint;
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO thread_event_counters (thread_id) VALUES (p_thread_id) ON CONFLICT (thread_id) DO NOTHING;
  PERFORM 1 FROM thread_event_counters c WHERE c.thread_id = p_thread_id FOR UPDATE;

  SELECT coalesce(jsonb_agg(e.item ORDER BY e.ord), '[]'::jsonb) INTO v_new
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(item, ord)
    WHERE p_run_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM thread_events x WHERE x.run_id = p_run_id AND x.attempt = p_attempt AND x.key = e.item ->> 'key');
  v_count := jsonb_array_length(v_new);
  IF v_count = 0 THEN
    RETURN NULL;
  END IF;

  UPDATE thread_event_counters c SET last_id = c.last_id + v_count WHERE c.thread_id = p_thread_id
    RETURNING c.last_id - v_count INTO v_first;
  INSERT INTO thread_events (thread_id, id, run_id, attempt, key, event, data)
    SELECT p_thread_id, v_first + e.ord, p_run_id, p_attempt, e.item ->> 'key', e.item ->> 'event', coalesce(e.item -> 'data', '{}'::jsonb)
    FROM jsonb_array_elements(v_new) WITH ORDINALITY AS e(item, ord);
  PERFORM pg_notify('threadline_events', p_thread_id::text || ' ' || (v_first + v_count)::text);
  RETURN v_first + v_count;
END
$$;

-- history.append-results, as in 0006, and also writes stream.ended in the same transaction.
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
  -- The stream ends in the transaction that stores the answer: a reader that sees it finds the answer.
  PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(jsonb_build_object(
    'key', 'stream.ended', 'event', 'stream.ended',
    'data', jsonb_build_object('scope', 'network', 'status', status, 'runId', p_run_id, 'messageId', p_message_id, 'variant', p_variant))));
  refusal := NULL;
  RETURN NEXT;
END
$$;

-- Down Migration
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
  refusal := NULL;
  RETURN NEXT;
END
$$;
DROP FUNCTION threadline_append_events(uuid, text, integer, jsonb);
DROP TABLE thread_events;
DROP TABLE thread_event_counters;
