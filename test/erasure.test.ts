import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { deleteUserCommand } from "../scripts/delete-user.js";
import { createApiKey } from "../src/auth/api-keys.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { rememberFromThread } from "../src/history/memories.js";
import { setUserBudget } from "../src/history/usage.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";
import { tableRowCounts } from "./helpers/table-rows.js";

const bed = useTestBed();

let pairTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  pairTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: { network: "pair", memory: { agents: { assistant: ["user-memory"] }, contextTokens: 500 } },
  });
});

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
  await rememberFromThread(bed.db.pool, { userId, threadId, text: `Mentioned ${fact} in passing` });
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
    expect(await tableRowCounts(bed.db.pool)).toEqual({ ...before, thread_tombstones: before.thread_tombstones! + 2 });
  });

  it("refuses a command line without a valid user", async () => {
    await expect(deleteUserCommand([], bed.db.pool, async () => undefined)).rejects.toThrow("needs --user");
    await expect(deleteUserCommand(["--user", "bad\u0000id"], bed.db.pool, async () => undefined)).rejects.toThrow(
      "needs --user",
    );
  });
});
