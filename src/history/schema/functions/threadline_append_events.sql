-- Appends events ([{key, event, data}], in order) to a thread's log (thread_events, ids per thread
-- under thread_event_counters' row lock: migration 0011), skipping keys this run and attempt
-- already wrote. The thread's row is share-locked first (a concurrent delete waits or goes first,
-- never deadlocks with the counter), then the counter row, before looking for the keys, so two
-- writers of the same key cannot both miss the other. NOTIFY carries the thread and the last id
-- only: listeners re-read the table. Each row also keeps its payload as the stream sends it
-- (threadline_event_text). Returns the last id written (NULL: nothing written, or the thread is
-- gone).
CREATE OR REPLACE FUNCTION threadline_append_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_last bigint;
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- The counter row exists after the thread's first event: created only when missing.
  SELECT c.last_id INTO v_last FROM thread_event_counters c WHERE c.thread_id = p_thread_id FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO thread_event_counters (thread_id) VALUES (p_thread_id) ON CONFLICT (thread_id) DO NOTHING;
    SELECT c.last_id INTO v_last FROM thread_event_counters c WHERE c.thread_id = p_thread_id FOR UPDATE;
  END IF;

  -- The new events get the ids after the counter's, in order; an event this run and attempt
  -- already wrote is skipped. This statement's snapshot is taken under the counter's lock: it sees
  -- every writer of the thread's events that went before.
  INSERT INTO thread_events (thread_id, id, run_id, attempt, key, event, data, data_text)
    SELECT p_thread_id, v_last + row_number() OVER (ORDER BY e.ord), p_run_id, p_attempt, e.item ->> 'key', e.item ->> 'event',
           d.data, threadline_event_text(d.data)
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(item, ord)
    CROSS JOIN LATERAL (SELECT coalesce(e.item -> 'data', '{}'::jsonb) AS data) d
    WHERE p_run_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM thread_events x WHERE x.run_id = p_run_id AND x.attempt = p_attempt AND x.key = e.item ->> 'key');
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count = 0 THEN
    RETURN NULL;
  END IF;
  UPDATE thread_event_counters c SET last_id = v_last + v_count WHERE c.thread_id = p_thread_id;
  PERFORM pg_notify('threadline_events', p_thread_id::text || ' ' || (v_last + v_count)::text);
  RETURN v_last + v_count;
END
$$;
