import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, ensureThread, readHistory, readHistoryWindow, storeAnswer } from "../src/history/store.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { countRows } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";

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

  it("reads a window with the system rows older than it, its turns starting at its oldest user message", async () => {
    // seq: system 1, turns 1-3 at 2-7, system 8, turns 4-6 at 9-14 (questions at 9, 11, 13).
    const { threadId } = await seedThread(db.pool, { turns: 6, systemBefore: [1, 4], userId: "u1" });
    const read = (countUnsummarizedUpTo: number) =>
      readHistoryWindow(db.pool, {
        threadId,
        userId: "u1",
        beforeSeq: 15,
        window: { userMessages: 3, preserveSystemMessages: true },
        countUnsummarizedUpTo,
      });
    const window = await read(100);
    expect(window.rows.map((row) => [row.kind, row.content])).toEqual([
      ["system", { text: "System note before turn 1." }],
      ["system", { text: "System note before turn 4." }],
      ["user", { text: "question 5" }],
      ["agent", expect.objectContaining({ output: [expect.objectContaining({ content: "answer 5" })] })],
      ["user", { text: "question 6" }],
      ["agent", expect.objectContaining({ output: [expect.objectContaining({ content: "answer 6" })] })],
    ]);
    expect(window.rows.every((row) => typeof row.createdAt === "number" && typeof row.agentName === "string")).toBe(
      true,
    );
    // The system rows before it neither move where its turns begin nor escape the count before it.
    expect(window).toMatchObject({ windowStart: 11, summary: null, unsummarized: 10 });
    expect((await read(4)).unsummarized).toBe(4);
    await db.pool.query(
      "INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text) VALUES ($1, 6, 'so far')",
      [threadId],
    );
    // After turn 3 (turn_seq 6): system 8 and turn 4.
    expect(await read(100)).toMatchObject({
      windowStart: 11,
      summary: { coversThrough: 6, text: "so far" },
      unsummarized: 3,
    });
  });

  it("keeps a thread's list values and its messages' owner as the message triggers do, whoever writes", async () => {
    const threadId = randomUUID();
    await ensureThread(db.pool, threadId, "u1");
    // What the triggers derive (migration 0008), recomputed from the rows.
    const derived = async () => {
      const { rows } = await db.pool.query(
        `SELECT t.message_count, t.last_message_at, t.last_activity_at,
                (SELECT count(*) FILTER (WHERE m.on_path)::int FROM messages m WHERE m.thread_id = t.id) AS on_path,
                (SELECT max(m.created_at) FROM messages m WHERE m.thread_id = t.id) AS newest,
                (SELECT count(*)::int FROM messages m WHERE m.thread_id = t.id AND m.user_id <> t.user_id) AS foreign_owned
         FROM threads t WHERE t.id = $1`,
        [threadId],
      );
      const row = rows[0];
      expect(row.message_count).toBe(row.on_path);
      expect(row.last_message_at).toEqual(row.newest);
      expect(row.last_activity_at.getTime()).toBe(Math.trunc(row.newest.getTime()));
      expect(row.foreign_owned).toBe(0);
      return row.message_count as number;
    };
    const answer = async (messageId: string, runId: string, seq: number, variant: number, text: string) =>
      storeAnswer(db.pool, {
        threadId,
        userId: "u1",
        runId,
        messageId,
        messageSeq: seq,
        variant,
        detachLaterTurns: false,
        results: [
          {
            id: resultId(messageId, variant, 0),
            agentName: ASSISTANT_NAME,
            content: { output: [{ type: "text", role: "assistant", content: text }], toolCalls: [] },
          },
        ],
      });

    const first = { id: randomUUID(), run: `run-${randomUUID()}` };
    const start = await beginTurn(db.pool, {
      threadId,
      userId: "u1",
      message: { id: first.id, text: "first" },
      turn: { runId: first.run, kind: "chat" },
    });
    expect(await derived()).toBe(1);
    await answer(first.id, first.run, start.messageSeq, start.variant, "an answer");
    expect(await derived()).toBe(2);
    // Stored again (a retried step): nothing inserted, nothing counted.
    expect((await answer(first.id, first.run, start.messageSeq, start.variant, "an answer")).inserted).toBe(0);
    expect(await derived()).toBe(2);
    // A regenerate's answer replaces the current one: the count stays.
    const regenerate = `run-${randomUUID()}`;
    const again = await beginTurn(db.pool, {
      threadId,
      userId: "u1",
      message: { id: first.id, text: "first" },
      turn: { runId: regenerate, kind: "regenerate" },
    });
    await answer(first.id, regenerate, again.messageSeq, again.variant, "another answer");
    expect(await derived()).toBe(2);

    // Another writer in the same transaction as a turn's writer: the triggers still fill its owner
    // (whatever it names) and count its message.
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT * FROM threadline_begin_turn($1, 'u1', $2, 'second', NULL, $3, 'chat', NULL, NULL)", [
        threadId,
        randomUUID(),
        `run-${randomUUID()}`,
      ]);
      await client.query(
        `INSERT INTO messages (id, thread_id, user_id, seq, turn_seq, kind, agent_name, content)
         SELECT $2, $1, 'mallory', last_seq + 1, last_seq + 1, 'system', 'system', '{"text": "a note"}' FROM threads WHERE id = $1`,
        [threadId, randomUUID()],
      );
      await client.query("UPDATE threads SET last_seq = last_seq + 1 WHERE id = $1", [threadId]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    expect(await derived()).toBe(4);
  });
});
