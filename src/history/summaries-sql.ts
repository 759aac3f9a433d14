import type { HistoryRow } from "./messages.js";

/** The statements of summaries.ts, each with the row type it returns: what a summarizer reads and the summary's write. */

/**
 * What a summarizer reads, in one statement: the thread's owner and path version, the current
 * summary, and the oldest $3 current-path messages after what the summary covers and before the
 * window ($2), whole turns only: a turn is summarized with its answer or not at all.
 * No row: the thread does not exist.
 */
export const selectSummarySource = `
  WITH summary AS (
    SELECT covers_through_turn_seq, text FROM thread_summaries WHERE thread_id = $1
  ), batch AS (
    SELECT turn_seq, seq, kind, agent_name, content FROM messages
    WHERE thread_id = $1 AND on_path AND turn_seq > coalesce((SELECT covers_through_turn_seq FROM summary), 0) AND turn_seq < $2
    ORDER BY turn_seq, seq
    LIMIT $3
  ), whole_turns AS (
    SELECT turn_seq, seq, kind, agent_name, content FROM batch
    WHERE turn_seq < (SELECT CASE WHEN count(*) < $3 THEN $2 ELSE max(turn_seq) END FROM batch)
       OR turn_seq = (SELECT min(turn_seq) FROM batch)
  )
  SELECT t.user_id, t.path_version, s.covers_through_turn_seq, s.text,
    (SELECT coalesce(jsonb_agg(jsonb_build_object('turnSeq', b.turn_seq, 'kind', b.kind, 'agentName', b.agent_name, 'content', b.content)
       ORDER BY b.turn_seq, b.seq), '[]'::jsonb) FROM whole_turns b) AS messages
  FROM threads t LEFT JOIN summary s ON true
  WHERE t.id = $1`;
/** One message of a summary source, as selectSummarySource aggregates it. */
export type SummarySourceMessage = { turnSeq: number; kind: HistoryRow["kind"]; agentName: string; content: unknown };
export type SelectSummarySourceRow = {
  user_id: string;
  path_version: string;
  covers_through_turn_seq: string | null;
  text: string | null;
  messages: SummarySourceMessage[];
};

/**
 * Stores a summary built on the previous one's extent ($4; NULL: the thread's first summary),
 * only if the thread's path version is still the one the summarizer read ($5): a detach since
 * then (a regenerate) may have taken turns it covers off the path. The thread row is share-locked,
 * so a detach waits for this statement or this statement sees the detach. Another summarizer that
 * extended (or created) the summary first wins. Returns how many summaries were stored (0 or 1).
 */
export const storeSummary = `
  WITH thread AS (
    SELECT id FROM threads WHERE id = $1 AND path_version = $5::bigint FOR SHARE
  ), updated AS (
    UPDATE thread_summaries SET covers_through_turn_seq = $2, text = $3, updated_at = now()
    WHERE thread_id = (SELECT id FROM thread) AND covers_through_turn_seq = $4::bigint
    RETURNING 1
  ), inserted AS (
    INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text)
    SELECT id, $2, $3 FROM thread WHERE $4::bigint IS NULL
    ON CONFLICT (thread_id) DO NOTHING
    RETURNING 1
  )
  SELECT ((SELECT count(*) FROM updated) + (SELECT count(*) FROM inserted))::int AS stored`;
export type StoreSummaryRow = { stored: number };
