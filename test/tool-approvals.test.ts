import { randomUUID } from "node:crypto";
import { type AgentResult, createTool } from "@inngest/agent-kit";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { gateTools, type ToolCallRequest } from "../src/agents/approvals.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { approvalRounds } from "../src/functions/tool-approvals.js";
import { decideApproval, listApprovals, requestApproval } from "../src/history/approvals.js";
import { longRunningTurns } from "../src/history/lost-turns.js";
import { beginTurn } from "../src/history/store.js";
import { PATIENCE_ROUNDS } from "../src/history/turn-waits.js";
import { readEventsAfter } from "../src/history/events.js";
import { cancelTurn, failTurn, stopRunningTurn } from "../src/history/turns.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { execute, memoBefore, type SentEvent, StepFault, type Wait } from "./helpers/engine.js";
import { chatEvent, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";
import { withPausedFunction } from "./helpers/paused-function.js";

const bed = useTestBed();
const EXPIRY_MINUTES = 24 * 60;
const chatTurn = (expiryMinutes = EXPIRY_MINUTES) =>
  createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: {
      network: "assistant",
      memory: NO_MEMORY,
      approvals: { tools: [], expiryMinutes, demoTool: true },
    },
  });

/** A chat message event as POST /api/chat sends it: its id, derived from the message, is the same on every delivery. */
const sentMessage = (content: string) => {
  const event = chatEvent({ content });
  return { ...event, id: `chat-message-${event.data.messageId}` };
};

const DICE_CALL = { name: "roll_dice", id: "call_dice_1", arguments: { count: 2, sides: 6 } };

/** Counts the runs of the tool's side effect (its step's work; memoized steps do not run). */
function sideEffects() {
  const counter = { rolls: 0 };
  const beforeStep = async (id: string) => {
    if (id === "tool.roll-dice") counter.rolls += 1;
  };
  return { counter, beforeStep };
}

/** The pending approval of the thread, once the turn has asked. */
async function pendingApproval(threadId: string) {
  const approvals = await listApprovals(bed.db.pool, { threadId, userId: "user-1", status: "pending" });
  expect(approvals).toHaveLength(1);
  return approvals![0]!;
}

const decidedEvent = (threadId: string, approvalId: string, status: string): SentEvent => ({
  name: "threadline/tool.approval.decided",
  data: { threadId, approvalId, status },
});

/** The tool result the model was sent for the dice call, parsed. */
const toolResultSent = () => {
  const request = bed.model.requests.at(-1)!;
  const result = request.messages.find((m) => m.role === "tool" && m.tool_call_id === DICE_CALL.id);
  return JSON.parse(String(result?.content)) as { data: Record<string, unknown> };
};

describe("a tool call that needs approval", () => {
  it("approved after 2 virtual hours runs exactly once, across a retry of the step after it and a re-run of the event", async () => {
    const fn = chatTurn();
    const event = sentMessage("Roll two dice for me.");
    const threadId = event.data.messageId;
    bed.model.script({ toolCalls: [DICE_CALL] }, { text: "You rolled them." });
    const { counter, beforeStep } = sideEffects();
    const waits: Wait[] = [];
    let waited = 0;
    let failedOnce = false;

    const run = await execute(fn, event, {
      waits: async (wait) => {
        waits.push(wait);
        waited += Number(/^(\d+)m$/.exec(wait.timeout)![1]);
        if (waited < 120) return null;
        const approval = await pendingApproval(threadId);
        const decided = await decideApproval(bed.db.pool, {
          threadId,
          userId: "user-1",
          approvalId: approval.approvalId,
          decision: "approve",
        });
        expect(decided.refusal).toBeNull();
        return decidedEvent(threadId, approval.approvalId, "approved");
      },
      beforeStep: async (id) => {
        await beforeStep(id);
        // The step right after the tool's fails once: its retry must not run the tool again.
        if (id.startsWith("generate-agent-ids") && counter.rolls === 1 && !failedOnce) {
          failedOnce = true;
          throw new StepFault("transient fault after the tool ran");
        }
      },
    });
    expect(run.error).toBeDefined();
    expect(counter.rolls).toBe(1);
    expect(waits.every((w) => w.event === "threadline/tool.approval.decided")).toBe(true);
    expect(waits.map((w) => w.timeout)).toEqual(
      approvalRounds(EXPIRY_MINUTES)
        .slice(0, waits.length)
        .map((m) => `${m}m`),
    );

    const retry = await execute(fn, event, { memo: run.memo, runId: run.runId, attempt: 1, beforeStep });
    expect(retry.error).toBeUndefined();
    expect(retry.result).toMatchObject({ status: "completed", answer: "You rolled them." });
    expect(counter.rolls).toBe(1);
    const sent = toolResultSent();
    expect(sent.data).toMatchObject({ rolls: [expect.any(Number), expect.any(Number)] });

    // The whole event again (a re-delivery or the dev server's rerun): the message is answered, nothing asks or runs.
    const rerun = await execute(fn, event, { beforeStep, waits: async () => expect.fail("a rerun must not wait") });
    expect(rerun.result).toMatchObject({ status: "skipped" });
    expect(counter.rolls).toBe(1);
    expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
      { status: "approved", decidedBy: "user", toolName: "roll_dice", arguments: DICE_CALL.arguments },
    ]);
  });

  it("denied: the model is told it did not run; a replay, a re-delivery and a hand-sent approve event never run it", async () => {
    const fn = chatTurn();
    const event = sentMessage("Roll a die.");
    const threadId = event.data.messageId;
    bed.model.script({ toolCalls: [DICE_CALL] }, { text: "You said no." });
    const { counter, beforeStep } = sideEffects();
    let approvalId = "";

    const run = await execute(fn, event, {
      beforeStep,
      waits: async () => {
        approvalId = (await pendingApproval(threadId)).approvalId;
        await decideApproval(bed.db.pool, {
          threadId,
          userId: "user-1",
          approvalId,
          decision: "deny",
          reason: "no dice",
        });
        return decidedEvent(threadId, approvalId, "denied");
      },
    });
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "You said no." });
    expect(counter.rolls).toBe(0);
    expect(toolResultSent().data).toMatchObject({ ran: false, approval: "denied", reason: "no dice" });

    // The run replayed from its wait, which ends with a hand-sent "approved" event: the record says denied.
    bed.model.script({ text: "Still no." });
    const replay = await execute(fn, event, {
      memo: memoBefore(run, `tool.approval.${DICE_CALL.id}.wait`),
      runId: run.runId,
      beforeStep,
      waits: async () => decidedEvent(threadId, approvalId, "approved"),
    });
    expect(replay.error).toBeUndefined();
    expect(replay.stepIds).toContain(`tool.approval.${DICE_CALL.id}.check`);
    expect(toolResultSent().data).toMatchObject({ ran: false, approval: "denied" });
    // The same event re-delivered: the turn is answered, skipped.
    const redelivered = await execute(fn, event, {
      beforeStep,
      waits: async () => decidedEvent(threadId, approvalId, "approved"),
    });
    expect(redelivered.result).toMatchObject({ status: "skipped" });
    expect(counter.rolls).toBe(0);
    expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
      { status: "denied", reason: "no dice" },
    ]);
  });

  it("decided before its wait started (the event wakes nobody): the check after the round finds it; the other call runs unasked", async () => {
    const fn = chatTurn();
    const event = sentMessage("What time is it, and roll a die.");
    const threadId = event.data.messageId;
    bed.model.script({ toolCalls: [{ name: "current_time", id: "call_time_1" }, DICE_CALL] }, { text: "Done." });
    const { counter, beforeStep } = sideEffects();
    const waits: Wait[] = [];

    const run = await execute(fn, event, {
      beforeStep,
      waits: async (wait) => {
        waits.push(wait);
        const { approvalId } = await pendingApproval(threadId);
        await decideApproval(bed.db.pool, { threadId, userId: "user-1", approvalId, decision: "approve" });
        return null;
      },
    });
    expect(run.error).toBeUndefined();
    expect(waits).toHaveLength(1);
    expect(counter.rolls).toBe(1);
    expect(run.stepIds).toContain("tool.current-time");
    expect(run.stepIds.filter((id) => id.startsWith("tool.approval."))).toEqual([
      `tool.approval.${DICE_CALL.id}.request`,
      `tool.approval.${DICE_CALL.id}.wait`,
      `tool.approval.${DICE_CALL.id}.check`,
    ]);
  });

  it("expires when nobody decides: recorded expired, the model told so, a late approve refused", async () => {
    const fn = chatTurn(60);
    const event = sentMessage("Roll a die.");
    const threadId = event.data.messageId;
    bed.model.script({ toolCalls: [DICE_CALL] }, { text: "Nobody approved." });
    const { counter, beforeStep } = sideEffects();
    const waits: Wait[] = [];

    const run = await execute(fn, event, { beforeStep, waits: async (wait) => (waits.push(wait), null) });
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "Nobody approved." });
    expect(waits.map((w) => w.timeout)).toEqual(["1m", "1m", "1m", "1m", "1m", "15m", "15m", "15m", "10m"]);
    expect(counter.rolls).toBe(0);
    expect(toolResultSent().data).toMatchObject({ ran: false, approval: "expired" });
    const [approval] = (await listApprovals(bed.db.pool, { threadId, userId: "user-1" }))!;
    expect(approval).toMatchObject({ status: "expired", decidedBy: "expiry" });
    const late = await decideApproval(bed.db.pool, {
      threadId,
      userId: "user-1",
      approvalId: approval!.approvalId,
      decision: "approve",
    });
    expect(late.refusal).toBe("expired");
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "completed" }]);
  });
});

describe("declaring which calls need approval", () => {
  it("a predicate on the arguments decides per call; the call asked about is named by its id", async () => {
    const ran: unknown[] = [];
    const asked: ToolCallRequest[] = [];
    const tool = createTool({
      name: "transfer",
      parameters: z.object({ amount: z.number() }),
      handler: async (input) => (ran.push(input), "transferred"),
    });
    const { tools, onResponse } = gateTools([tool], {
      rules: { transfer: (args) => (args as { amount: number }).amount > 100 },
      demoTool: false,
      ask: async (call) => (asked.push(call), { status: "denied", decidedBy: "user", reason: "too much" }),
    });
    const calls = [
      { type: "tool" as const, id: "call_small", name: "transfer", input: { amount: 5 } },
      { type: "tool" as const, id: "call_large", name: "transfer", input: { amount: 500 } },
    ];
    onResponse({
      result: {
        output: [{ type: "tool_call", role: "assistant", stop_reason: "tool", tools: calls }],
      } as unknown as AgentResult,
    });
    const options = { network: { state: { results: [] } } } as unknown as Parameters<typeof tool.handler>[1];
    expect(await tools[0]!.handler({ amount: 5 }, options)).toBe("transferred");
    expect(await tools[0]!.handler({ amount: 500 }, options)).toMatchObject({
      ran: false,
      approval: "denied",
      reason: "too much",
    });
    expect(ran).toEqual([{ amount: 5 }]);
    expect(asked).toEqual([
      { toolName: "transfer", toolCallId: "call_large", arguments: { amount: 500 }, inference: 0 },
    ]);
  });
});

describe("a turn awaiting approval is alive", () => {
  /** A thread whose turn awaits approval of a tool call (expiring in a day). */
  async function awaitingTurn() {
    const threadId = randomUUID();
    const runId = `run-${threadId}`;
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: threadId, text: "Roll a die." },
      turn: { runId, kind: "chat" },
    });
    const approval = await requestApproval(bed.db.pool, {
      approvalId: randomUUID(),
      runId,
      toolCallId: "call_alive",
      toolName: "roll_dice",
      arguments: { count: 1, sides: 6 },
      expiresInSeconds: 24 * 3600,
    });
    return { threadId, runId, approvalId: approval!.approvalId };
  }

  it("ends with it: a failure or a cancellation denies the approval (logged before the turn's end), and a late decision is refused", async () => {
    const ended = [
      {
        end: (runId: string) => failTurn(bed.db.pool, runId, "The model failed."),
        reason: "the turn failed",
        as: "failed",
      },
      { end: (runId: string) => cancelTurn(bed.db.pool, runId), reason: "the turn was cancelled", as: "cancelled" },
    ];
    for (const { end, reason, as } of ended) {
      const { threadId, runId, approvalId } = await awaitingTurn();
      await end(runId);
      expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
        { approvalId, status: "denied", decidedBy: "turn-ended", reason },
      ]);
      const log = (await readEventsAfter(bed.db.pool, threadId, 0, 100)).map((e) => e.event);
      expect(log.slice(-3)).toEqual(["tool.approval.decided", `turn.${as}`, "stream.ended"]);
      const late = await decideApproval(bed.db.pool, { threadId, userId: "user-1", approvalId, decision: "approve" });
      expect(late.refusal).toBe("decided");
    }
  });

  it("asked for after a stop (the step was executing): recorded denied by the stop at once, never left pending", async () => {
    const threadId = randomUUID();
    const runId = `run-${threadId}`;
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: threadId, text: "Roll a die." },
      turn: { runId, kind: "chat" },
    });
    await stopRunningTurn(bed.db.pool, { threadId, userId: "user-1", agentName: "assistant" });
    const asked = {
      approvalId: randomUUID(),
      runId,
      toolCallId: "call_late",
      toolName: "roll_dice",
      arguments: { count: 1, sides: 6 },
      expiresInSeconds: 24 * 3600,
    };
    const decided = { status: "denied", decidedBy: "stop", reason: "the turn was stopped" };
    expect(await requestApproval(bed.db.pool, asked)).toMatchObject(decided);
    // A replay of the step finds the same decision; a regenerate of the message does not revive it.
    expect(await requestApproval(bed.db.pool, asked)).toMatchObject(decided);
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: threadId, text: "Roll a die." },
      turn: { runId: `regenerate-${threadId}`, kind: "regenerate" },
    });
    expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1", status: "pending" })).toEqual([]);
    const log = (await readEventsAfter(bed.db.pool, threadId, 0, 100)).map((e) => e.event);
    expect(log.slice(-2)).toEqual(["tool.approval.requested", "tool.approval.decided"]);
  });

  it("asked for by a cancelled run while a re-run of its event answers the message: left pending for that run, as the cancellation leaves it", async () => {
    const threadId = randomUUID();
    const runs = [`run-${threadId}`, `rerun-${threadId}`];
    for (const runId of runs)
      await beginTurn(bed.db.pool, {
        threadId,
        userId: "user-1",
        message: { id: threadId, text: "Roll a die." },
        turn: { runId, kind: "chat" },
      });
    await cancelTurn(bed.db.pool, runs[0]!);
    const asked = await requestApproval(bed.db.pool, {
      approvalId: randomUUID(),
      runId: runs[0]!,
      toolCallId: "call_shared",
      toolName: "roll_dice",
      arguments: { count: 1, sides: 6 },
      expiresInSeconds: 24 * 3600,
    });
    expect(asked).toMatchObject({ status: "pending", decidedBy: null });
  });

  it.each([
    {
      as: "cancelled",
      end: (pool: pg.Pool, runId: string) => cancelTurn(pool, runId),
      reason: "the turn was cancelled",
    },
    {
      as: "failed",
      end: (pool: pg.Pool, runId: string) => failTurn(pool, runId, "The model failed."),
      reason: "the turn failed",
    },
  ])("asked for while the turn is being $as: denied with it, never left pending", async ({ end, reason }) => {
    // An ending share-locks the thread as the request does, so the thread's lock does not order
    // them: a request paused right before its insert while the turn ends.
    const pause = {
      name: "threadline_request_approval",
      at: "  INSERT INTO tool_approvals",
      when: "p_run_id LIKE 'paused-%'",
    };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
      const threadId = randomUUID();
      const runId = `paused-${threadId}`;
      await beginTurn(pool, {
        threadId,
        userId: "user-1",
        message: { id: threadId, text: "Roll a die." },
        turn: { runId, kind: "chat" },
      });
      const asking = requestApproval(pools[0], {
        approvalId: randomUUID(),
        runId,
        toolCallId: "call_racing",
        toolName: "roll_dice",
        arguments: { count: 1, sides: 6 },
        expiresInSeconds: 24 * 3600,
      });
      await reachedPause();
      // The ending either commits at once or waits for the paused request: either way it has run.
      const ending = end(pools[1], runId);
      await settled(ending);
      await release();
      await Promise.all([asking, ending]);

      expect(await listApprovals(pool, { threadId, userId: "user-1" })).toMatchObject([
        { status: "denied", decidedBy: "turn-ended", reason },
      ]);
    });
  });

  it("two runs of its message cancelled at once: the second to end denies the approval, not both sparing it for the other", async () => {
    // Each ending spares the approval while another run of the message runs: the first ending
    // paused right after it found the other run running, while the other run is cancelled.
    const pause = {
      name: "threadline_turn_ended_approvals",
      at: "AND r.run_id <> NEW.run_id) THEN",
      where: "after" as const,
      when: "NEW.run_id LIKE 'paused-%'",
    };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
      const threadId = randomUUID();
      const runs = [`paused-${threadId}`, `rerun-${threadId}`];
      for (const runId of runs)
        await beginTurn(pool, {
          threadId,
          userId: "user-1",
          message: { id: threadId, text: "Roll a die." },
          turn: { runId, kind: "chat" },
        });
      await requestApproval(pool, {
        approvalId: randomUUID(),
        runId: runs[0]!,
        toolCallId: "call_both_ended",
        toolName: "roll_dice",
        arguments: { count: 1, sides: 6 },
        expiresInSeconds: 24 * 3600,
      });
      const first = cancelTurn(pools[0], runs[0]!);
      await reachedPause();
      // The second ending either commits at once or waits for the paused one: either way it has run.
      const second = cancelTurn(pools[1], runs[1]!);
      await settled(second);
      await release();
      await Promise.all([first, second]);

      expect(await listApprovals(pool, { threadId, userId: "user-1" })).toMatchObject([
        { status: "denied", decidedBy: "turn-ended", reason: "the turn was cancelled" },
      ]);
    });
  });

  it("ends with it past its expiry as expired, the clock's decision", async () => {
    const { threadId, runId, approvalId } = await awaitingTurn();
    await bed.db.pool.query("UPDATE tool_approvals SET expires_at = now() - interval '1 minute' WHERE id = $1", [
      approvalId,
    ]);
    await failTurn(bed.db.pool, runId, "The model failed.");
    expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
      { status: "expired", decidedBy: "expiry", reason: null },
    ]);
    const log = (await readEventsAfter(bed.db.pool, threadId, 0, 100)).map((e) => e.event);
    expect(log).toContain("tool.approval.expired");
  });

  it("a later message waits behind it past the patience for lost turns, without presuming it lost", async () => {
    const { threadId, runId } = await awaitingTurn();
    const waits: Wait[] = [];
    bed.model.script({ text: "Next." });
    const later = await execute(chatTurn(), chatEvent({ threadId, content: "And then?" }), {
      waits: async (wait) => {
        waits.push(wait);
        if (waits.length < PATIENCE_ROUNDS + 3) return null;
        // Still running, never abandoned; the user stops it at last, which frees the thread.
        expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([{ run_id: runId, status: "running" }]);
        await stopRunningTurn(bed.db.pool, { threadId, userId: "user-1", agentName: "assistant" });
        return null;
      },
    });
    expect(later.error).toBeUndefined();
    expect(waits.every((w) => w.match?.value === runId)).toBe(true);
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([{ run_id: runId, status: "stopped" }]);
    expect(await listApprovals(bed.db.pool, { threadId, userId: "user-1" })).toMatchObject([
      { status: "denied", decidedBy: "stop" },
    ]);
  });

  it("the lost-run reconciler does not find it overdue before its expiry, and gives it the whole deadline after the decision", async () => {
    const { threadId, runId, approvalId } = await awaitingTurn();
    const overdue = async (minutesFromNow: number) =>
      (
        await longRunningTurns(bed.db.pool, {
          now: new Date(Date.now() + minutesFromNow * 60_000),
          checkAfterSeconds: 60,
          deadlineMinutes: 10,
          limit: 1000,
        })
      ).find((turn) => turn.runId === runId)?.overdue;
    expect(await overdue(120)).toBe(false);
    await decideApproval(bed.db.pool, { threadId, userId: "user-1", approvalId, decision: "approve" });
    expect(await overdue(5)).toBe(false);
    expect(await overdue(11)).toBe(true);
  });
});
