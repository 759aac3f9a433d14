/**
 * The statements of message-pages.ts: GET /api/threads/:threadId/messages, keyset-paged on the
 * thread order (turn_seq, seq). Both directions return PageRow.
 */

import type { TurnUsage } from "./usage.js";

/**
 * The user messages' extras a client shows, for one page: each user message's latest turn and its
 * number of answer variants. Read per row through turns_message_idx and messages_answers_idx, so a
 * page costs the same however long the thread is.
 */
const pageExtras = `
  SELECT p.id, p.turn_seq, p.seq, p.kind, p.agent_name, p.content, p.answers, p.variant, p.stopped, p.created_at,
         -- A running turn between attempts of a failed step shows as retrying, with the cause; one
         -- whose tool call awaits the owner's approval as awaiting_approval, with the calls.
         CASE WHEN t.status = 'running' AND t.retrying IS NOT NULL THEN 'retrying'
              WHEN t.status = 'running' AND w.approvals IS NOT NULL THEN 'awaiting_approval'
              ELSE t.status END AS turn_status,
         w.approvals AS turn_approvals,
         t.run_id AS turn_run_id,
         CASE WHEN t.status = 'running' AND t.retrying IS NOT NULL THEN t.retrying ->> 'cause' ELSE t.error END AS turn_error,
         CASE WHEN p.kind = 'user'
           THEN (SELECT count(DISTINCT a.variant)::int FROM messages a WHERE a.answers = p.id) END AS variant_count,
         -- The conversation tree (migration 0019): a user message's siblings are the user messages
         -- that follow the same message and answer variant (edits); an answer's are its variants
         -- (each named by its first row), read through messages_parent_idx (messages_roots_idx for a
         -- thread's first messages) and messages_answers_idx.
         CASE WHEN p.kind = 'user' AND p.parent_id IS NOT NULL THEN (
             SELECT array_agg(s.id ORDER BY s.seq) FROM messages s
             WHERE s.kind = 'user' AND s.parent_id = p.parent_id AND s.parent_variant IS NOT DISTINCT FROM p.parent_variant)
           WHEN p.kind = 'user' THEN (
             SELECT array_agg(s.id ORDER BY s.seq) FROM messages s
             WHERE s.kind = 'user' AND s.parent_id IS NULL AND s.thread_id = p.thread_id)
           WHEN p.kind = 'agent' THEN (
             SELECT array_agg(a.id ORDER BY a.variant) FROM messages a WHERE a.answers = p.answers AND a.position = 0)
         END AS sibling_ids,
         CASE WHEN p.kind = 'agent' THEN (
             SELECT count(DISTINCT a.variant)::int FROM messages a WHERE a.answers = p.answers AND a.variant <= p.variant)
         END AS variant_position,
         usage.turn_usage
  FROM page p
  LEFT JOIN LATERAL (
    SELECT status, run_id, error, retrying FROM turns
    WHERE turns.message_id = p.id AND p.kind = 'user' AND status <> 'skipped'
    ORDER BY started_at DESC LIMIT 1
  ) t ON true
  -- An answer's turn usage: the ledger rows of its variant's turn (usage_records_message_idx).
  LEFT JOIN LATERAL (
    SELECT json_build_object(
      'calls', count(*), 'inputTokens', sum(u.input_tokens), 'outputTokens', sum(u.output_tokens),
      'cachedTokens', coalesce(sum(u.cached_tokens), 0), 'reasoningTokens', coalesce(sum(u.reasoning_tokens), 0),
      'totalTokens', sum(u.input_tokens + u.output_tokens), 'costUsd', sum(u.cost_usd)::float8,
      'model', max(u.model)) AS turn_usage
    FROM usage_records u WHERE p.kind = 'agent' AND u.message_id = p.answers AND u.variant = p.variant
    HAVING count(*) > 0
  ) usage ON true
  LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('approvalId', a.id, 'toolCallId', a.tool_call_id, 'toolName', a.tool_name,
             'arguments', a.arguments, 'status', a.status, 'expiresAt', a.expires_at) ORDER BY a.requested_at) AS approvals
    FROM tool_approvals a
    WHERE t.status = 'running' AND a.thread_id = $1 AND a.message_id = p.id AND a.status = 'pending'
  ) w ON true`;

/** A tool call of a running turn that awaits the owner's approval. */
export type PendingToolCall = {
  approvalId: string;
  toolCallId: string;
  toolName: string;
  arguments: unknown;
  status: "pending";
  expiresAt: string;
};

/** A message of a page with its extras (pageExtras): what selectPageBefore and selectPageAfter return. */
export type PageRow = {
  id: string;
  turn_seq: string;
  seq: string;
  kind: "user" | "agent" | "system" | "summary";
  agent_name: string;
  content: unknown;
  answers: string | null;
  variant: number | null;
  stopped: boolean;
  created_at: Date;
  turn_status: string | null;
  turn_run_id: string;
  turn_error: string | null;
  turn_approvals: PendingToolCall[] | null;
  variant_count: number | null;
  sibling_ids: string[] | null;
  variant_position: number | null;
  /** An answer's turn usage (json_build_object above), null without ledger rows. */
  turn_usage: TurnUsage | null;
};

/**
 * Up to $4 current-path messages before position ($2, $3) in thread order, the nearest first
 * (a backward range scan of messages_path_idx that stops after $4 rows).
 */
export const selectPageBefore = `
  WITH page AS (
    SELECT id, thread_id, turn_seq, seq, kind, agent_name, content, answers, variant, stopped, created_at, parent_id, parent_variant FROM messages
    WHERE thread_id = $1 AND on_path AND (turn_seq, seq) < ($2::bigint, $3::bigint)
    ORDER BY turn_seq DESC, seq DESC
    LIMIT $4
  )${pageExtras}
  ORDER BY p.turn_seq DESC, p.seq DESC`;

/** Up to $4 current-path messages after position ($2, $3) in thread order, the nearest first. */
export const selectPageAfter = `
  WITH page AS (
    SELECT id, thread_id, turn_seq, seq, kind, agent_name, content, answers, variant, stopped, created_at, parent_id, parent_variant FROM messages
    WHERE thread_id = $1 AND on_path AND (turn_seq, seq) > ($2::bigint, $3::bigint)
    ORDER BY turn_seq, seq
    LIMIT $4
  )${pageExtras}
  ORDER BY p.turn_seq, p.seq`;
