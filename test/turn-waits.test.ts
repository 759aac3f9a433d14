import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createTurnCancellation } from "../src/functions/turn-lifecycle.js";
import { InngestExecutionEngine } from "inngest/internals";
import { beginTurn } from "../src/history/store.js";
import { storeModelTitle } from "../src/history/titles.js";
import { PATIENCE_ROUNDS, roundTimeout } from "../src/history/turn-waits.js";
import { ABANDONED_TURN_ERROR } from "../src/history/turns.js";
import { execute, type Execution, type SentEvent, StepFault, type Wait } from "./helpers/engine.js";
import {
  chatEvent,
  conversation,
  scriptedModel,
  threadRows,
  threadWithRunningTurn as runningTurnFixture,
  turnsOf,
} from "./helpers/fixtures.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const hashId = (id: string) => InngestExecutionEngine._internals.hashId(id);
const deps = () => ({ db: bed.db.pool, model: scriptedModel(bed.model) });

const finishedEvent = (run: Execution) =>
  run.sentEvents.find((e) => e.name === "threadline/turn.finished" && e.data.runId === run.runId);
const waitSteps = (run: Execution) => run.stepIds.filter((id) => id.startsWith("history.wait-for-turn"));
const neverWaits = async (wait: Wait): Promise<SentEvent | null> => {
  throw new Error(`the turn was not expected to wait, but waited for ${wait.match?.value}`);
};

async function threadWithRunningTurn(chatTurn: ReturnType<typeof createChatTurn>) {
  const { event: earlier, ...running } = await runningTurnFixture(
    bed.db.pool,
    chatTurn,
    bed.model,
    "I like compilers.",
  );
  return { ...running, earlier };
}

describe("a turn waits for the earlier turn of its thread", () => {
  it("whose inference takes five rounds: it answers after it, seeing its answer, in one execution (no retry spent)", async () => {
    const chatTurn = createChatTurn(deps());
    const { threadId, earlier, attempt } = await threadWithRunningTurn(chatTurn);
    const later = chatEvent({ threadId, content: "What do I like?" });

    // Virtual time: each wait is one round (roundTimeout); the first four time out while the
    // earlier turn's retry backs off, and in the fifth round that retry answers.
    const waits: Wait[] = [];
    let earlierRetry: Execution | undefined;
    const run = await execute(chatTurn, later, {
      waits: async (wait) => {
        waits.push(wait);
        if (waits.length < 5) return null;
        bed.model.script({ text: "Compilers are great." }, { text: "You like compilers." });
        earlierRetry = await execute(chatTurn, earlier, {
          memo: attempt.memo,
          runId: attempt.runId,
          waits: neverWaits,
        });
        return finishedEvent(earlierRetry) ?? null;
      },
    });

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "You like compilers." });
    expect(earlierRetry?.error).toBeUndefined();
    expect(waits).toHaveLength(5);
    expect(
      waits.every(
        (w, i) =>
          w.timeout === roundTimeout(i + 1) &&
          w.event === "threadline/turn.finished" &&
          w.match?.value === attempt.runId,
      ),
    ).toBe(true);
    expect(waitSteps(run)).toEqual([
      "history.wait-for-turn",
      "history.wait-for-turn.2",
      "history.wait-for-turn.3",
      "history.wait-for-turn.4",
      "history.wait-for-turn.5",
    ]);
    expect(bed.model.requests.at(-1)!.messages.slice(-5)).toEqual([
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "Hello, Ada." },
      { role: "user", content: "I like compilers." },
      { role: "assistant", content: "Compilers are great." },
      { role: "user", content: "What do I like?" },
    ]);
    expect(await turnsOf(bed.db.pool, later.data.messageId)).toMatchObject([
      { run_id: run.runId, status: "completed" },
    ]);
  });

  it("that finishes between the lookup and the start of the wait: the round's timeout and the next lookup catch it", async () => {
    const chatTurn = createChatTurn(deps());
    const { threadId, earlier, attempt } = await threadWithRunningTurn(chatTurn);
    const later = chatEvent({ threadId, content: "What do I like?" });

    const waits: Wait[] = [];
    const run = await execute(chatTurn, later, {
      waits: async (wait) => {
        waits.push(wait);
        // The earlier turn's event goes out before this wait exists: Inngest would not deliver it.
        bed.model.script({ text: "Compilers are great." }, { text: "You like compilers." });
        expect(
          (await execute(chatTurn, earlier, { memo: attempt.memo, runId: attempt.runId, waits: neverWaits })).error,
        ).toBeUndefined();
        return null;
      },
    });

    expect(run.error).toBeUndefined();
    expect(waits).toHaveLength(1);
    expect(run.stepIds.filter((id) => id.startsWith("history.find-earlier-turn"))).toEqual([
      "history.find-earlier-turn",
      "history.find-earlier-turn.2",
    ]);
    expect(bed.model.requests.at(-1)!.messages.slice(-3)).toEqual([
      { role: "user", content: "I like compilers." },
      { role: "assistant", content: "Compilers are great." },
      { role: "user", content: "What do I like?" },
    ]);
  });

  it("whose run was lost (never finishes): after PATIENCE_ROUNDS rounds it is recorded as failed with a reason, and the later turn answers", async () => {
    const chatTurn = createChatTurn(deps());
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const lost = { id: randomUUID(), runId: `lost-${randomUUID()}` };
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: lost.id, text: "Lost in transit." },
      turn: { runId: lost.runId, kind: "chat" },
    });

    const waits: Wait[] = [];
    bed.model.script({ text: "Still here." });
    const run = await execute(chatTurn, chatEvent({ threadId, content: "Anyone there?" }), {
      waits: async (wait) => (waits.push(wait), null),
    });

    expect(run.error).toBeUndefined();
    expect(waits).toHaveLength(PATIENCE_ROUNDS);
    expect(await turnsOf(bed.db.pool, lost.id)).toMatchObject([
      { run_id: lost.runId, status: "failed", error: ABANDONED_TURN_ERROR },
    ]);
    expect(run.result).toMatchObject({ status: "completed", answer: "Still here." });
  });

  it("a regenerate of a message whose chat turn is still running waits for it, then makes the next variant current", async () => {
    const chatTurn = createChatTurn(deps());
    const regenerate = createRegenerate(deps());
    const { threadId, earlier, attempt } = await threadWithRunningTurn(chatTurn);

    const waits: Wait[] = [];
    const run = await execute(
      regenerate,
      { name: "chat/message.regenerate", data: { threadId, messageId: earlier.data.messageId, userId: "user-1" } },
      {
        waits: async (wait) => {
          waits.push(wait);
          bed.model.script({ text: "Compilers are great." }, { text: "Compilers are wonderful." });
          const retried = await execute(chatTurn, earlier, {
            memo: attempt.memo,
            runId: attempt.runId,
            waits: neverWaits,
          });
          return finishedEvent(retried) ?? null;
        },
      },
    );

    expect(run.error).toBeUndefined();
    expect(waits.map((w) => w.match?.value)).toEqual([attempt.runId]);
    expect(run.result).toMatchObject({ status: "completed", answer: "Compilers are wonderful." });
    const answers = (await threadRows(bed.db.pool, threadId)).filter((r) => r.answers === earlier.data.messageId);
    expect(answers.map((r) => [r.variant, r.on_path])).toEqual([
      [1, false],
      [2, true],
    ]);
  });

  it("a cancelled run is recorded as cancelled and releases its thread at once: the next message is answered without waiting", async () => {
    const chatTurn = createChatTurn(deps());
    const cancellation = createTurnCancellation(deps());
    const { threadId, earlier, attempt } = await threadWithRunningTurn(chatTurn);

    const cancelled = await execute(cancellation, {
      name: "inngest/function.cancelled",
      data: { function_id: "threadline-chat-turn", run_id: attempt.runId },
    });
    expect(cancelled.error).toBeUndefined();
    expect(cancelled.sentEvents).toEqual([
      expect.objectContaining({
        name: "threadline/turn.finished",
        data: { threadId, runId: attempt.runId, messageId: earlier.data.messageId, status: "cancelled" },
      }),
    ]);
    expect(await turnsOf(bed.db.pool, earlier.data.messageId)).toMatchObject([
      { status: "cancelled", error: "The run was cancelled." },
    ]);

    bed.model.script({ text: "You told me your name: Ada." });
    const next = await execute(chatTurn, chatEvent({ threadId, content: "What do you know?" }), { waits: neverWaits });
    expect(next.error).toBeUndefined();
    expect(waitSteps(next)).toEqual([]);
    expect(next.result).toMatchObject({ status: "completed" });
    // A cancellation after the turn finished changes nothing.
    const late = await execute(cancellation, {
      name: "inngest/function.cancelled",
      data: { function_id: "threadline-chat-turn", run_id: next.runId },
    });
    expect(late.result).toMatchObject({ status: "no running turn" });
    expect(late.sentEvents).toEqual([]);
  });

  it("the cancellation handler listens for the chat-turn and regenerate functions only", () => {
    const { triggers } = (
      createTurnCancellation(deps()) as unknown as { opts: { triggers: { event: string; if: string }[] } }
    ).opts;
    expect(triggers).toEqual([
      {
        event: "inngest/function.cancelled",
        if: 'event.data.function_id == "threadline-chat-turn" || event.data.function_id == "threadline-regenerate"',
      },
    ]);
  });

  it.each([
    ["", false],
    [", with chunk logging", true],
  ])(
    "a duplicate run of the same message waits for the first, then finds the message answered and skips: one model call%s",
    async (_, eventLog) => {
      const chatTurn = createChatTurn({ ...deps(), eventLog });
      const { threadId } = await conversation(chatTurn, bed.model, [["Hello.", "Hi."]]);
      const event = chatEvent({ threadId, content: "Tell me a fact." });
      bed.model.script({ text: "Octopuses have three hearts.", delayMs: 300 });

      const first = execute(chatTurn, event);
      while (bed.model.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const duplicate = await execute(chatTurn, event);

      expect(duplicate.error).toBeUndefined();
      expect(duplicate.result).toMatchObject({ status: "skipped" });
      expect(waitSteps(duplicate).length).toBeGreaterThan(0);
      expect((await first).result).toMatchObject({ status: "completed", answer: "Octopuses have three hearts." });
      expect(bed.model.requests).toHaveLength(1);
      expect((await threadRows(bed.db.pool, threadId)).filter((r) => r.kind === "agent" && r.on_path)).toHaveLength(2);
      expect((await turnsOf(bed.db.pool, event.data.messageId)).map((t) => t.status).sort()).toEqual([
        "completed",
        "skipped",
      ]);
      expect(finishedEvent(duplicate)?.data).toMatchObject({ status: "skipped" });
      // A client that followed the duplicate's stream sees why it ended, once, and nothing after
      // (the lookup that found the message answered logged it; the network's chunks come later).
      const { rows } = await bed.db.pool.query<{ event: string; data: { status?: string } }>(
        "SELECT event, data FROM thread_events WHERE run_id = $1 ORDER BY id",
        [duplicate.runId],
      );
      expect(rows.map((r) => [r.event, r.data.status])).toEqual([
        ["turn.skipped", undefined],
        ["stream.ended", "skipped"],
      ]);
    },
  );
});

describe("a turn's finish is announced when a later turn may wait for it", () => {
  it("on a titled thread, a turn that finishes while a later one waits announces it, releasing the wait; the later turn, with none after it, announces nothing", async () => {
    const chatTurn = createChatTurn(deps());
    const { threadId, earlier, attempt } = await threadWithRunningTurn(chatTurn);
    // Titled: no title is wanted, so only the waiting turn makes the earlier one announce its finish.
    expect(await storeModelTitle(bed.db.pool, threadId, "Ada and compilers")).toEqual({ stored: true });
    const later = chatEvent({ threadId, content: "What do I like?" });

    const waits: Wait[] = [];
    let earlierRetry: Execution | undefined;
    const run = await execute(chatTurn, later, {
      waits: async (wait) => {
        waits.push(wait);
        bed.model.script({ text: "Compilers are great." }, { text: "You like compilers." });
        earlierRetry = await execute(chatTurn, earlier, {
          memo: attempt.memo,
          runId: attempt.runId,
          waits: neverWaits,
        });
        return finishedEvent(earlierRetry) ?? null;
      },
    });

    expect(run.error).toBeUndefined();
    expect(finishedEvent(earlierRetry!)?.data).toMatchObject({
      status: "completed",
      messageId: earlier.data.messageId,
    });
    // Released by that event in its first round, then the lookup after it finds the thread clear.
    expect(waits.map((w) => w.match?.value)).toEqual([attempt.runId]);
    expect(run.result).toMatchObject({ status: "completed", answer: "You like compilers." });
    expect(run.sentEvents.map((e) => e.name)).not.toContain("threadline/turn.finished");
  });

  it("a replay takes the path its memoized start chose: no lookup when it found none ahead, a lookup when it predates that answer", async () => {
    const chatTurn = createChatTurn(deps());
    const { threadId } = await conversation(chatTurn, bed.model, [["My name is Ada.", "Hello, Ada."]]);
    const first = (await threadRows(bed.db.pool, threadId)).find((r) => r.kind === "user")!;
    const later = chatEvent({ threadId, content: "What is my name?" });
    const cutOff = async (id: string) => {
      if (id === "generate-agent-ids-0") throw new StepFault("cut off");
    };
    const attempt = await execute(chatTurn, later, { beforeStep: cutOff });
    // None ahead: the window came with the message, no history.get.
    expect(attempt.stepIds).toEqual(["generate-network-id", "history.append-user-message", "generate-agent-ids-0"]);

    // A start memoized before the statement said whether a turn was ahead (nor read the window): the replay looks.
    const begun = hashId("history.append-user-message");
    const predating = attempt.memo.map((step) => {
      if (step.id !== begun) return step;
      const { turnAhead: _, history: __, ...data } = step.handler() as Record<string, unknown>;
      return { ...step, handler: () => data };
    });
    const looked = await execute(chatTurn, later, { memo: predating, runId: attempt.runId, beforeStep: cutOff });
    expect(looked.stepIds).toContain("history.find-earlier-turn");
    expect(looked.stepIds).toContain("history.get");

    // A regenerate of the first message begins now and stays running, ahead of the later message.
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: first.id, text: "My name is Ada." },
      turn: { runId: `regenerate-${randomUUID()}`, kind: "regenerate" },
    });
    bed.model.script({ text: "Your name is Ada." });
    const replayed = await execute(chatTurn, later, { memo: attempt.memo, runId: attempt.runId, waits: neverWaits });
    expect(replayed.error).toBeUndefined();
    expect(replayed.stepIds.filter((id) => id.startsWith("history.find-earlier-turn"))).toEqual([]);
    expect(replayed.result).toMatchObject({ status: "completed", answer: "Your name is Ada." });
  });
});

describe("a follow-up stored before its thread's first message (the follow-up names the thread by the first message's id)", () => {
  const pair = () => {
    const first = chatEvent({ content: "My name is Ada." });
    const followUp = chatEvent({ threadId: first.data.messageId, content: "What is my name?" });
    return { first, followUp, threadId: first.data.messageId };
  };

  it("while the follow-up's turn runs, the first message's turn waits for it, then reads its answer", async () => {
    const chatTurn = createChatTurn(deps());
    const { first, followUp, threadId } = pair();
    // The follow-up is stored first (its thread is created with it) and its turn is running: its inference failed once.
    bed.model.script({ status: 503, body: { error: { message: "The engine is currently overloaded" } } });
    const followUpAttempt = await execute(chatTurn, followUp);
    expect(followUpAttempt.error).toBeDefined();
    bed.model.reset();

    const waits: Wait[] = [];
    let followUpRetry: Execution | undefined;
    const run = await execute(chatTurn, first, {
      waits: async (wait) => {
        waits.push(wait);
        bed.model.script({ text: "I do not know yet." }, { text: "Hello, Ada." });
        followUpRetry = await execute(chatTurn, followUp, {
          memo: followUpAttempt.memo,
          runId: followUpAttempt.runId,
          attempt: 1,
          waits: neverWaits,
        });
        return finishedEvent(followUpRetry) ?? null;
      },
    });

    expect(run.error).toBeUndefined();
    expect(followUpRetry?.error).toBeUndefined();
    expect(waits.map((w) => w.match?.value)).toEqual([followUpAttempt.runId]);
    expect(run.stepIds).toEqual(expect.arrayContaining(["history.find-earlier-turn", "history.get"]));
    // The first message is the thread's second: the model saw the follow-up and its answer before it.
    expect(bed.model.requests.at(-1)!.messages.slice(-3)).toEqual([
      { role: "user", content: "What is my name?" },
      { role: "assistant", content: "I do not know yet." },
      { role: "user", content: "My name is Ada." },
    ]);
    expect((await threadRows(bed.db.pool, threadId)).filter((r) => r.kind === "user").map((r) => r.id)).toEqual([
      followUp.data.messageId,
      threadId,
    ]);
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([{ run_id: run.runId, status: "completed" }]);
  });

  it("after the follow-up's turn finished, the first message's turn reads its answer (no wait)", async () => {
    const chatTurn = createChatTurn(deps());
    const { first, followUp } = pair();
    bed.model.script({ text: "I do not know yet." });
    expect((await execute(chatTurn, followUp)).error).toBeUndefined();

    bed.model.script({ text: "Hello, Ada." });
    const run = await execute(chatTurn, first, { waits: neverWaits });
    expect(run.error).toBeUndefined();
    expect(bed.model.requests.at(-1)!.messages.slice(-3)).toEqual([
      { role: "user", content: "What is my name?" },
      { role: "assistant", content: "I do not know yet." },
      { role: "user", content: "My name is Ada." },
    ]);
  });

  it("in the usual order, the follow-up's turn waits for the first message's and reads its answer", async () => {
    const chatTurn = createChatTurn(deps());
    const { first, followUp } = pair();
    bed.model.script({ status: 503, body: { error: { message: "The engine is currently overloaded" } } });
    const firstAttempt = await execute(chatTurn, first);
    expect(firstAttempt.error).toBeDefined();
    bed.model.reset();

    const run = await execute(chatTurn, followUp, {
      waits: async () => {
        bed.model.script({ text: "Hello, Ada." }, { text: "Your name is Ada." });
        const retry = await execute(chatTurn, first, {
          memo: firstAttempt.memo,
          runId: firstAttempt.runId,
          attempt: 1,
          waits: neverWaits,
        });
        return finishedEvent(retry) ?? null;
      },
    });
    expect(run.result).toMatchObject({ status: "completed", answer: "Your name is Ada." });
    expect(bed.model.requests.at(-1)!.messages.slice(-3)).toEqual([
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "Hello, Ada." },
      { role: "user", content: "What is my name?" },
    ]);
  });
});

describe("idempotency", () => {
  it("POST /api/chat sends the same message with the same event id, which Inngest keeps once", async () => {
    const sent: { id?: string }[] = [];
    const { app } = createTestApp(bed.db.pool, {
      sendEvent: async (event) => (sent.push(event), { ids: [event.id ?? ""] }),
    });
    const body = JSON.stringify({ messageId: randomUUID(), content: "Sent twice by a retrying client." });
    for (let i = 0; i < 2; i++) {
      expect(
        (await app.request("/api/chat", { method: "POST", headers: await headersFor("user-1"), body })).status,
      ).toBe(202);
    }
    expect(sent).toHaveLength(2);
    expect(sent[0]!.id).toMatch(/^chat-message-/);
    expect(sent[1]!.id).toBe(sent[0]!.id);
  });

  it("a chat turn is keyed by its user and message id (and the run a re-sent message follows), a regenerate by its user and request id (each event its own request without one)", () => {
    const options = (fn: unknown) => (fn as { opts: { idempotency?: string } }).opts.idempotency;
    expect(options(createChatTurn(deps()))).toBe(
      'has(event.data.resentAfter) ? event.data.userId + ":" + event.data.messageId + ":" + event.data.resentAfter : event.data.userId + ":" + event.data.messageId',
    );
    expect(options(createRegenerate(deps()))).toBe(
      'has(event.data.requestId) ? event.data.userId + ":" + event.data.requestId : event.id',
    );
  });
});
