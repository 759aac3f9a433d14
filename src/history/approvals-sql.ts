import type { ApprovalDecidedBy } from "./thread-log.js";
/**
 * The statements of approvals.ts: tool calls awaiting a human decision (table tool_approvals,
 * migration 0017). Each write is one statement of a database function (src/history/schema/functions)
 * that also writes its tool.approval.* event to the thread's log.
 */

const columns = `id, thread_id, run_id, message_id, tool_call_id, tool_name, arguments, status, decided_by, reason,
  request_id, requested_at, expires_at, decided_at`;

/** Records approval $1 of run $2's tool call ($3 id, $4 name, $5 arguments) pending for $6 seconds, or returns the recorded one. */
export const requestApproval = `
  SELECT ${columns} FROM threadline_request_approval($1, $2, $3, $4, $5, $6)`;

/** Approval $1 as recorded, recorded expired first when pending past its expiry (or $2: the wait reached it). */
export const settleApproval = `
  SELECT ${columns} FROM threadline_settle_approval($1, $2)`;

/** The owner's ($2) decision $4 ('approved' | 'denied', reason $5, request $6) on approval $3 of thread $1. */
export const decideApproval = `
  SELECT d.refusal, ${columns
    .split(",")
    .map((c) => `(d.approval).${c.trim()}`)
    .join(", ")}
  FROM threadline_decide_approval($1, $2, $3, $4, $5, $6) d`;
export type DecideApprovalRow = { refusal: string | null } & ApprovalRow;

/**
 * The approvals of the owner's ($2) thread $1, oldest first; $3: only this status (NULL: all). A
 * pending one whose turn ended otherwise (cancelled, failed) awaits nothing: not listed as pending.
 */
export const listApprovals = `
  SELECT ${columns.replace(/(\w+)/g, "a.$1")}
  FROM threads t
  LEFT JOIN tool_approvals a ON a.thread_id = t.id AND ($3::text IS NULL OR a.status = $3)
    AND ($3::text IS DISTINCT FROM 'pending'
         OR EXISTS (SELECT 1 FROM turns u WHERE u.message_id = a.message_id AND u.status = 'running'))
  WHERE t.id = $1 AND t.user_id = $2
  ORDER BY a.requested_at, a.id`;

/** The id of the last log event of thread $1 that decided (or expired) one of the approvals $2 (uuid[]); 0: none. */
export const selectDecisionEventId = `
  SELECT coalesce(max(id), 0)::text AS id FROM thread_events
  WHERE thread_id = $1 AND event IN ('tool.approval.decided', 'tool.approval.expired')
    AND (data ->> 'approvalId')::uuid = ANY($2::uuid[])`;
export type SelectDecisionEventIdRow = { id: string };

/** A tool_approvals row as pg reads it. */
export type ApprovalRow = {
  id: string;
  thread_id: string;
  run_id: string;
  message_id: string;
  tool_call_id: string;
  tool_name: string;
  arguments: unknown;
  status: "pending" | "approved" | "denied" | "expired";
  decided_by: ApprovalDecidedBy | null;
  reason: string | null;
  request_id: string | null;
  requested_at: Date;
  expires_at: Date;
  decided_at: Date | null;
};
