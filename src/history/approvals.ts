import type pg from "pg";
import { v5 as uuidv5 } from "uuid";
import * as sql from "./approvals-sql.js";
import type { ApprovalDecidedBy } from "./thread-log.js";

/**
 * Tool calls awaiting a human decision (docs/approvals.md). The row is the truth: a turn records
 * its pending approval (with tool.approval.requested in the log) in one statement, the owner's
 * decision is recorded (tool.approval.decided) in one statement before any event is sent, and the
 * waiting turn re-reads the row after every round of its wait, so a decision is never missed and
 * never taken twice. Imports: uuid, approvals-sql.ts.
 */

// Approval ids have their own namespace: derived from ids that are stable across replays and reruns.
const NAMESPACE = "0c6f3f55-2a7e-4d8b-8f0e-4b1a77c3d217";

/**
 * The approval of one tool call: the user message the turn answers, the event that started the
 * turn (a regenerate is a new event: it asks anew), the inference within the turn and the tool
 * call's id (from the model's memoized inference), so every replay, retry and rerun of that call
 * finds it again.
 */
export const approvalId = (call: { messageId: string; eventId: string; inference: number; toolCallId: string }) =>
  uuidv5(`tool-approval:${JSON.stringify([call.messageId, call.eventId, call.inference, call.toolCallId])}`, NAMESPACE);

export type ApprovalStatus = sql.ApprovalRow["status"];

/** An approval as the API and the turn see it. */
export type Approval = {
  approvalId: string;
  threadId: string;
  runId: string;
  messageId: string;
  toolCallId: string;
  toolName: string;
  arguments: unknown;
  status: ApprovalStatus;
  decidedBy: ApprovalDecidedBy | null;
  reason: string | null;
  requestedAt: string;
  expiresAt: string;
  decidedAt: string | null;
};

const approval = (row: sql.ApprovalRow): Approval => ({
  approvalId: row.id,
  threadId: row.thread_id,
  runId: row.run_id,
  messageId: row.message_id,
  toolCallId: row.tool_call_id,
  toolName: row.tool_name,
  arguments: row.arguments,
  status: row.status,
  decidedBy: row.decided_by,
  reason: row.reason,
  requestedAt: row.requested_at.toISOString(),
  expiresAt: row.expires_at.toISOString(),
  decidedAt: row.decided_at?.toISOString() ?? null,
});

/**
 * Records run `runId`'s tool call as awaiting approval for `expiresInSeconds`, with
 * tool.approval.requested in the log, or returns the approval recorded for it before (decided or
 * not). Undefined when the run has no turn.
 */
export async function requestApproval(
  db: pg.Pool,
  input: {
    approvalId: string;
    runId: string;
    toolCallId: string;
    toolName: string;
    arguments: unknown;
    expiresInSeconds: number;
  },
): Promise<Approval | undefined> {
  const { rows } = await db.query<sql.ApprovalRow>(sql.requestApproval, [
    input.approvalId,
    input.runId,
    input.toolCallId,
    input.toolName,
    JSON.stringify(input.arguments ?? {}),
    input.expiresInSeconds,
  ]);
  return rows[0] && approval(rows[0]);
}

/**
 * The approval as recorded; a pending one past its expiry, or when `expire` (the turn's wait
 * reached it), is recorded expired (tool.approval.expired) first.
 */
export async function settleApproval(db: pg.Pool, approvalId: string, expire: boolean): Promise<Approval | undefined> {
  const { rows } = await db.query<sql.ApprovalRow>(sql.settleApproval, [approvalId, expire]);
  return rows[0] && approval(rows[0]);
}

/** Why a decision was not recorded (see threadline_decide_approval.sql). */
export type DecisionRefusal = "thread_not_found" | "approval_not_found" | "expired" | "turn_ended" | "decided";

/** An owner's decision on one approval, as a request makes it. */
export type ApprovalDecision = {
  threadId: string;
  userId: string;
  approvalId: string;
  decision: "approve" | "deny";
  reason?: string | undefined;
  requestId?: string | undefined;
};

/**
 * The owner's decision, recorded with tool.approval.decided in one statement. Returns the
 * approval as recorded, and the refusal when this request's decision was not the one recorded.
 */
export async function decideApproval(
  db: pg.Pool,
  input: ApprovalDecision,
): Promise<{ refusal: DecisionRefusal | null; approval: Approval | undefined }> {
  const { rows } = await db.query<sql.DecideApprovalRow>(sql.decideApproval, [
    input.threadId,
    input.userId,
    input.approvalId,
    input.decision === "approve" ? "approved" : "denied",
    input.reason ?? null,
    input.requestId ?? null,
  ]);
  const row = rows[0]!;
  return {
    refusal: row.refusal as DecisionRefusal | null,
    approval: row.id === null ? undefined : approval(row),
  };
}

/** The approvals of the owner's thread, oldest first (only `status` when given); undefined: no such thread of theirs. */
export async function listApprovals(
  db: pg.Pool,
  input: { threadId: string; userId: string; status?: ApprovalStatus | undefined },
): Promise<Approval[] | undefined> {
  const { rows } = await db.query<sql.ApprovalRow>(sql.listApprovals, [
    input.threadId,
    input.userId,
    input.status ?? null,
  ]);
  if (rows.length === 0) return undefined;
  return rows.filter((row) => row.id !== null).map(approval);
}

/** Where a stream of the turn goes on after these approvals were decided: the id of the log event that decided the last of them. */
export async function decisionEventId(db: pg.Pool, threadId: string, approvalIds: string[]): Promise<number> {
  const { rows } = await db.query<sql.SelectDecisionEventIdRow>(sql.selectDecisionEventId, [threadId, approvalIds]);
  return Number(rows[0]!.id);
}
