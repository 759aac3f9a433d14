-- Up Migration

-- What a run logs while it answers is refused once its turn has ended by any recorder's hand —
-- stopped by the user, cancelled, or failed — not only once stopped: an inference step of a
-- cancelled run that is still executing (Inngest cancels between steps) would otherwise log text
-- after the turn's stream.ended, and a reader would show an answer that never ends. A completed,
-- superseded or skipped turn is not refused: the run itself wrote that ending. The writer learns
-- it (ended true) and stops calling the model.
DROP FUNCTION threadline_append_run_events(uuid, text, integer, jsonb);
CREATE FUNCTION threadline_append_run_events(p_thread_id uuid, p_run_id text, p_attempt integer, p_events jsonb)
RETURNS TABLE (last_id bigint, ended boolean)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  ended := EXISTS (SELECT 1 FROM turns u WHERE u.run_id = p_run_id AND u.status IN ('stopped', 'cancelled', 'failed'));
  last_id := CASE WHEN NOT ended THEN threadline_append_events(p_thread_id, p_run_id, p_attempt, p_events) END;
  RETURN NEXT;
END
$$;

-- A stop during whitespace stores no answer made of whitespace alone (some providers refuse an
-- assistant message without text, which would break every later turn of the thread).
CREATE OR REPLACE FUNCTION threadline_streamed_texts(p_thread_id uuid, p_run_id text)
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
  SELECT coalesce(jsonb_agg(to_jsonb(s.text) ORDER BY s.first_id), '[]'::jsonb) FROM steps s WHERE s.text ~ '\S'
$$;

-- Down Migration
CREATE OR REPLACE FUNCTION threadline_streamed_texts(p_thread_id uuid, p_run_id text)
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
DROP FUNCTION threadline_append_run_events(uuid, text, integer, jsonb);
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
