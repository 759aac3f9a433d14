-- Stores an answer variant (results [{id, agentName, content}] with ids derived by the caller, so
-- storing twice inserts nothing): the current answer of a user message still on the path (a
-- regenerate also takes the later turns off it), else off the path. The caller holds the thread's
-- row lock. Shared by threadline_store_answer and threadline_stop_turn; returns the rows inserted.
--
-- A regenerate takes off the path only the turns the thread held when it began
-- (regeneratedThroughSeq, recorded in its turn's context by threadline_begin_turn): a message sent
-- while it ran (under busy enqueue its turn waits for the regenerate and answers after its answer;
-- under interrupt it stopped it) stays on the path, the first such message now following this
-- answer. A regenerate begun before that was recorded takes every later turn off, as it did then.
CREATE OR REPLACE FUNCTION threadline_insert_answer(
  p_thread_id uuid, p_message_id uuid, p_message_seq bigint, p_on_path boolean, p_variant integer,
  p_detach_later_turns boolean, p_results jsonb, p_stopped boolean
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer := jsonb_array_length(p_results);
  v_changed integer := 0;
  v_rows integer;
  v_owner text;
  v_last bigint;
  v_inserted integer;
  v_through bigint;
  v_stored boolean;
  v_answered boolean;
  v_summarized boolean;
  v_waiting boolean;
BEGIN
  -- What the steps below depend on, read at once (each statement of a function costs its own
  -- executor start): the thread's owner and last seq (nothing below but the insert moves it), the
  -- message's answers, whether a summary covers it, and whether a message waits for its answer (a
  -- detach below may take such a message off the path first: the update then changes no row).
  SELECT t.user_id, t.last_seq, coalesce(a.stored, false), coalesce(a.answered, false),
         EXISTS (SELECT 1 FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= p_message_seq),
         EXISTS (SELECT 1 FROM messages m
                 WHERE m.parent_id = p_message_id AND m.kind = 'user' AND m.on_path AND m.parent_variant IS NULL)
    INTO v_owner, v_last, v_stored, v_answered, v_summarized, v_waiting
    FROM threads t, LATERAL (SELECT bool_or(m.variant = p_variant) AS stored, bool_or(m.on_path) AS answered
                             FROM messages m WHERE m.answers = p_message_id) a
    WHERE t.id = p_thread_id;
  IF v_count = 0 OR v_stored THEN
    RETURN 0;
  END IF;
  IF p_on_path THEN
    -- Updates of messages only where a row changes: each UPDATE statement fires messages_path_changed,
    -- even on no row (a first answer has no current one to replace, nor a message waiting for it).
    IF v_answered THEN
      UPDATE messages m SET on_path = false WHERE m.answers = p_message_id AND m.on_path;
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
    END IF;
    IF p_detach_later_turns THEN
      SELECT max((t.context ->> 'regeneratedThroughSeq')::bigint) INTO v_through FROM turns t
        WHERE t.message_id = p_message_id AND t.variant = p_variant AND t.kind = 'regenerate';
      UPDATE messages m SET on_path = false WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq > p_message_seq
        AND (v_through IS NULL OR m.turn_seq <= v_through);
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
      -- The first message sent since follows this answer: what it was sent after just left the path.
      UPDATE messages m SET parent_id = p_message_id, parent_variant = p_variant
        WHERE m.thread_id = p_thread_id AND m.on_path AND m.kind = 'user' AND m.turn_seq > v_through
          AND NOT EXISTS (SELECT 1 FROM messages p WHERE p.id = m.parent_id AND p.on_path AND p.turn_seq > v_through);
    END IF;
    -- A new answer to a message the summary covers changes what the summary stands for.
    IF v_summarized THEN
      DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= p_message_seq;
      GET DIAGNOSTICS v_rows = ROW_COUNT; v_changed := v_changed + v_rows;
    END IF;
    -- A message sent while this one had no answer yet follows this answer (the conversation tree).
    IF v_waiting THEN
      UPDATE messages m SET parent_variant = p_variant
        WHERE m.parent_id = p_message_id AND m.kind = 'user' AND m.on_path AND m.parent_variant IS NULL;
    END IF;
  END IF;
  -- The thread's one update comes after the insert, with the list values of the rows it inserted
  -- (threadline_messages_inserted.sql says why and skips the insert).
  PERFORM set_config('threadline.writer_thread', p_thread_id::text, true);
  INSERT INTO messages (id, thread_id, user_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, stopped)
    SELECT (r.item ->> 'id')::uuid, p_thread_id, v_owner, v_last + r.ord, p_message_seq, 'agent', r.item ->> 'agentName',
           r.item -> 'content', p_message_id, p_variant, r.ord - 1, p_on_path, p_stopped
    FROM jsonb_array_elements(p_results) WITH ORDINALITY AS r(item, ord)
    ON CONFLICT (id) DO NOTHING;
  GET DIAGNOSTICS v_inserted = ROW_COUNT;
  PERFORM set_config('threadline.writer_thread', '', true);
  UPDATE threads t SET last_seq = t.last_seq + v_count, path_version = t.path_version + CASE WHEN v_changed > 0 THEN 1 ELSE 0 END,
      updated_at = now(), message_count = t.message_count + CASE WHEN p_on_path THEN v_inserted ELSE 0 END,
      last_message_at = CASE WHEN v_inserted > 0 THEN greatest(t.last_message_at, now()) ELSE t.last_message_at END,
      last_activity_at = CASE WHEN v_inserted > 0 THEN greatest(t.last_activity_at, date_trunc('milliseconds', now())) ELSE t.last_activity_at END
    WHERE t.id = p_thread_id;
  RETURN v_inserted;
END
$$;
