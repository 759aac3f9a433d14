import { NonRetriableError } from "inngest";
import type pg from "pg";
import { type StepTools, toolApprovalDecided } from "../../inngest.config.js";
import { approvalRules, type ApprovalDecision, type ToolApprovals, type ToolCallRequest } from "../agents/approvals.js";
import { type Approval, approvalId, requestApproval, settleApproval } from "../history/approvals.js";
import { durably } from "../history/durable.js";

/**
 * How a turn asks a human to approve a tool call (docs/approvals.md), inside the tool's handler
 * with the step it received. Steps, for a call with id <call>:
 * - `tool.approval.request.<call>`: records the approval pending with tool.approval.requested (one
 *   statement), or finds the one recorded before (a replay, retry or rerun: decided, it is final);
 * - rounds of `tool.approval.wait.<call>[.n]` (step.waitForEvent on the decision event, matched by
 *   approval id) then `tool.approval.check.<call>[.n]` (re-reads the record), until it is decided.
 *   waitForEvent sees only events sent after the wait started: a decision recorded between a
 *   check and the next wait wakes nobody, and the round's timeout and the check after it catch
 *   it. The record is the truth; the event only makes the common case immediate.
 * The check after the round that reaches the expiry records it expired (tool.approval.expired).
 */

/** How a deployment configures approvals (APPROVAL_TOOLS, APPROVAL_EXPIRY_MINUTES, DEMO_TOOL). */
export type ApprovalSettings = { tools: readonly string[]; expiryMinutes: number; demoTool: boolean };

export const DEFAULT_APPROVAL_EXPIRY_MINUTES = 24 * 60;

/** Rounds of a wait: short ones first (a decision missed between a check and a wait costs a minute), then longer. */
const QUICK_ROUNDS = 5;
const QUICK_ROUND_MINUTES = 1;
/** At most this many rounds (two steps each) in all, under Inngest's 1,000 steps per run. */
const MAX_LONG_ROUNDS = 200;

/** The timeout of each round of a wait of `expiryMinutes`, in minutes: they add up to the expiry. */
export function approvalRounds(expiryMinutes: number): number[] {
  const long = Math.max(15, Math.ceil(expiryMinutes / MAX_LONG_ROUNDS));
  const rounds: number[] = [];
  for (let waited = 0; waited < expiryMinutes; ) {
    const next = Math.min(rounds.length < QUICK_ROUNDS ? QUICK_ROUND_MINUTES : long, expiryMinutes - waited);
    rounds.push(next);
    waited += next;
  }
  return rounds;
}

const roundId = (base: string, round: number) => (round === 1 ? base : `${base}.${round}`);

const decision = (approval: Approval): ApprovalDecision => ({
  status: approval.status === "pending" ? "expired" : approval.status,
  decidedBy: approval.decidedBy,
  reason: approval.reason,
});

/** The approvals of one turn (run `runId` answering message `messageId`). */
export function turnApprovals(
  settings: ApprovalSettings,
  {
    db,
    step,
    runId,
    eventId,
    messageId,
  }: { db: pg.Pool; step: StepTools; runId: string; eventId: string | undefined; messageId: string },
): ToolApprovals {
  const expiresInSeconds = settings.expiryMinutes * 60;
  return {
    rules: approvalRules(settings.tools),
    demoTool: settings.demoTool,
    ask: async ({ inference, ...call }: ToolCallRequest) => {
      // Without an event id (AgentKit run directly), the run is the request.
      const id = approvalId({ messageId, eventId: eventId ?? runId, inference, toolCallId: call.toolCallId });
      const base = `tool.approval.${call.toolCallId}`;
      let approval = await durably(step, `${base}.request`, () =>
        requestApproval(db, { approvalId: id, runId, ...call, expiresInSeconds }),
      );
      if (!approval) throw new NonRetriableError(`Run ${runId} has no turn to ask approval for ${call.toolName} in.`);
      const rounds = approvalRounds(settings.expiryMinutes);
      for (const [index, minutes] of rounds.entries()) {
        if (approval.status !== "pending") break;
        const round = index + 1;
        await step.waitForEvent(roundId(`${base}.wait`, round), {
          event: toolApprovalDecided,
          timeout: `${minutes}m`,
          if: `async.data.approvalId == ${JSON.stringify(id)}`,
        });
        const expire = round === rounds.length;
        const settled = await durably(step, roundId(`${base}.check`, round), () => settleApproval(db, id, expire));
        if (!settled) throw new NonRetriableError(`The approval of ${call.toolName} is gone: its thread was deleted.`);
        approval = settled;
      }
      return decision(approval);
    },
  };
}
