import { randomUUID } from "node:crypto";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { deleteUserCommand } from "../scripts/delete-user.js";
import { createApiKey } from "../src/auth/api-keys.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { forgetAll, rememberFromThread } from "../src/history/memories.js";
import { beginTurn } from "../src/history/store.js";
import { failTurn } from "../src/history/turns.js";
import { setUserBudget } from "../src/history/usage.js";
import { eraseUser } from "../src/history/users.js";
import { execute, memoBefore, type SentEvent } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";
import { withPausedFunction } from "./helpers/paused-function.js";
import { tableRowCounts } from "./helpers/table-rows.js";

const bed = useTestBed();

let pairTurn: ReturnType<typeof createChatTurn>;
let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  pairTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: { network: "pair", memory: { agents: { assistant: ["user-memory"] }, contextTokens: 500 } },
  });
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
});

/** Erases the user as npm run delete-user does, its announcement dropped. */
const erase = (userId: string) => deleteUserCommand(["--user", userId], bed.db.pool, async () => undefined);

/**
 * A thread of two pair turns (assistant, then reviewer, whose state is stored), the first one
 * remembering a fact, plus a memory extracted from the thread. Returns the thread's id.
 */
async function busyThread(userId: string, fact: string) {
  bed.model.script({ toolCalls: [{ name: "remember", arguments: { fact } }] }, { text: "Noted." }, { text: "OK" });
  const first = chatEvent({ userId, content: `Remember: ${fact}` });
  expect((await execute(pairTurn, first)).error).toBeUndefined();
  const threadId = first.data.messageId;
  bed.model.script({ text: "Sure." }, { text: "OK" });
  expect((await execute(pairTurn, chatEvent({ userId, threadId, content: "Thanks" }))).error).toBeUndefined();
  await rememberFromThread(bed.db.pool, {
    userId,
    threadId,
    messageId: threadId,
    text: `Mentioned ${fact} in passing`,
  });
  return threadId;
}

describe("erasure", () => {
  it("deleting a thread removes its messages, turns, agent state and the memories extracted from it; remembered facts stay with the user", async () => {
    const userId = `user-${randomUUID()}`;
    const before = await tableRowCounts(bed.db.pool);
    const threadId = await busyThread(userId, "Likes jazz");
    const during = await tableRowCounts(bed.db.pool);
    expect(during.agent_thread_state).toBe(before.agent_thread_state! + 1);
    expect(during.user_memories).toBe(before.user_memories! + 2);
    expect(during.usage_records).toBeGreaterThan(before.usage_records!);

    // What DELETE /api/threads/:id does (its route is the threads work): delete the row, the rest cascades.
    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [threadId]);

    // The explicitly remembered fact is the user's, not the thread's: it is the one row left, beside the thread's
    // tombstone and the usage ledger's rows (what was spent stays spent; erasing the user removes them).
    expect(await tableRowCounts(bed.db.pool)).toEqual({
      ...before,
      user_memories: before.user_memories! + 1,
      thread_tombstones: before.thread_tombstones! + 1,
      usage_records: during.usage_records,
    });
    const { rows } = await bed.db.pool.query("SELECT text, source FROM user_memories WHERE user_id = $1", [userId]);
    expect(rows).toEqual([{ text: "Likes jazz", source: "remembered" }]);
  });

  it("deleting a user leaves no row of theirs in any table, and every row of another user's", async () => {
    const userId = `user-${randomUUID()}`;
    const otherId = `other-${randomUUID()}`;
    await busyThread(otherId, "Plays chess");
    await createApiKey(bed.db.pool, { userId: otherId, name: "other's server" });
    const before = await tableRowCounts(bed.db.pool);

    await busyThread(userId, "Likes jazz");
    await busyThread(userId, "Owns a bike");
    await createApiKey(bed.db.pool, { userId, name: "backend" });
    await setUserBudget(bed.db.pool, userId, { dailyTokens: 1_000_000 });
    const during = await tableRowCounts(bed.db.pool);
    for (const table of [
      "threads",
      "messages",
      "turns",
      "agent_thread_state",
      "user_memories",
      "api_keys",
      "usage_records",
      "user_budgets",
    ])
      expect(during[table]).toBeGreaterThan(before[table]!);
    const usageRecords = during.usage_records! - before.usage_records!;

    // Two remembered facts and two extracted memories.
    const printed = await deleteUserCommand(["--user", userId], bed.db.pool, async () => undefined);
    expect(printed).toBe(
      `Erased user ${JSON.stringify(userId)}: 2 threads (with their messages, turns, summaries and agent state), 4 memories, 1 API keys, ${usageRecords} usage records and the budget. Announced thread/deleted for each thread and user/deleted.`,
    );
    // Each thread leaves a tombstone: its id and the time, nothing that names the user (migration 0016).
    // The erasure leaves its time, under a digest of the user id (migration 0034).
    expect(await tableRowCounts(bed.db.pool)).toEqual({
      ...before,
      thread_tombstones: before.thread_tombstones! + 2,
      user_erasures: before.user_erasures! + 1,
    });
    const { rows } = await bed.db.pool.query("SELECT user_key FROM user_erasures");
    expect(rows.some((row) => row.user_key.toString("utf8").includes(userId))).toBe(false);
  });

  it("erasing a user who had memories forgotten leaves no record of the forget", async () => {
    const userId = `user-${randomUUID()}`;
    const before = await tableRowCounts(bed.db.pool);
    await busyThread(userId, "Likes jazz");
    expect(await forgetAll(bed.db.pool, userId)).toBe(2);
    expect((await tableRowCounts(bed.db.pool)).memory_forgets).toBe(before.memory_forgets! + 1);
    await erase(userId);
    expect(await tableRowCounts(bed.db.pool)).toEqual({
      ...before,
      thread_tombstones: before.thread_tombstones! + 1,
      user_erasures: before.user_erasures! + 1,
    });
  });

  it("a new thread's first message sent before the erasure, its run beginning after it, stores nothing; one sent after it is answered", async () => {
    const userId = `user-${randomUUID()}`;
    // Queued a second before the erasure: a new thread by its first message's id, and one by a client-made id.
    const sentAt = Date.now() - 1_000;
    const queued = [
      chatEvent({ userId, content: "My secret" }),
      chatEvent({ userId, threadId: randomUUID(), content: "Another secret" }),
    ];
    await erase(userId);
    const before = await tableRowCounts(bed.db.pool);
    bed.model.script({ text: "Noted." }, { text: "Noted." });

    for (const event of queued) {
      const run = await execute(chatTurn, { ...event, ts: sentAt });
      expect(run.error).toMatchObject({
        name: "NonRetriableError",
        message: expect.stringMatching(/was sent before its user's data was erased/),
      });
    }
    expect(bed.model.requests).toHaveLength(0);
    expect(await tableRowCounts(bed.db.pool)).toEqual(before);

    // The user goes on: POST /api/chat accepts a new message, and its run (sent now) answers it.
    bed.model.reset();
    const sent: SentEvent[] = [];
    const { app } = createTestApp(bed.db.pool, {
      sendEvent: async (event) => (sent.push(event), { ids: [`evt-${sent.length}`] }),
    });
    const messageId = randomUUID();
    const response = await app.request("/api/chat", {
      method: "POST",
      headers: await headersFor(userId),
      body: JSON.stringify({ messageId, content: "Hello again" }),
    });
    expect(response.status).toBe(202);
    bed.model.script({ text: "Welcome back." });
    expect((await execute(chatTurn, { name: "chat/message.sent", data: sent[0]!.data })).error).toBeUndefined();
    expect((await threadRows(bed.db.pool, messageId)).map((row) => row.kind)).toEqual(["user", "agent"]);

    // A message sent before the erasure to a client-made thread id that a message sent after it created: not stored either.
    const late = await execute(chatTurn, {
      ...chatEvent({ userId, threadId: messageId, content: "Yet another secret" }),
      ts: sentAt,
    });
    expect(late.error).toMatchObject({ message: expect.stringMatching(/was sent before its user's data was erased/) });
    expect((await threadRows(bed.db.pool, messageId)).map((row) => row.kind)).toEqual(["user", "agent"]);
  });

  it("a turn in flight when its user is erased remembers nothing: its remember step, run after the erasure, stores no memory", async () => {
    const userId = `user-${randomUUID()}`;
    const event = chatEvent({ userId, content: "Remember: I live in Oslo." });
    bed.model.script({ toolCalls: [{ name: "remember", arguments: { fact: "Lives in Oslo" } }] }, { status: 500 });
    const failed = await execute(pairTurn, event);
    expect(failed.error).toBeDefined();
    const rememberStep = failed.stepIds.find((id) => id.startsWith("memory.remember."))!;

    await erase(userId);
    // Inngest runs the remember step again (its result was not recorded before the erasure).
    bed.model.script({ text: "Noted." }, { text: "OK" });
    await execute(pairTurn, event, { memo: memoBefore(failed, rememberStep), runId: failed.runId });
    expect((await bed.db.pool.query("SELECT text FROM user_memories WHERE user_id = $1", [userId])).rows).toEqual([]);
    // Nor does the erased user's ledger come back with the calls made after the erasure.
    expect((await bed.db.pool.query("SELECT key FROM usage_records WHERE user_id = $1", [userId])).rows).toEqual([]);
    // The model is told so: the tool's result says nothing was remembered.
    expect(JSON.stringify(bed.model.requests)).toContain("nothing was remembered");
  });

  it("an erasure while a turn creates the user's new thread deletes that thread once it is committed", async () => {
    // The window: the thread inserted, not yet committed. The turn's first statement paused there.
    const pause = {
      name: "threadline_begin_turn",
      at: "INSERT INTO threads (id, user_id) VALUES (p_thread_id, p_user_id) ON CONFLICT (id) DO NOTHING;",
      where: "after" as const,
      when: "p_run_id LIKE 'paused-%'",
    };
    await withPausedFunction(pause, async ({ pool, pools, reachedPause, settled, release }) => {
      const userId = `user-${randomUUID()}`;
      const messageId = randomUUID();
      const paused = beginTurn(pools[0], {
        threadId: messageId,
        userId,
        message: { id: messageId, text: "My secret" },
        turn: { runId: `paused-${messageId}`, kind: "chat", eventTime: Date.now() - 1_000 },
      });
      await reachedPause();
      // The erasure either waits for the turn (on the user's erasure lock) or is done.
      const erasing = eraseUser(pools[1], userId, []);
      await settled(erasing);
      await release();

      expect((await paused).status).toBe("running");
      expect((await erasing).threadIds).toEqual([messageId]);
      expect(await threadRows(pool, messageId)).toEqual([]);
      const left = await pool.query(
        "SELECT (SELECT count(*)::int FROM threads WHERE id = $1) AS threads, (SELECT count(*)::int FROM thread_tombstones WHERE thread_id = $1) AS tombstones",
        [messageId],
      );
      expect(left.rows[0]).toEqual({ threads: 0, tombstones: 1 });
    });
  });

  it("a run's failure recording the user's new thread, an erasure coming meanwhile: the thread goes once committed, or is never created", async () => {
    const statement = "INSERT INTO threads (id, user_id) VALUES (p_thread_id, p_user_id) ON CONFLICT (id) DO NOTHING;";
    const lock = "PERFORM pg_advisory_xact_lock_shared(hashtext('threadline.user_erasure'), hashtext(p_user_id));";
    const thread = (pool: pg.Pool, threadId: string) =>
      pool.query(
        "SELECT (SELECT count(*)::int FROM threads WHERE id = $1) AS threads, (SELECT count(*)::int FROM thread_tombstones WHERE thread_id = $1) AS tombstones",
        [threadId],
      );
    // The message was sent a second ago; its run failed before beginning a turn.
    const failure = (pool: pg.Pool, userId: string, threadId: string) =>
      failTurn(pool, `run-${threadId}`, "connect ECONNREFUSED", {
        threadId,
        messageId: threadId,
        userId,
        sentAt: Date.now() - 1_000,
      });
    const paused = (at: string, where: "before" | "after") => ({
      name: "threadline_unbegun_failure_thread",
      at,
      where,
      when: "p_user_id LIKE 'paused-%'",
    });

    // Created, not yet committed: the erasure waits for it (the user's erasure lock), then deletes it.
    await withPausedFunction(paused(statement, "after"), async ({ pool, pools, reachedPause, settled, release }) => {
      const userId = `paused-${randomUUID()}`;
      const threadId = randomUUID();
      const failing = failure(pools[0], userId, threadId);
      await reachedPause();
      const erasing = eraseUser(pools[1], userId, []);
      await settled(erasing);
      await release();
      await failing;
      expect((await erasing).threadIds).toEqual([threadId]);
      expect((await thread(pool, threadId)).rows[0]).toEqual({ threads: 0, tombstones: 1 });
    });

    // The erasure commits after the failure found no thread, before its lock: nothing is created;
    // the thread's id is tombstoned, as the erasure's deletions are (a stream following it ends).
    await withPausedFunction(paused(lock, "before"), async ({ pool, pools, reachedPause, settled, release }) => {
      const userId = `paused-${randomUUID()}`;
      const threadId = randomUUID();
      const failing = failure(pools[0], userId, threadId);
      await reachedPause();
      const erasing = eraseUser(pools[1], userId, []);
      await settled(erasing);
      expect((await erasing).threadIds).toEqual([]);
      await release();
      await failing;
      expect((await thread(pool, threadId)).rows[0]).toEqual({ threads: 0, tombstones: 1 });
      expect((await pool.query("SELECT count(*)::int AS n FROM thread_events")).rows[0]).toEqual({ n: 0 });
    });
  });

  it("refuses a command line without a valid user", async () => {
    await expect(deleteUserCommand([], bed.db.pool, async () => undefined)).rejects.toThrow("needs --user");
    await expect(deleteUserCommand(["--user", "bad\u0000id"], bed.db.pool, async () => undefined)).rejects.toThrow(
      "needs --user",
    );
  });
});
