import type { ApprovalRow } from "./approvals-sql.js";
import type { UserMemoryRow } from "./memories-sql.js";

/**
 * Statements of the subject-access export (export.ts), each one keyset batch of one thread or user,
 * with the row type it returns; and the import's writes (import.ts).
 */

/** Every batch of an export reads this one snapshot. */
export const beginSnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/** Every message of thread $1 after seq $2, $3 of them (messages_thread_seq_key). */
export const selectThreadMessages = `
  SELECT id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, stopped, client_timestamp, created_at,
         parent_id, parent_variant
  FROM messages WHERE thread_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT $3`;
export type SelectThreadMessagesRow = {
  id: string;
  seq: string;
  turn_seq: string;
  kind: "user" | "agent" | "system" | "summary";
  agent_name: string;
  content: unknown;
  answers: string | null;
  variant: number | null;
  position: number | null;
  on_path: boolean;
  stopped: boolean;
  client_timestamp: Date | null;
  created_at: Date;
  parent_id: string | null;
  parent_variant: number | null;
};

/**
 * Turns of thread $1 after (started_at, run_id) ($2, $3), $4 of them (turns_thread_idx). The
 * cursor's time is PostgreSQL's own text (microseconds; a JavaScript Date keeps milliseconds).
 */
export const selectThreadTurns = `
  SELECT run_id, message_id, kind, variant, status, error, event_id, context, started_at, finished_at, started_at::text AS cursor_at
  FROM turns WHERE thread_id = $1 AND (started_at, run_id) > ($2::timestamptz, $3::text) ORDER BY started_at, run_id LIMIT $4`;
export type SelectThreadTurnsRow = {
  run_id: string;
  message_id: string;
  kind: "chat" | "regenerate";
  variant: number;
  status: string;
  error: string | null;
  event_id: string | null;
  context: unknown;
  started_at: Date;
  finished_at: Date | null;
  cursor_at: string;
};

/** How far thread $1's event ids went (thread_event_counters; no row: no event yet). */
export const selectThreadEventCounter = `SELECT last_id FROM thread_event_counters WHERE thread_id = $1`;
export type SelectThreadEventCounterRow = { last_id: string };

export const selectThreadSummary = `SELECT covers_through_turn_seq, text, created_at, updated_at FROM thread_summaries WHERE thread_id = $1`;
export type SelectThreadSummaryRow = {
  covers_through_turn_seq: string;
  text: string;
  created_at: Date;
  updated_at: Date;
};

export const selectThreadAgentState = `SELECT agent_name, data, updated_at FROM agent_thread_state WHERE thread_id = $1 ORDER BY agent_name`;
export type SelectThreadAgentStateRow = { agent_name: string; data: unknown; updated_at: Date };

/** Event-log rows of thread $1 after id $2, $3 of them (thread_events_pkey). */
export const selectThreadEvents = `
  SELECT id, run_id, attempt, key, event, data, created_at FROM thread_events WHERE thread_id = $1 AND id > $2::bigint ORDER BY id LIMIT $3`;
export type SelectThreadEventsRow = {
  id: string;
  run_id: string | null;
  attempt: number;
  key: string;
  event: string;
  data: unknown;
  created_at: Date;
};

/** Ratings of thread $1's answers after answer id $2, $3 of them (message_feedback_thread_idx). */
export const selectThreadFeedback = `
  SELECT message_id, rating, comment, created_at, updated_at FROM message_feedback
  WHERE thread_id = $1 AND message_id > $2::uuid ORDER BY message_id LIMIT $3`;
export type SelectThreadFeedbackRow = {
  message_id: string;
  rating: "up" | "down";
  comment: string | null;
  created_at: Date;
  updated_at: Date;
};

/**
 * Tool approvals of thread $1's turns after approval id $2, $3 of them (tool_approvals_thread_idx).
 * One whose user message is gone was left behind by a branch deletion made before approvals went
 * with their branch: deleted data, not exported.
 */
export const selectThreadApprovals = `
  SELECT a.id, a.run_id, a.message_id, a.tool_call_id, a.tool_name, a.arguments, a.status, a.decided_by, a.reason,
    a.request_id, a.requested_at, a.expires_at, a.decided_at
  FROM tool_approvals a
  WHERE a.thread_id = $1 AND a.id > $2::uuid AND EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id)
  ORDER BY a.id LIMIT $3`;
export type SelectThreadApprovalsRow = Omit<ApprovalRow, "thread_id">;

/** Memories of user $1 after (updated_at, id) ($2, $3) newest first, $4 of them (user_memories_user_idx). */
export const selectUserMemories = `
  SELECT id, text, source, thread_id, created_at, updated_at, updated_at::text AS cursor_at FROM user_memories
  WHERE user_id = $1 AND (updated_at, id) < ($2::timestamptz, $3::uuid) ORDER BY updated_at DESC, id DESC LIMIT $4`;
export type SelectUserMemoriesRow = UserMemoryRow & { cursor_at: string };

export const selectUserApiKeys = `SELECT id, name, created_at, revoked_at FROM api_keys WHERE user_id = $1 ORDER BY created_at, id`;
export type SelectUserApiKeysRow = { id: string; name: string; created_at: Date; revoked_at: Date | null };

/** The user's usage ledger (deleted threads' rows too), oldest first, keyset-paged on (created_at, key). */
export const selectUserUsage = `
  SELECT key, thread_id, message_id, variant, run_id, step_id, attempt, provider, model, input_tokens::text,
    output_tokens::text, cached_tokens::text, reasoning_tokens::text, latency_ms, cost_usd::text, failed, created_at,
    created_at::text AS cursor_at
  FROM usage_records WHERE user_id = $1 AND (created_at, key) > ($2::timestamptz, $3::text)
  ORDER BY created_at, key LIMIT $4`;
export type SelectUserUsageRow = {
  key: string;
  thread_id: string;
  message_id: string;
  variant: number | null;
  run_id: string;
  step_id: string;
  attempt: number;
  provider: string;
  model: string;
  input_tokens: string;
  output_tokens: string;
  cached_tokens: string | null;
  reasoning_tokens: string | null;
  latency_ms: number | null;
  cost_usd: string | null;
  failed: boolean;
  created_at: Date;
  cursor_at: string;
};

// The import (import.ts) writes into an empty database what an export holds.

export const insertThread = `
  INSERT INTO threads (id, user_id, title, title_source, metadata, created_at, updated_at, last_activity_at)
  VALUES ($1, $2, $3, $4, $5, $6, $6, $6)`;

export const insertMessage = `
  INSERT INTO messages (id, thread_id, user_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, stopped, client_timestamp, created_at, parent_id, parent_variant)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`;

export const insertTurn = `
  INSERT INTO turns (run_id, thread_id, message_id, kind, variant, status, error, event_id, context, started_at, finished_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;

export const insertSummary = `INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)`;

export const insertAgentState = `INSERT INTO agent_thread_state (thread_id, agent_name, data, updated_at) VALUES ($1, $2, $3, $4)`;

/**
 * An imported event-log row, with the Server-Sent Event its stream sends (threadline_event_frame,
 * as threadline_append_events writes it); its frame_offset is set by setEventCounter.
 */
export const insertEvent = `
  INSERT INTO thread_events (thread_id, id, run_id, attempt, key, event, data, frame, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, threadline_event_frame($6, $2, $7), $8)`;

export const insertFeedback = `
  INSERT INTO message_feedback (message_id, thread_id, user_id, rating, comment, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7)`;

/** An imported approval as it was decided (or is pending): no event, the log holds its events already. */
export const insertApproval = `
  INSERT INTO tool_approvals (id, thread_id, run_id, message_id, tool_call_id, tool_name, arguments, status, decided_by,
    reason, request_id, requested_at, expires_at, decided_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`;

export const insertMemory = `INSERT INTO user_memories (id, user_id, text, source, thread_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`;

/** After its rows: the thread's counters and times as exported (the message trigger moved some). */
export const finishThread = `
  UPDATE threads SET
    last_seq = coalesce((SELECT max(seq) FROM messages WHERE thread_id = $1), 0),
    updated_at = $2, last_activity_at = date_trunc('milliseconds', $3::timestamptz), last_message_at = $4
  WHERE id = $1`;

/**
 * After its events: each row's frame_offset (the bytes of the thread's frames before it), and the
 * thread's event counter (its last id, at least $2 where the exported log had reached, and the
 * bytes of all its frames), as threadline_append_events keeps them.
 */
export const setEventCounter = `
  WITH placed AS (
    UPDATE thread_events x SET frame_offset = o.before
    FROM (
      SELECT e.id, coalesce(sum(coalesce(octet_length(e.frame), 0)) OVER (ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
      FROM thread_events e WHERE e.thread_id = $1
    ) o
    WHERE x.thread_id = $1 AND x.id = o.id
  )
  INSERT INTO thread_event_counters (thread_id, last_id, frame_bytes)
  SELECT $1, greatest(max(id), $2::bigint), coalesce(sum(coalesce(octet_length(frame), 0)), 0)
  FROM thread_events WHERE thread_id = $1 HAVING max(id) IS NOT NULL OR $2::bigint > 0
  ON CONFLICT (thread_id) DO UPDATE SET last_id = excluded.last_id, frame_bytes = excluded.frame_bytes`;

export const insertUsage = `
  INSERT INTO usage_records (key, user_id, thread_id, message_id, variant, run_id, step_id, attempt, provider, model,
    input_tokens, output_tokens, cached_tokens, reasoning_tokens, latency_ms, cost_usd, failed, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`;
