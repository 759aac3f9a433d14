import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteUserCommand } from "../scripts/delete-user.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createExtractMemories } from "../src/functions/extract-memories.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { createThreadRetention } from "../src/functions/thread-retention.js";
import { createTitleThread } from "../src/functions/title-thread.js";
import { pruneTombstones } from "../src/history/threads.js";
import { cancels } from "./helpers/cancel-on.js";
import { execute, type SentEvent } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { startLiveApp, type LiveApp } from "./helpers/live-app.js";
import { gate } from "./helpers/model-server.js";
import { tableRowCounts } from "./helpers/table-rows.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: LiveApp;
let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;

beforeAll(async () => {
  app = await startLiveApp(bed.db.pool, bed.model);
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
});
afterAll(() => app?.close());

/** A request to the live app as a user (AUTH=dev: the header names the user). */
const call = (userId: string, method: string, path: string, body?: unknown) =>
  fetch(`${app.url}${path}`, {
    method,
    headers: { "X-Threadline-User": userId, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** Polls `done` until it holds (at most 10 seconds). */
async function until(done: () => boolean | Promise<boolean>, what: string) {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`not reached within 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const turnStatus = async (messageId: string) =>
  (await bed.db.pool.query<{ status: string }>("SELECT status FROM turns WHERE message_id = $1", [messageId])).rows[0]
    ?.status;

describe("deletion is final", () => {
  it("a thread deleted while its turn runs and a second message is queued: both runs are cancelled, and replaying every event of the thread afterwards re-creates nothing and calls no model", async () => {
    const userId = `user-${randomUUID()}`;
    const before = await tableRowCounts(bed.db.pool);
    const threadId = randomUUID();

    // The first turn is mid-answer (the model holds its reply); the second message waits behind it.
    const held = gate();
    bed.model.script({
      text: "Once upon a time",
      stream: { chunks: ["Once ", "upon a time"], holdAfter: { chunks: 1, gate: held } },
    });
    expect(
      (await call(userId, "POST", "/api/chat", { threadId, messageId: threadId, content: "Tell me a story." })).status,
    ).toBe(202);
    await held.reached;
    const second = randomUUID();
    expect(
      (await call(userId, "POST", "/api/chat", { threadId, messageId: second, content: "And another one." })).status,
    ).toBe(202);
    await until(
      async () => (await turnStatus(second)) === "running",
      "the second turn is recorded and waits for the first",
    );
    expect(bed.model.requests).toHaveLength(1);

    const deleted = await call(userId, "DELETE", `/api/threads/${threadId}`);
    expect(await deleted.json()).toEqual({ threadId, deleted: true, announced: true });
    held.release();
    const runs = app.runs.filter((run) => run.event.data.threadId === threadId);
    expect(runs).toHaveLength(2);
    await Promise.all(runs.map((run) => run.execution));
    expect(runs.map((run) => run.cancelled)).toEqual([true, true]);

    // Replays after the fact: each event again as a fresh run (a re-delivery, a replay from the
    // dashboard), the first one's as a new-thread message, and a regenerate of the first message.
    const replays = [
      ...runs.map((run) => run.event),
      chatEvent({ userId, messageId: threadId, content: "Tell me a story." }),
      chatEvent({ userId, threadId, content: "A message after the deletion." }),
    ];
    for (const event of replays) {
      const replay = await execute(chatTurn, event);
      expect(replay.error).toMatchObject({
        name: "NonRetriableError",
        message: expect.stringContaining(`Thread ${threadId} was deleted`),
      });
    }
    const regenerated = await execute(regenerate, {
      name: "chat/message.regenerate",
      data: { threadId, messageId: threadId, userId },
    });
    expect(regenerated.error).toMatchObject({ name: "NonRetriableError" });

    // Only the first turn's request, made before the deletion, ever reached the model.
    expect(bed.model.requests).toHaveLength(1);
    // Every table is as before the thread existed, but for the tombstone (an id and a time, no owner) and
    // the usage ledger, which keeps what the first turn's model call was billed if its usage arrived
    // before the deletion ended the stream (what was spent stays spent: docs/usage.md).
    const { usage_records: _spent, ...after } = await tableRowCounts(bed.db.pool);
    const { usage_records: _spentBefore, ...counted } = before;
    expect(after).toEqual({ ...counted, thread_tombstones: before.thread_tombstones! + 1 });
    const usage = await bed.db.pool.query("SELECT message_id FROM usage_records WHERE thread_id = $1", [threadId]);
    expect(usage.rows.length).toBeLessThanOrEqual(1);
    for (const row of usage.rows) expect(row).toEqual({ message_id: threadId });
    const { rows } = await bed.db.pool.query("SELECT * FROM thread_tombstones WHERE thread_id = $1", [threadId]);
    expect(Object.keys(rows[0]!).sort()).toEqual(["deleted_at", "thread_id"]);

    // The API refuses the id too, saying why.
    const recreated = await call(userId, "POST", "/api/threads", { id: threadId });
    expect(recreated.status).toBe(409);
    expect(await recreated.json()).toMatchObject({ code: "thread_deleted" });
  });

  it("the turn functions' cancelOn matches a deleted thread's chat and regenerate runs (existing and new threads) and every run of an erased user, and nothing else", () => {
    const threadId = randomUUID();
    const deletedEvent: SentEvent = { name: "thread/deleted", data: { threadId, userId: "ada", reason: "user" } };
    const onThread = chatEvent({ userId: "ada", threadId, content: "Hi" });
    const newThread = chatEvent({ userId: "ada", messageId: threadId, content: "Hi" });
    const otherThread = chatEvent({ userId: "ada", threadId: randomUUID(), content: "Hi" });
    const othersRun = chatEvent({ userId: "bob", threadId, content: "Hi" });
    const regenerateRun: SentEvent = {
      name: "chat/message.regenerate",
      data: { threadId, messageId: randomUUID(), userId: "ada" },
    };
    expect(cancels(chatTurn, onThread, deletedEvent)).toBe(true);
    expect(cancels(chatTurn, newThread, deletedEvent)).toBe(true);
    expect(cancels(regenerate, regenerateRun, deletedEvent)).toBe(true);
    expect(cancels(chatTurn, otherThread, deletedEvent)).toBe(false);
    expect(cancels(chatTurn, othersRun, deletedEvent)).toBe(false);

    const erased: SentEvent = { name: "user/deleted", data: { userId: "ada" } };
    expect(cancels(chatTurn, otherThread, erased)).toBe(true);
    expect(cancels(regenerate, regenerateRun, erased)).toBe(true);
    expect(cancels(chatTurn, othersRun, erased)).toBe(false);
  });

  it("a deleted thread's or erased user's summary, title and memory extraction runs are cancelled, so no retry sends its words to a model", () => {
    const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
    const threadId = randomUUID();
    const deletedEvent: SentEvent = { name: "thread/deleted", data: { threadId, userId: "ada", reason: "user" } };
    const erased: SentEvent = { name: "user/deleted", data: { userId: "ada" } };
    const summary: SentEvent = { name: "thread/summarize.requested", data: { threadId, userId: "ada", beforeSeq: 40 } };
    const extraction: SentEvent = {
      name: "memory/extract.requested",
      data: { threadId, userId: "ada", messageId: randomUUID() },
    };
    const finished: SentEvent = {
      name: "threadline/turn.finished",
      data: { threadId, runId: "run-1", messageId: randomUUID(), status: "completed" },
    };
    for (const [fn, trigger] of [
      [createSummarizeThread(deps), summary],
      [createExtractMemories(deps), extraction],
    ] as const) {
      expect(cancels(fn, trigger, deletedEvent), trigger.name).toBe(true);
      expect(cancels(fn, trigger, erased), trigger.name).toBe(true);
      expect(cancels(fn, trigger, { ...deletedEvent, data: { ...deletedEvent.data, threadId: randomUUID() } })).toBe(
        false,
      );
      expect(cancels(fn, trigger, { name: "user/deleted", data: { userId: "bob" } })).toBe(false);
    }
    // A turn's finish names no user: the title run goes with its thread (an erasure deletes each thread too).
    const titleThread = createTitleThread(deps);
    expect(cancels(titleThread, finished, deletedEvent)).toBe(true);
    expect(
      cancels(titleThread, finished, { ...deletedEvent, data: { ...deletedEvent.data, threadId: randomUUID() } }),
    ).toBe(false);
  });

  it("erasing a user announces each thread's deletion and the user's, and none of their threads can be re-created by their events", async () => {
    const userId = `user-${randomUUID()}`;
    const events = [chatEvent({ userId, content: "First thread" }), chatEvent({ userId, content: "Second thread" })];
    for (const event of events) {
      bed.model.script({ text: "Hello." });
      expect((await execute(chatTurn, event)).error).toBeUndefined();
    }
    const sent: SentEvent[] = [];
    const printed = await deleteUserCommand(["--user", userId], bed.db.pool, async (batch) => sent.push(...batch));
    expect(printed).toContain("Announced thread/deleted for each thread and user/deleted.");
    const threadIds = events.map((event) => event.data.messageId);
    expect(
      sent
        .filter((event) => event.name === "thread/deleted")
        .map((event) => event.data.threadId)
        .sort(),
    ).toEqual([...threadIds].sort());
    expect(sent.find((event) => event.name === "user/deleted")).toMatchObject({
      id: `user-deleted-${userId}`,
      data: { userId },
    });

    bed.model.reset();
    for (const event of events)
      expect((await execute(chatTurn, event)).error).toMatchObject({ name: "NonRetriableError" });
    expect(bed.model.requests).toHaveLength(0);
    expect((await bed.db.pool.query("SELECT 1 FROM threads WHERE user_id = $1", [userId])).rowCount).toBe(0);
  });

  it("the erasure stands when Inngest cannot be reached, and the command says what was not announced", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script({ text: "Hello." });
    expect((await execute(chatTurn, chatEvent({ userId, content: "Hi" }))).error).toBeUndefined();
    await expect(
      deleteUserCommand(["--user", userId], bed.db.pool, async () => {
        throw new Error("connect ECONNREFUSED");
      }),
    ).rejects.toThrow(/Erased user .* 1 threads.*announcement to Inngest failed \(connect ECONNREFUSED\)/);
    expect((await bed.db.pool.query("SELECT 1 FROM threads WHERE user_id = $1", [userId])).rowCount).toBe(0);
  });

  it("a message to a deleted thread, over HTTP (POST /api/chat, /api/ui/chat; its id as a new thread's too), is refused 409 thread_deleted before any event is sent", async () => {
    const userId = `user-${randomUUID()}`;
    const threadId = randomUUID();
    expect((await call(userId, "POST", "/api/threads", { id: threadId })).status).toBe(201);
    expect((await call(userId, "DELETE", `/api/threads/${threadId}`)).status).toBe(200);
    const before = await tableRowCounts(bed.db.pool);
    const runs = app.runs.length;

    const answers = [
      await call(userId, "POST", "/api/chat", { threadId, messageId: randomUUID(), content: "Still there?" }),
      // A new thread is named after its first message: a deleted thread's id cannot be one.
      await call(userId, "POST", "/api/chat", { messageId: threadId, content: "Start again" }),
      await call(userId, "POST", "/api/ui/chat", {
        id: threadId,
        trigger: "submit-message",
        messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text: "Still there?" }] }],
      }),
    ];

    for (const answer of answers) {
      expect(answer.status).toBe(409);
      expect(await answer.json()).toEqual({
        code: "thread_deleted",
        error: expect.stringContaining(`Thread ${threadId} was deleted`),
      });
    }
    // No run was started (no event reached the engine), nothing was written.
    expect(app.runs.length).toBe(runs);
    expect(await tableRowCounts(bed.db.pool)).toEqual(before);
  });

  it("a tombstone is pruned after THREAD_TOMBSTONE_DAYS by the retention function, and the id may then be used again", async () => {
    const userId = `user-${randomUUID()}`;
    const event = chatEvent({ userId, content: "Hi" });
    const threadId = event.data.messageId;
    bed.model.script({ text: "Hello." });
    expect((await execute(chatTurn, event)).error).toBeUndefined();
    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [threadId]);

    // Younger than the period: kept.
    const retention = createThreadRetention({ db: bed.db.pool, tombstoneDays: 30 });
    await execute(retention, { name: "inngest/scheduled.timer", data: {} });
    expect((await bed.db.pool.query("SELECT 1 FROM thread_tombstones WHERE thread_id = $1", [threadId])).rowCount).toBe(
      1,
    );

    await bed.db.pool.query(
      "UPDATE thread_tombstones SET deleted_at = now() - interval '31 days' WHERE thread_id = $1",
      [threadId],
    );
    const pruned = await execute(retention, { name: "inngest/scheduled.timer", data: {} });
    expect(pruned.result).toMatchObject({ status: "disabled", tombstonesPruned: expect.any(Number) });
    expect((await bed.db.pool.query("SELECT 1 FROM thread_tombstones WHERE thread_id = $1", [threadId])).rowCount).toBe(
      0,
    );

    bed.model.script({ text: "Hello again." });
    expect((await execute(chatTurn, chatEvent({ userId, messageId: threadId, content: "Hi" }))).error).toBeUndefined();
    expect(await pruneTombstones(bed.db.pool, 30, 10)).toBe(0);
  });
});
