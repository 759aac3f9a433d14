-- The text a run streamed so far (text.delta rows of in-process inference, data {runId, stepId,
-- attempt, delta}), one string per inference step, in the order the steps started: per step only
-- its latest attempt counts, its deltas concatenated in id order. The same rule as streamedTexts
-- in src/stream/deltas.ts. Read through the log's (run_id, attempt, key) index. A step whose text
-- is whitespace alone counts as nothing: a stop during whitespace stores no answer made of it
-- (some providers refuse an assistant message without text, which would break every later turn of
-- the thread).
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
