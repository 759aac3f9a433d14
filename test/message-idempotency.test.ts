import { randomUUID } from "node:crypto";
import { createState } from "@inngest/agent-kit";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { chatMessageRegenerate, inngest } from "../inngest.config.js";
import { createChatNetwork } from "../src/agents/network.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createTurnHistory } from "../src/history/adapter.js";
import { resolveHistoryPolicy } from "../src/history/policy.js";
import type pg from "pg";
import { createPool } from "../src/platform/database.js";
import { beginTurn, checkSendable } from "../src/history/store.js";
import { execute } from "./helpers/engine.js";
import { withPausedFunction } from "./helpers/paused-function.js";
import { chatEvent, conversation, countRows, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let sent: { name: string; data: Record<string, unknown> }[];
let app: ReturnType<typeof createTestApp>["app"];

beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  app = createTestApp(bed.db.pool, {
    sendEvent: async (event) => (sent.push(event), { ids: [`evt-${sent.length}`] }),
  }).app;
});
beforeEach(() => {
  sent = [];
});

/** POST /api/chat as user-1 (the caller is the token's subject, never a body field). */
const post = async (body: unknown) =>
  app.request("/api/chat", { method: "POST", headers: await headersFor("user-1"), body: JSON.stringify(body) });

/** A thread holding "What is 2+2?" answered "4". */
async function answeredQuestion() {
  const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["What is 2+2?", "4"]]);
  return { threadId, messageId: messageIds[0]! };
}

describe("a message id names one message", () => {
  it("the same id with different text fails the run without retries, writing nothing and asking no model", async () => {
    const { threadId, messageId } = await answeredQuestion();
    const before = await countRows(bed.db.pool);
    bed.model.script({ text: "Paris" });

    const run = await execute(chatTurn, chatEvent({ threadId, messageId, content: "What is the capital of France?" }));

    expect(run.error).toMatchObject({
      name: "NonRetriableError",
      message: expect.stringMatching(/already sent with different text/),
    });
    expect(bed.model.requests).toHaveLength(0);
    expect(await countRows(bed.db.pool)).toEqual(before);
    expect((await threadRows(bed.db.pool, threadId)).map((r) => [r.kind, r.content])).toEqual([
      ["user", { text: "What is 2+2?" }],
      ["agent", expect.objectContaining({ output: [expect.objectContaining({ content: "4" })] })],
    ]);
  });

  it("an id already used in another user's thread (or another thread) is refused, writing no thread row", async () => {
    const { messageId } = await answeredQuestion();
    const second = chatEvent({ threadId: messageId, content: "And 3+3?" });
    bed.model.script({ text: "6" });
    expect((await execute(chatTurn, second)).error).toBeUndefined();
    const before = await countRows(bed.db.pool);

    // Mallory starts a "new thread" with the id of a message in Alice's thread: it would be named after it.
    const stolen = await execute(
      chatTurn,
      chatEvent({ userId: "mallory", messageId: second.data.messageId, content: "And 3+3?" }),
    );
    expect(stolen.error).toMatchObject({
      name: "NonRetriableError",
      message: expect.stringMatching(/already used by another message/),
    });
    // Alice herself reusing it in another thread is refused the same way.
    const otherThread = randomUUID();
    await execute(chatTurn, chatEvent({ messageId: otherThread, content: "new thread" }));
    const reused = await execute(
      chatTurn,
      chatEvent({ threadId: otherThread, messageId: second.data.messageId, content: "And 3+3?" }),
    );
    expect(reused.error).toMatchObject({ message: expect.stringMatching(/already used by another message/) });

    const after = await countRows(bed.db.pool);
    expect(after.threads).toBe(before.threads + 1);
    expect(
      (await bed.db.pool.query("SELECT count(*)::int AS n FROM threads WHERE user_id = 'mallory'")).rows[0].n,
    ).toBe(0);
  });

  it("two runs of a new thread's first message at once, on two connections: one thread, one message, both turns on variant 1", async () => {
    const messageId = randomUUID();
    const pools = [createPool(bed.db.url), createPool(bed.db.url)];
    try {
      await Promise.all(pools.map((pool) => pool.query("SELECT 1")));
      const starts = await Promise.all(
        pools.map((pool, i) =>
          beginTurn(pool, {
            threadId: messageId,
            userId: "user-1",
            message: { id: messageId, text: "Hello" },
            turn: { runId: `run-${i}-${messageId}`, kind: "chat" },
          }),
        ),
      );
      expect(starts.map((s) => [s.messageSeq, s.status, s.variant, s.text])).toEqual([
        [1, "running", 1, "Hello"],
        [1, "running", 1, "Hello"],
      ]);
      expect((await threadRows(bed.db.pool, messageId)).map((r) => r.id)).toEqual([messageId]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it("a first run that reads no thread, then finds the message another run stored meanwhile, answers it instead of refusing", async () => {
    // The window is between the begin's first two reads (the thread, then the message): a run
    // paused there while another run stores the thread and the message.
    const pause = { name: "threadline_begin_turn", at: "  SELECT * INTO v_message", when: "p_run_id LIKE 'paused-%'" };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, release }) => {
      const messageId = randomUUID();
      const begin = (on: pg.Pool, runId: string) =>
        beginTurn(on, {
          threadId: messageId,
          userId: "user-1",
          message: { id: messageId, text: "Hello" },
          turn: { runId, kind: "chat" },
        });
      const paused = begin(pools[0], `paused-${messageId}`);
      await reachedPause();
      const first = await begin(pools[1], `run-${messageId}`);
      await release();

      expect([first, await paused].map((s) => [s.messageSeq, s.status, s.variant, s.text])).toEqual([
        [1, "running", 1, "Hello"],
        [1, "running", 1, "Hello"],
      ]);
      expect((await threadRows(pool, messageId)).map((r) => r.id)).toEqual([messageId]);
    });
  });

  it("another user's thread is refused before anything is written: no thread, message or turn", async () => {
    const { threadId } = await answeredQuestion();
    const before = await countRows(bed.db.pool);
    const run = await execute(chatTurn, chatEvent({ userId: "mallory", threadId, content: "Mine now" }));
    expect(run.error).toMatchObject({
      name: "NonRetriableError",
      message: expect.stringMatching(/belongs to another user/),
    });
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("the model receives the stored words of the message, whatever the run's input carries", async () => {
    const { threadId, messageId } = await answeredQuestion();
    bed.model.script({ text: "Four." });
    // A turn whose input text differs from the stored message (as a stale regenerate could): the stored text is answered.
    const stale = inngest.createFunction(
      { id: "stale-input", triggers: [chatMessageRegenerate], retries: 0 },
      async ({ event, runId }) => {
        const history = createTurnHistory(bed.db.pool, {
          userId: event.data.userId,
          messageId: event.data.messageId,
          runId,
          kind: "regenerate",
          eventId: event.id,
          policy: resolveHistoryPolicy({}),
        });
        const network = createChatNetwork({ model: scriptedModel(bed.model), history });
        await network.run(
          { id: event.data.messageId, content: "What is the capital of France?", role: "user" },
          { state: createState({}, { threadId }) },
        );
      },
    );
    const run = await execute(stale, {
      name: "chat/message.regenerate",
      data: { threadId, messageId, userId: "user-1" },
    });
    expect(run.error).toBeUndefined();
    expect(bed.model.requests[0]!.messages.at(-1)).toEqual({ role: "user", content: "What is 2+2?" });
  });
});

describe("POST /api/chat checks the message before sending it", () => {
  it("same id, different text: 409 and no event, no change", async () => {
    const { threadId, messageId } = await answeredQuestion();
    const before = await countRows(bed.db.pool);
    const response = await post({ threadId, messageId, content: "What is the capital of France?" });
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({
      code: "message_conflict",
      error: expect.stringMatching(/already sent with different text/),
    });
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("same id, same text: 202, the event is sent again, and its run stores nothing new and asks no model", async () => {
    const { threadId, messageId } = await answeredQuestion();
    const before = await countRows(bed.db.pool);
    const body = { threadId, messageId, content: "What is 2+2?" };
    expect((await post(body)).status).toBe(202);
    expect(sent).toHaveLength(1);
    const rerun = await execute(chatTurn, { name: "chat/message.sent", data: sent[0]!.data });
    expect(rerun.result).toMatchObject({ status: "skipped" });
    expect(bed.model.requests).toHaveLength(0);
    expect((await countRows(bed.db.pool)).messages).toBe(before.messages);
  });

  it("another user's thread is refused; an unknown thread id is a new thread (the turn creates it); a message id used elsewhere is refused", async () => {
    const { threadId, messageId } = await answeredQuestion();
    await expect(
      checkSendable(bed.db.pool, { threadId, messageId: randomUUID(), userId: "mallory", content: "hi" }),
    ).rejects.toMatchObject({ code: "thread_not_owned" });
    await expect(
      checkSendable(bed.db.pool, { threadId: randomUUID(), messageId: randomUUID(), userId: "user-1", content: "hi" }),
    ).resolves.toEqual({ refusedRunId: null });
    await expect(
      checkSendable(bed.db.pool, { messageId, userId: "mallory", content: "What is 2+2?" }),
    ).rejects.toMatchObject({ code: "thread_not_owned" });
    const newThread = randomUUID();
    await expect(
      checkSendable(bed.db.pool, { messageId: newThread, userId: "user-1", content: "hi" }),
    ).resolves.toEqual({ refusedRunId: null });
    await expect(
      checkSendable(bed.db.pool, { threadId: newThread, messageId: newThread, userId: "user-1", content: "hi" }),
    ).resolves.toEqual({ refusedRunId: null });
    const reply = (await threadRows(bed.db.pool, threadId)).find((r) => r.kind === "agent")!.id;
    await expect(
      checkSendable(bed.db.pool, { threadId, messageId: reply, userId: "user-1", content: "hi" }),
    ).rejects.toMatchObject({ code: "message_conflict" });
    expect(sent).toEqual([]);
  });
});
