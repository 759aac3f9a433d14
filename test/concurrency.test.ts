import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createPool } from "../src/platform/database.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, ensureThread, storeAnswer } from "../src/history/store.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

describe("many writers appending to one thread at once", () => {
  it("20 appends from 20 connections get the sequence 1..20 with no gap and no duplicate", async () => {
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, "user-1");
    const pools = Array.from({ length: 20 }, () => createPool(bed.db.url));
    try {
      // Each pool opens its own connection first, so the 20 transactions really overlap.
      await Promise.all(pools.map((pool) => pool.query("SELECT 1")));
      const starts = await Promise.all(
        pools.map((pool, i) =>
          beginTurn(pool, {
            threadId,
            userId: "user-1",
            message: { id: randomUUID(), text: `message ${i}` },
            turn: { runId: `run-${randomUUID()}`, kind: "chat" },
          }),
        ),
      );
      const expected = Array.from({ length: 20 }, (_, i) => i + 1);
      expect(starts.map((s) => s.messageSeq).sort((a, b) => a - b)).toEqual(expected);
      expect((await threadRows(bed.db.pool, threadId)).map((r) => r.seq)).toEqual(expected);
      expect(starts.every((s) => s.status === "running" && s.variant === 1)).toBe(true);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it("two regenerates of one message started before either stores its answer get different variants", async () => {
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, "user-1");
    const message = { id: threadId, text: "Hello" };
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message,
      turn: { runId: `run-${randomUUID()}`, kind: "chat" },
    });

    const pools = [createPool(bed.db.url), createPool(bed.db.url)];
    try {
      const starts = await Promise.all(
        pools.map((pool) =>
          beginTurn(pool, {
            threadId,
            userId: "user-1",
            message,
            turn: { runId: `run-${randomUUID()}`, kind: "regenerate", eventId: randomUUID() },
          }),
        ),
      );
      expect(starts.map((s) => s.variant).sort()).toEqual([2, 3]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it("two runs of a chat turn on one unanswered message share its first variant: one answer is stored, the other run stores nothing", async () => {
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, "user-1");
    const message = { id: threadId, text: "Hello" };
    const runs = [`run-${randomUUID()}`, `run-${randomUUID()}`];
    const starts = await Promise.all(
      runs.map((runId) =>
        beginTurn(bed.db.pool, { threadId, userId: "user-1", message, turn: { runId, kind: "chat" } }),
      ),
    );
    expect(starts.map((s) => [s.status, s.variant])).toEqual([
      ["running", 1],
      ["running", 1],
    ]);

    const stored = [];
    for (const [i, runId] of runs.entries()) {
      const results = [
        {
          id: resultId(threadId, 1, 0),
          agentName: "assistant",
          content: {
            output: [{ type: "text" as const, role: "assistant" as const, content: `answer ${i}` }],
            toolCalls: [],
          },
        },
      ];
      stored.push(
        await storeAnswer(bed.db.pool, {
          threadId,
          userId: "user-1",
          runId,
          messageId: threadId,
          messageSeq: 1,
          variant: 1,
          detachLaterTurns: false,
          results,
        }),
      );
    }

    // The first store found the other run of the message unfinished (it may wait for this one); the second, none.
    expect(stored).toEqual([
      { inserted: 1, status: "completed", laterUnfinished: true, untitled: true },
      { inserted: 0, status: "completed", laterUnfinished: false, untitled: true },
    ]);
    const answers = (await threadRows(bed.db.pool, threadId)).filter((r) => r.kind === "agent");
    expect(
      answers.map((r) => [r.variant, r.on_path, (r.content as { output: { content: string }[] }).output[0]!.content]),
    ).toEqual([[1, true, "answer 0"]]);
  });
});

describe("two chat turns on one thread", () => {
  it("hold no per-thread concurrency key (an in-flight gateway inference would hold it after a stop): the durable wait orders them", () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
    for (const fn of [createChatTurn(deps), createRegenerate(deps)]) {
      expect((fn as unknown as { opts: { concurrency?: unknown } }).opts.concurrency).toBeUndefined();
    }
  });

  it("executed one after the other, the second's model request contains the first's answer", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const first = chatEvent({ content: "My name is Ada." });
    const second = chatEvent({ threadId: first.data.messageId, content: "What is my name?" });
    bed.model.script({ text: "Nice to meet you, Ada." }, { text: "Your name is Ada." });

    expect((await execute(chatTurn, first)).error).toBeUndefined();
    expect((await execute(chatTurn, second)).error).toBeUndefined();

    expect(bed.model.requests[1]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "Nice to meet you, Ada." },
      { role: "user", content: "What is my name?" },
    ]);
  });

  it("overlapping (the first waiting on its inference), the second waits for the first's answer instead of reading past it, spending no retry", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const first = chatEvent({ content: "My name is Grace." });
    bed.model.script({ text: "Hello, Grace." });
    expect((await execute(chatTurn, first)).error).toBeUndefined();
    const thread = first.data.messageId;
    const slow = chatEvent({ threadId: thread, content: "I like compilers." });
    const next = chatEvent({ threadId: thread, content: "What do I like?" });
    bed.model.reset();
    bed.model.script({ text: "Compilers are great.", delayMs: 400 }, { text: "You like compilers." });

    // No concurrency key holds the thread: while the first turn waits on the model, the second turn runs.
    const firstRun = execute(chatTurn, slow);
    while (bed.model.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const waiting = await execute(chatTurn, next);

    // One execution, no error: the wait is a step.waitForEvent, released by the first turn's finish.
    expect(waiting.error).toBeUndefined();
    expect(waiting.stepIds).toContain("history.wait-for-turn");
    const firstDone = await firstRun;
    expect(firstDone.error).toBeUndefined();
    expect(firstDone.sentEvents).toContainEqual(
      expect.objectContaining({
        name: "threadline/turn.finished",
        data: expect.objectContaining({ runId: firstDone.runId }),
      }),
    );

    expect(bed.model.requests).toHaveLength(2);
    expect(bed.model.requests[1]!.messages.slice(-3)).toEqual([
      { role: "user", content: "I like compilers." },
      { role: "assistant", content: "Compilers are great." },
      { role: "user", content: "What do I like?" },
    ]);
  });
});
