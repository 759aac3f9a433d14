-- A turn's history window (store-sql.ts selectHistoryWindow says what it reads and why it is
-- written so), in one place for its two callers: history.get, and threadline_begin_turn, which
-- reads it for a turn with no unfinished turn ahead, under the thread's lock, so that turn needs no
-- history.get step. $1 the thread, $2 the seq of the user message the turn answers, $3 how many
-- earlier user messages (NULL: no limit), $4 also the system and summary rows older than the
-- window, $5 where counting unsummarized messages stops. No row: the thread does not exist.
-- SQL, not volatile: the planner inlines it into the calling query, which plans it as before.
CREATE OR REPLACE FUNCTION threadline_history_window(
  p_thread_id uuid, p_before_seq bigint, p_earlier_users bigint, p_preserve_system boolean, p_count_limit integer
) RETURNS TABLE (
  user_id text, rows json, window_start bigint, covers_through_turn_seq bigint, summary_text text,
  summary_updated_at timestamptz, unsummarized integer
)
LANGUAGE sql STABLE AS $$
  WITH window_start AS (
    -- No limit: the window is the whole thread, including rows before its first user message.
    SELECT CASE WHEN p_earlier_users IS NULL THEN 0 ELSE coalesce(min(seq), p_before_seq) END AS turn_seq FROM (
      SELECT seq FROM messages
      WHERE thread_id = p_thread_id AND on_path AND kind = 'user' AND seq < p_before_seq
      ORDER BY seq DESC
      LIMIT p_earlier_users
    ) last_users
  ), window_rows AS (
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq < p_before_seq
      AND m.turn_seq >= (SELECT turn_seq FROM window_start)
    UNION ALL
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE p_preserve_system AND m.thread_id = p_thread_id AND m.on_path AND m.kind IN ('system', 'summary')
      AND m.turn_seq < (SELECT turn_seq FROM window_start)
  )
  SELECT t.user_id, w.rows, w.turn_seq,
    s.covers_through_turn_seq, s.text, s.updated_at,
    (SELECT count(*)::int FROM (
       SELECT 1 FROM messages m
       WHERE m.thread_id = p_thread_id AND m.on_path
         AND m.turn_seq > coalesce(s.covers_through_turn_seq, 0) AND m.turn_seq < w.turn_seq
       LIMIT p_count_limit
     ) unsummarized)
  FROM threads t
  CROSS JOIN (
    SELECT coalesce(json_agg(r ORDER BY m.turn_seq, m.seq), '[]'::json) AS rows,
      -- Where the window's turns begin: its oldest user message or answer, else the current message.
      coalesce(min(m.turn_seq) FILTER (WHERE m.kind IN ('user', 'agent')), p_before_seq) AS turn_seq
    FROM window_rows m
    CROSS JOIN LATERAL (
      SELECT m.id, m.kind, m.agent_name AS "agentName", m.content,
        floor(extract(epoch FROM m.created_at) * 1000)::bigint AS "createdAt"
    ) r
  ) w
  LEFT JOIN thread_summaries s ON s.thread_id = t.id
  WHERE t.id = p_thread_id
$$;
