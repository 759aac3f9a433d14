import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { asUser, createTestApp, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";
import { cancelTurn } from "../src/history/turns.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];

beforeAll(() => {
  chatTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: { network: "assistant", memory: NO_MEMORY, approvals: { tools: [], expiryMinutes: 60, demoTool: true } },
  });
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

const DICE_CALL = { name: "roll_dice", id: "call_dice_api", arguments: { count: 1, sides: 20 } };

type Shown = { approvalId: string; status: string; decidedBy: string | null; reason: string | null };

const pending = async (threadId: string, userId = "user-1") => {
  const response = await asUser(app, userId).get(`/api/threads/${threadId}/approvals?status=pending`);
  return { status: response.status, body: (await response.json()) as { approvals: Shown[] } };
};

const decide = (threadId: string, approvalId: string, body: Record<string, unknown>, userId = "user-1") =>
  asUser(app, userId).post(`/api/threads/${threadId}/approvals/${approvalId}`, body);

/** Runs a turn whose model calls the dice tool; `whileWaiting` runs during its first wait, which then ends as it returns. */
async function turnAwaitingApproval(whileWaiting: (threadId: string, approvalId: string) => Promise<SentEvent | null>) {
  const event = chatEvent({ content: "Roll a d20." });
  const threadId = event.data.messageId;
  bed.model.script({ toolCalls: [DICE_CALL] }, { text: "Rolled." });
  let first = true;
  const runId = `run-${randomUUID()}`;
  runs.set(threadId, runId);
  const run = await execute(chatTurn, event, {
    runId,
    waits: async () => {
      if (!first) return null;
      first = false;
      const { body } = await pending(threadId);
      expect(body.approvals).toHaveLength(1);
      return whileWaiting(threadId, body.approvals[0]!.approvalId);
    },
  });
  return { run, threadId, event };
}

/** The run answering the thread's first message (its id is the thread's). */
const runOf = (threadId: string) => runs.get(threadId)!;
const runs = new Map<string, string>();

const rollsRun = (run: { stepIds: string[] }) => run.stepIds.includes("tool.roll-dice");

describe("deciding a tool call's approval over HTTP", () => {
  it("the owner approves once: the decision is recorded, then the decided event wakes the turn; the tool runs", async () => {
    const { run, threadId } = await turnAwaitingApproval(async (threadId, approvalId) => {
      // While waiting, the thread and the message's turn say so, with the call and its arguments.
      const messages = await asUser(app, "user-1").get(`/api/threads/${threadId}/messages`);
      expect(((await messages.json()) as { messages: unknown[] }).messages).toMatchObject([
        {
          role: "user",
          turn: {
            status: "awaiting_approval",
            approvals: [
              {
                approvalId,
                toolCallId: DICE_CALL.id,
                toolName: "roll_dice",
                arguments: DICE_CALL.arguments,
                status: "pending",
              },
            ],
          },
        },
      ]);
      const thread = await asUser(app, "user-1").get(`/api/threads/${threadId}`);
      expect(await thread.json()).toMatchObject({ latestTurnStatus: "awaiting_approval" });

      const response = await decide(threadId, approvalId, { decision: "approve" });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({
        approval: {
          approvalId,
          status: "approved",
          decidedBy: "user",
          toolName: "roll_dice",
          arguments: { count: 1, sides: 20 },
        },
        announced: true,
      });
      expect(sent).toEqual([
        {
          id: `tool-approval-decided-${approvalId}`,
          name: "threadline/tool.approval.decided",
          data: { threadId, approvalId, status: "approved" },
        },
      ]);
      return sent[0]!;
    });
    expect(run.error).toBeUndefined();
    expect(rollsRun(run)).toBe(true);
    expect((await pending(threadId)).body.approvals).toEqual([]);
    const thread = await asUser(app, "user-1").get(`/api/threads/${threadId}`);
    expect(await thread.json()).toMatchObject({ latestTurnStatus: "completed" });
  });

  it("two decisions at once: one wins, the other is 409 with the recorded one; the same request id again answers the same", async () => {
    const { run } = await turnAwaitingApproval(async (threadId, approvalId) => {
      const requestId = randomUUID();
      const [a, b] = await Promise.all([
        decide(threadId, approvalId, { decision: "deny", reason: "not now", requestId }),
        decide(threadId, approvalId, { decision: "approve", requestId: randomUUID() }),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses).toEqual([200, 409]);
      const winner = a.status === 200 ? await a.json() : await b.json();
      const loser = (a.status === 409 ? await a.json() : await b.json()) as { code: string; approval: Shown };
      expect(loser).toMatchObject({
        code: "decided",
        approval: { status: (winner as { approval: Shown }).approval.status },
      });
      // Retrying the first request (same request id) answers as it did, even if it lost.
      const retried = await decide(threadId, approvalId, { decision: "deny", reason: "not now", requestId });
      expect(retried.status).toBe(a.status);
      // A fresh conflicting request is refused with the record.
      const conflicting = await decide(threadId, approvalId, { decision: "approve" });
      expect(conflicting.status).toBe(409);
      return sent[0]!;
    });
    expect(run.error).toBeUndefined();
  });

  it("another user's decision is 404 and records nothing; so is their list", async () => {
    const { run, threadId } = await turnAwaitingApproval(async (threadId, approvalId) => {
      const response = await decide(threadId, approvalId, { decision: "approve" }, "mallory");
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: "thread_not_found" });
      expect((await pending(threadId, "mallory")).status).toBe(404);
      expect((await pending(threadId)).body.approvals).toMatchObject([{ approvalId, status: "pending" }]);
      expect(sent).toEqual([]);
      expect((await decide(threadId, randomUUID(), { decision: "approve" })).status).toBe(404);
      expect((await decide(threadId, approvalId, { decision: "maybe" })).status).toBe(400);
      return null;
    });
    // Nobody decided: it expires.
    expect(run.error).toBeUndefined();
    expect(rollsRun(run)).toBe(false);
    const all = (await (await asUser(app, "user-1").get(`/api/threads/${threadId}/approvals`)).json()) as {
      approvals: Shown[];
    };
    expect(all).toMatchObject({ approvals: [{ status: "expired", decidedBy: "expiry" }] });
    const late = await decide(threadId, all.approvals[0]!.approvalId, { decision: "approve" });
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ code: "expired" });
  });

  it("a stop ends the wait: recorded denied by the stop, a later decision 409, the tool never runs", async () => {
    const { run, threadId, event } = await turnAwaitingApproval(async (threadId, approvalId) => {
      expect((await asUser(app, "user-1").post(`/api/threads/${threadId}/stop`, {})).status).toBe(202);
      const response = await decide(threadId, approvalId, { decision: "approve" });
      expect(response.status).toBe(409);
      expect(await response.json()).toMatchObject({
        code: "decided",
        approval: { status: "denied", decidedBy: "stop", reason: "the turn was stopped" },
      });
      return null;
    });
    expect(rollsRun(run)).toBe(false);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "stopped" }]);
    expect((await pending(threadId)).body.approvals).toEqual([]);
  });

  it("after the turn was cancelled: nothing pending is listed, and a decision is 409 with the approval denied by the turn's end", async () => {
    const { run, threadId } = await turnAwaitingApproval(async (threadId, approvalId) => {
      await cancelTurn(bed.db.pool, runOf(threadId));
      expect((await pending(threadId)).body.approvals).toEqual([]);
      const response = await decide(threadId, approvalId, { decision: "approve" });
      expect(response.status).toBe(409);
      // The cancellation recorded it denied (threadline_turn_ended_approvals, docs/approvals.md): decided before.
      expect(await response.json()).toMatchObject({
        code: "decided",
        approval: { status: "denied", decidedBy: "turn-ended", reason: "the turn was cancelled" },
      });
      return null;
    });
    expect(rollsRun(run)).toBe(false);
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([{ status: "cancelled" }]);
  });
});
