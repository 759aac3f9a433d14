import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { beginTurn, ensureThread, readHistory } from "../src/history/store.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { countRows } from "./helpers/fixtures.js";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db.drop());

const turn = () => ({ runId: `run-${randomUUID()}`, kind: "chat" as const });

describe("thread storage", () => {
  it("returns 50 messages written within the same millisecond in insertion order", async () => {
    const threadId = randomUUID();
    await ensureThread(db.pool, threadId, "u1");
    const ids: string[] = [];
    for (let i = 0; i < 50; i++) {
      const id = randomUUID();
      ids.push(id);
      // Client timestamps run backwards: order must not come from any clock.
      await beginTurn(db.pool, {
        threadId,
        userId: "u1",
        message: { id, text: `message ${i}`, clientTimestamp: new Date(Date.UTC(2026, 0, 1) - i * 1000).toISOString() },
        turn: turn(),
      });
    }
    await db.pool.query("UPDATE messages SET created_at = '2026-01-01T00:00:00.000Z' WHERE thread_id = $1", [threadId]);
    // Their turns ended without answers (a running one would make the read wait for it).
    await db.pool.query("UPDATE turns SET status = 'failed' WHERE thread_id = $1", [threadId]);
    const last = await beginTurn(db.pool, {
      threadId,
      userId: "u1",
      message: { id: randomUUID(), text: "current" },
      turn: turn(),
    });

    const history = await readHistory(db.pool, {
      threadId,
      userId: "u1",
      beforeSeq: last.messageSeq,
      window: { userMessages: null, preserveSystemMessages: true },
    });

    expect(history.map((row) => row.id)).toEqual(ids);
    expect(history.map((row) => (row.content as { text: string }).text)).toEqual(ids.map((_, i) => `message ${i}`));
  });

  it("stores a re-sent user message once", async () => {
    const threadId = randomUUID();
    await ensureThread(db.pool, threadId, "u1");
    const message = { id: randomUUID(), text: "only once" };
    const first = await beginTurn(db.pool, { threadId, userId: "u1", message, turn: turn() });
    const again = await beginTurn(db.pool, { threadId, userId: "u1", message, turn: turn() });
    expect(again.messageSeq).toBe(first.messageSeq);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM messages WHERE id = $1", [message.id]);
    expect(rows[0].n).toBe(1);
  });

  it("refuses every write and read on another user's thread, changing nothing", async () => {
    const threadId = randomUUID();
    await ensureThread(db.pool, threadId, "alice");
    const before = await countRows(db.pool);
    await expect(ensureThread(db.pool, threadId, "mallory")).rejects.toThrow(/belongs to another user/);
    await expect(
      beginTurn(db.pool, { threadId, userId: "mallory", message: { id: randomUUID(), text: "hi" }, turn: turn() }),
    ).rejects.toThrow(/belongs to another user/);
    await expect(
      readHistory(db.pool, {
        threadId,
        userId: "mallory",
        beforeSeq: 10,
        window: { userMessages: null, preserveSystemMessages: true },
      }),
    ).rejects.toThrow(/belongs to another user/);
    expect(await countRows(db.pool)).toEqual(before);
  });

  it("refuses a message id already used in another thread", async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await ensureThread(db.pool, a, "u1");
    await ensureThread(db.pool, b, "u1");
    const message = { id: randomUUID(), text: "hello" };
    await beginTurn(db.pool, { threadId: a, userId: "u1", message, turn: turn() });
    await expect(beginTurn(db.pool, { threadId: b, userId: "u1", message, turn: turn() })).rejects.toThrow(
      /already used/,
    );
  });
});
