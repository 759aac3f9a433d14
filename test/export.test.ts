import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { exportLine, MAX_CONCURRENT_EXPORTS, MAX_EXPORTS_PER_USER } from "../src/api/export.js";
import { EXPORT_MESSAGE_BATCH } from "../src/history/export.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { seedBulkThread } from "./helpers/bulk-thread.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: ReturnType<typeof createTestApp>["app"];
beforeAll(() => {
  app = createTestApp(bed.db.pool).app;
});

type Line = ReturnType<typeof exportLine.parse>;

async function exportOf(userId: string): Promise<{ response: Response; lines: Line[] }> {
  const response = await app.request("/api/export", { headers: await headersFor(userId) });
  const text = await response.text();
  expect(text.endsWith("\n")).toBe(true);
  return {
    response,
    lines: text
      .trimEnd()
      .split("\n")
      .map((line) => exportLine.parse(JSON.parse(line))),
  };
}

/** Every message of the user's threads as stored (on the current path or not), per thread, in stored order. */
async function storedMessages(userId: string) {
  const { rows } = await bed.db.pool.query<{ thread_id: string; id: string; content: unknown; on_path: boolean }>(
    `SELECT m.thread_id, m.id, m.content, m.on_path FROM messages m JOIN threads t ON t.id = m.thread_id
     WHERE t.user_id = $1 ORDER BY m.thread_id, m.seq`,
    [userId],
  );
  const paths = new Map<string, { id: string; content: unknown; onPath: boolean }[]>();
  for (const row of rows)
    paths.set(row.thread_id, [
      ...(paths.get(row.thread_id) ?? []),
      { id: row.id, content: row.content, onPath: row.on_path },
    ]);
  return paths;
}

describe("GET /api/export", () => {
  it("streams the caller's threads, each followed by every one of its messages (off the current path too), as JSON Lines ending with the counts", async () => {
    const userId = "exporter";
    const plain = await seedThread(bed.db.pool, { turns: 3, userId, toolTurns: [2], systemBefore: [1] });
    const long = await seedBulkThread(bed.db.pool, { turns: EXPORT_MESSAGE_BATCH, userId });
    const regenerated = await seedThread(bed.db.pool, { turns: 2, userId });
    await regenerateFirst(regenerated.threadId, userId);
    await seedThread(bed.db.pool, { turns: 2, userId: "someone-else" });

    const { response, lines } = await exportOf(userId);

    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/x-ndjson; charset=utf-8");
    const exported = new Map<string, { id: string; content: unknown; onPath: boolean }[]>();
    let current: string | undefined;
    for (const line of lines.slice(1, -1)) {
      if (line.type === "thread") {
        current = line.id;
        exported.set(line.id, []);
      } else if (line.type === "message") {
        expect(line.threadId).toBe(current);
        exported.get(line.threadId)!.push({ id: line.id, content: line.content, onPath: line.onPath });
      }
    }
    const stored = await storedMessages(userId);
    expect(new Set(exported.keys())).toEqual(new Set([plain.threadId, long.threadId, regenerated.threadId]));
    for (const [threadId, messages] of stored) expect(exported.get(threadId), threadId).toEqual(messages);
    const messageCount = [...stored.values()].reduce((n, messages) => n + messages.length, 0);
    expect(messageCount).toBeGreaterThan(2 * EXPORT_MESSAGE_BATCH);
    expect(lines.at(-1)).toMatchObject({ type: "end", threads: 3, messages: messageCount });
    // The regenerate's replaced answer and the turn it took off the path are in it.
    expect(exported.get(regenerated.threadId)!.filter((message) => !message.onPath).length).toBeGreaterThan(0);
    // Threads come in list order, with what the thread API shows of them.
    const threadLines = lines.filter((line) => line.type === "thread");
    expect(threadLines.find((t) => t.id === regenerated.threadId)).toMatchObject({
      messageCount: stored.get(regenerated.threadId)!.filter((message) => message.onPath).length,
    });
  });

  it("ends its snapshot transaction when done, and when the client stops reading mid-way", async () => {
    const userId = "quitter";
    await seedBulkThread(bed.db.pool, { turns: 3 * EXPORT_MESSAGE_BATCH, userId });
    await exportOf(userId);
    expect(await idleInTransaction()).toBe(0);

    const response = await app.request("/api/export", { headers: await headersFor(userId) });
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    await reader.cancel();
    await expect.poll(idleInTransaction, { timeout: 5_000 }).toBe(0);
    await expect.poll(() => bed.db.pool.idleCount === bed.db.pool.totalCount, { timeout: 5_000 }).toBe(true);
  });

  it("streams one export per user and MAX_CONCURRENT_EXPORTS in all (429 with Retry-After beyond), and frees the slot when one ends", async () => {
    const users = Array.from({ length: MAX_CONCURRENT_EXPORTS + 1 }, (_, i) => `busy-exporter-${i}`);
    for (const userId of users) await seedBulkThread(bed.db.pool, { turns: 3 * EXPORT_MESSAGE_BATCH, userId });
    const open = async (userId: string) => {
      const response = await app.request("/api/export", { headers: await headersFor(userId) });
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      expect((await reader.read()).done).toBe(false);
      return reader;
    };
    const first = await open(users[0]!);
    // The same user's second export waits for the first: another user's does not.
    const again = await app.request("/api/export", { headers: await headersFor(users[0]!) });
    expect(again.status).toBe(429);
    expect(again.headers.get("retry-after")).toBe("30");
    expect(((await again.json()) as { error: string }).error).toMatch(/An export of yours is still running/);
    expect(MAX_EXPORTS_PER_USER).toBe(1);
    const readers = [first];
    for (const userId of users.slice(1, MAX_CONCURRENT_EXPORTS)) readers.push(await open(userId));
    const full = await app.request("/api/export", { headers: await headersFor(users.at(-1)!) });
    expect(full.status).toBe(429);
    expect(((await full.json()) as { error: string }).error).toMatch(/Too many exports are running on this server/);

    await readers[0]!.cancel();
    await expect
      .poll(
        async () => {
          const response = await app.request("/api/export", { headers: await headersFor(users[0]!) });
          await response.body?.cancel();
          return response.status;
        },
        { timeout: 5_000 },
      )
      .toBe(200);
    for (const reader of readers.slice(1)) await reader.cancel();
    await expect.poll(idleInTransaction, { timeout: 5_000 }).toBe(0);
  });

  it("exports nothing but the header and the end line for a caller without threads", async () => {
    const { lines } = await exportOf("nobody");
    expect(lines).toEqual([
      expect.objectContaining({ type: "export", userId: "nobody" }),
      {
        type: "end",
        threads: 0,
        messages: 0,
        turns: 0,
        summaries: 0,
        agentStates: 0,
        events: 0,
        memories: 0,
        apiKeys: 0,
        feedback: 0,
        approvals: 0,
        usageRecords: 0,
      },
    ]);
  });
});

const idleInTransaction = async () =>
  (
    await bed.db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
  ).rows[0]!.n;

/** Regenerates the thread's first message: its old answer and the later turn leave the current path. */
async function regenerateFirst(threadId: string, userId: string) {
  const first = (
    await bed.db.pool.query<{ id: string }>(
      "SELECT id FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq LIMIT 1",
      [threadId],
    )
  ).rows[0]!;
  const runId = `regen-${randomUUID()}`;
  const start = await beginTurn(bed.db.pool, {
    threadId,
    userId,
    message: { id: first.id, text: "question 1" },
    turn: { runId, kind: "regenerate" },
  });
  await storeAnswer(bed.db.pool, {
    threadId,
    userId,
    runId,
    messageId: first.id,
    messageSeq: start.messageSeq,
    variant: start.variant,
    detachLaterTurns: true,
    results: [
      {
        id: resultId(first.id, start.variant, 0),
        agentName: ASSISTANT_NAME,
        content: { output: [{ type: "text", role: "assistant", content: "regenerated" }], toolCalls: [] },
      },
    ],
  });
}
