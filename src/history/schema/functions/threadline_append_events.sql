-- Appends events ([{key, event, data}], in order) to a thread's log (thread_events, ids per thread
-- under thread_event_counters' row lock: migration 0011), skipping keys this run and attempt
-- already wrote. The thread's row is share-locked first (a concurrent delete waits or goes first,
-- never deadlocks with the counter), then the counter row, before looking for the keys, so two
-- writers of the same key cannot both miss the other. NOTIFY carries the thread and the last id
-- only: listeners re-read the table. Each row also keeps the Server-Sent Event its stream sends
-- (`frame`: threadline_event_frame) and the bytes of the thread's frames before it
-- (`frame_offset`, from the counter's frame_bytes: migration 0028). Returns the last id written
-- (NULL: nothing written, or the thread is gone).
CREATE OR REPLACE FUNCTION threadline_append_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_last bigint;
  v_bytes bigint;
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- The counter row exists after the thread's first event: created only when missing.
  SELECT c.last_id, c.frame_bytes INTO v_last, v_bytes FROM thread_event_counters c WHERE c.thread_id = p_thread_id FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO thread_event_counters (thread_id) VALUES (p_thread_id) ON CONFLICT (thread_id) DO NOTHING;
    SELECT c.last_id, c.frame_bytes INTO v_last, v_bytes FROM thread_event_counters c WHERE c.thread_id = p_thread_id FOR UPDATE;
  END IF;

  -- The new events get the ids after the counter's, in order; an event this run and attempt
  -- already wrote is skipped. This statement's snapshot is taken under the counter's lock: it sees
  -- every writer of the thread's events that went before.
  WITH written AS (
    INSERT INTO thread_events (thread_id, id, run_id, attempt, key, event, data, frame, frame_offset)
      SELECT p_thread_id, n.id, p_run_id, p_attempt, n.key, n.event, n.data, f.frame,
             v_bytes + coalesce(sum(coalesce(octet_length(f.frame), 0)) OVER (ORDER BY n.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
      FROM (
        SELECT v_last + row_number() OVER (ORDER BY e.ord) AS id, e.item ->> 'key' AS key, e.item ->> 'event' AS event, d.data
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(item, ord)
        CROSS JOIN LATERAL (SELECT coalesce(e.item -> 'data', '{}'::jsonb) AS data) d
        WHERE p_run_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM thread_events x WHERE x.run_id = p_run_id AND x.attempt = p_attempt AND x.key = e.item ->> 'key')
      ) n
      CROSS JOIN LATERAL (
        SELECT threadline_event_frame(n.event, n.id, n.data) AS frame
      ) f
      RETURNING coalesce(octet_length(frame), 0) AS bytes
  ), added AS (
    SELECT count(*)::integer AS count, coalesce(sum(w.bytes), 0) AS bytes FROM written w
  ), counted AS (
    -- The counter moves in the same statement (one executor run less per append); its row is
    -- locked above, so no other writer saw the old values meanwhile.
    UPDATE thread_event_counters c SET last_id = v_last + a.count, frame_bytes = v_bytes + a.bytes
      FROM added a WHERE c.thread_id = p_thread_id AND a.count > 0
  )
  SELECT a.count INTO v_count FROM added a;
  IF v_count = 0 THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify('threadline_events', p_thread_id::text || ' ' || (v_last + v_count)::text);
  RETURN v_last + v_count;
END
$$;
