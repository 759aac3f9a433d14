import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import {
  threadCreatedResponse,
  threadDeletedResponse,
  threadListResponse,
  threadResponse,
} from "../src/api/threads.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, ensureThread, storeAnswer } from "../src/history/store.js";
import { createTestApp, headersFor, type SentEvent } from "./helpers/http.js";
import { seedThread, storeAnsweredTurn } from "./helpers/seed.js";
import { tableRowCounts } from "./helpers/table-rows.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];
beforeAll(() => {
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

async function call(method: string, path: string, userId: string, body?: unknown) {
  return app.request(path, {
    method,
    headers: await headersFor(userId),
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

type Item = ReturnType<typeof threadResponse.parse>;
type Page = ReturnType<typeof threadListResponse.parse>;

async function listPage(userId: string, query: Record<string, string> = {}): Promise<Page> {
  const response = await call("GET", `/api/threads?${new URLSearchParams(query)}`, userId);
  expect(response.status, await response.clone().text()).toBe(200);
  return threadListResponse.parse(await response.json());
}

async function createThread(userId: string, body: Record<string, unknown> = {}): Promise<Item> {
  const response = await call("POST", "/api/threads", userId, body);
  expect(response.status, await response.clone().text()).toBe(201);
  return threadCreatedResponse.parse(await response.json());
}

/** A turn stored through the real storage code, as a chat turn stores it: the question, then its answer. */
async function appendTurn(threadId: string, userId: string, text: string) {
  await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: text, answer: `answer to ${text}` });
}

/** Sets a thread's activity time directly (threads otherwise created in one millisecond would tie). */
const setActivity = (threadId: string, at: Date) =>
  bed.db.pool.query("UPDATE threads SET last_activity_at = $2 WHERE id = $1", [threadId, at]);

const inListOrder = (items: Item[]) =>
  items.every(
    (item, i) =>
      i === 0 ||
      items[i - 1]!.lastActivityAt > item.lastActivityAt ||
      (items[i - 1]!.lastActivityAt === item.lastActivityAt && items[i - 1]!.id > item.id),
  );

describe("POST /api/threads", () => {
  it("creates a thread under the client's id with a title and metadata; creating it again answers 200 with the thread unchanged", async () => {
    const id = randomUUID();
    const created = await createThread("creator", { id, title: "  Trip planning  ", metadata: { project: "p-1" } });
    expect(created).toMatchObject({
      id,
      threadId: id,
      title: "Trip planning",
      titleSource: "user",
      metadata: { project: "p-1" },
      messageCount: 0,
      lastMessageAt: null,
      latestTurnStatus: null,
    });

    const again = await call("POST", "/api/threads", "creator", { id, title: "Other" });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ id, title: "Trip planning" });

    const fetched = await call("GET", `/api/threads/${id}`, "creator");
    expect(threadResponse.parse(await fetched.json())).toEqual(threadResponse.parse(created));
  });

  it("generates the id when the client sends none, and leaves the thread untitled without a title", async () => {
    const created = await createThread("creator");
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created).toMatchObject({ title: null, titleSource: null, metadata: {} });
  });

  it("refuses another user's id with the same 404 as an unknown thread, and changes nothing", async () => {
    const id = (await createThread("owner-a", { title: "Mine" })).id;
    const response = await call("POST", "/api/threads", "intruder", { id, title: "Stolen" });
    expect(response.status).toBe(404);
    const unknown = await call("GET", `/api/threads/${randomUUID()}`, "intruder");
    expect(await response.json()).toEqual(await unknown.json());
    expect((await call("GET", `/api/threads/${id}`, "owner-a").then((r) => r.json())).title).toBe("Mine");
  });

  it("refuses metadata over the size cap (413), metadata that is not an object and an empty title (400)", async () => {
    expect((await call("POST", "/api/threads", "creator", { metadata: { blob: "x".repeat(5_000) } })).status).toBe(413);
    expect((await call("POST", "/api/threads", "creator", { metadata: ["a"] })).status).toBe(400);
    expect((await call("POST", "/api/threads", "creator", { title: "   " })).status).toBe(400);
    expect((await call("POST", "/api/threads", "creator", { metadata: { bad: "a\u0000b" } })).status).toBe(400);
    const withUser = await call("POST", "/api/threads", "creator", { title: "t", userId: "someone-else" });
    expect(withUser.status).toBe(400);
    expect(await withUser.text()).toContain("userId is not accepted");
  });

  it("a thread created by a chat message with an unknown id (as today) is listed like any other", async () => {
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, "chatter");
    await appendTurn(threadId, "chatter", "hello");
    const page = await listPage("chatter");
    expect(page.threads).toHaveLength(1);
    expect(page.threads[0]).toMatchObject({
      id: threadId,
      title: null,
      messageCount: 2,
      latestTurnStatus: "completed",
    });
    expect(page.threads[0]!.lastMessageAt).not.toBeNull();
  });
});

describe("GET /api/threads", () => {
  it("lists only the caller's threads, most recently active first, with message count, last message time and latest turn status", async () => {
    const quiet = await createThread("lister", { title: "quiet" });
    const busy = await seedThread(bed.db.pool, { turns: 3, userId: "lister" });
    await createThread("someone-else", { title: "not yours" });
    await setActivity(quiet.id, new Date("2026-01-01T00:00:00.000Z"));

    const page = await listPage("lister");
    expect(page.threads.map((t) => t.id)).toEqual([busy.threadId, quiet.id]);
    expect(page.threads[0]).toMatchObject({ messageCount: 6, latestTurnStatus: "completed" });
    expect(page).toMatchObject({ hasMore: false, nextCursor: null, nextCursorTimestamp: null, nextCursorId: null });
  });

  it("pages stay stable while threads are updated and created between pages: no thread twice, none skipped but the one that moved ahead, and a fresh first page shows the moves", async () => {
    const userId = "pager";
    const ids: string[] = [];
    for (let i = 0; i < 10; i += 1) {
      const id = (await createThread(userId, { title: `thread ${i}` })).id;
      // thread 0 is the oldest, thread 9 the most recently active.
      await setActivity(id, new Date(Date.UTC(2026, 0, 1, 0, 0, i)));
      ids.push(id);
    }
    const expectedOrder = [...ids].reverse();

    const first = await listPage(userId, { limit: "3" });
    expect(first.threads.map((t) => t.id)).toEqual(expectedOrder.slice(0, 3));
    expect(first.hasMore).toBe(true);

    // Between pages: a thread already seen gets a message, a new thread is created, and a thread
    // not yet seen (the oldest) gets a message. Both active threads move to the front.
    const seenAndActive = expectedOrder[1]!;
    const unseenAndActive = expectedOrder[9]!;
    await appendTurn(seenAndActive, userId, "more on a seen thread");
    const created = (await createThread(userId, { title: "created between pages" })).id;
    await appendTurn(unseenAndActive, userId, "more on an unseen thread");

    const pages = [first];
    while (pages.at(-1)!.hasMore) pages.push(await listPage(userId, { limit: "3", cursor: pages.at(-1)!.nextCursor! }));

    const shown = pages.flatMap((p) => p.threads.map((t) => t.id));
    expect(new Set(shown).size).toBe(shown.length);
    // Later pages continue exactly where the earlier ones stopped, in the order as it was.
    expect(shown).toEqual(expectedOrder.filter((id) => id !== unseenAndActive));
    for (const page of pages) expect(inListOrder(page.threads)).toBe(true);

    const fresh = await listPage(userId, { limit: "3" });
    expect(fresh.threads.map((t) => t.id)).toEqual([unseenAndActive, created, seenAndActive]);
  });

  it("accepts use-agent's cursorTimestamp + cursorId as the same position as nextCursor", async () => {
    const userId = "agent-pager";
    for (let i = 0; i < 5; i += 1)
      await setActivity((await createThread(userId)).id, new Date(Date.UTC(2026, 1, 1, 0, 0, i)));
    const first = await listPage(userId, { limit: "2" });
    const byCursor = await listPage(userId, { limit: "2", cursor: first.nextCursor! });
    const byFields = await listPage(userId, {
      limit: "2",
      cursorTimestamp: first.nextCursorTimestamp!,
      cursorId: first.nextCursorId!,
    });
    expect(byFields).toEqual(byCursor);
    expect(byCursor.threads).toHaveLength(2);
  });

  it("refuses a cursor it did not return, a limit out of range and half of use-agent's cursor (400)", async () => {
    const queries: Record<string, string>[] = [
      { cursor: "bm90LWEtY3Vyc29y" },
      { limit: "0" },
      { limit: "101" },
      { cursorId: randomUUID() },
      { offset: "20" },
    ];
    for (const query of queries) {
      const response = await call("GET", `/api/threads?${new URLSearchParams(query)}`, "lister");
      expect(response.status, JSON.stringify(query)).toBe(400);
    }
  });

  it("is one index range scan in list order (threads_user_activity_idx), without a sort, on 20,000 threads of 200 users", async () => {
    await bed.db.pool.query(
      `INSERT INTO threads (id, user_id, last_activity_at)
       SELECT gen_random_uuid(), 'bulk-' || (i % 200), date_trunc('milliseconds', now()) - i * interval '1 second' FROM generate_series(1, 20000) i`,
    );
    await bed.db.pool.query("ANALYZE threads");
    const { selectThreadPageAfter } = await import("../src/history/threads-sql.js");
    const { rows } = await bed.db.pool.query(`EXPLAIN (FORMAT JSON) ${selectThreadPageAfter}`, [
      "bulk-7",
      new Date(),
      randomUUID(),
      21,
    ]);
    // Limit over the index scan itself: the cursor is an index condition, not a filter, and no sort.
    const limit = rows[0]["QUERY PLAN"][0].Plan;
    expect(limit["Node Type"]).toBe("Limit");
    const scan = limit.Plans[0];
    expect(scan).toMatchObject({
      "Node Type": "Index Scan",
      "Index Name": "threads_user_activity_idx",
      "Scan Direction": "Forward",
    });
    expect(scan["Index Cond"]).toMatch(/user_id = .*ROW\(last_activity_at, id\) < ROW/);
    expect(scan.Filter).toBeUndefined();
  });
});

describe("PATCH /api/threads/:threadId", () => {
  it("renames the thread (a user title) and replaces its metadata; the list shows the new title", async () => {
    const thread = await createThread("renamer", { metadata: { a: 1 } });
    const renamed = await call("PATCH", `/api/threads/${thread.id}`, "renamer", { title: "Renamed" });
    expect(renamed.status).toBe(200);
    const body = threadResponse.parse(await renamed.json());
    expect(body).toMatchObject({ title: "Renamed", titleSource: "user", metadata: { a: 1 } });
    expect(body.updatedAt >= thread.updatedAt).toBe(true);

    const remeta = threadResponse.parse(
      await (await call("PATCH", `/api/threads/${thread.id}`, "renamer", { metadata: { b: 2 } })).json(),
    );
    expect(remeta).toMatchObject({ title: "Renamed", metadata: { b: 2 } });
    expect((await listPage("renamer")).threads[0]).toMatchObject({ id: thread.id, title: "Renamed" });

    const untitled = threadResponse.parse(
      await (await call("PATCH", `/api/threads/${thread.id}`, "renamer", { title: null })).json(),
    );
    expect(untitled).toMatchObject({ title: null, titleSource: null });
  });

  it("answers 404 for another user's thread and changes nothing; 400 for a body with nothing to change", async () => {
    const thread = await createThread("renamer-2", { title: "Kept" });
    expect((await call("PATCH", `/api/threads/${thread.id}`, "intruder", { title: "Taken" })).status).toBe(404);
    expect((await call("PATCH", `/api/threads/${thread.id}`, "renamer-2", {})).status).toBe(400);
    expect((await call("GET", `/api/threads/${thread.id}`, "renamer-2").then((r) => r.json())).title).toBe("Kept");
  });
});

describe("DELETE /api/threads/:threadId", () => {
  it("removes the thread and every row keyed by it from every table, sends thread/deleted, and answers 404 afterwards", async () => {
    const other = await seedThread(bed.db.pool, { turns: 2, userId: "deleter" });
    const before = await tableRowCounts(bed.db.pool);
    const doomed = await seedThread(bed.db.pool, { turns: 3, userId: "deleter", toolTurns: [2], systemBefore: [1] });
    await bed.db.pool.query(
      "INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text) VALUES ($1, 1, 'summary')",
      [doomed.threadId],
    );
    await bed.db.pool.query(
      "INSERT INTO turns (run_id, thread_id, message_id, kind, variant, status) SELECT 'failed-' || id, thread_id, id, 'chat', 2, 'failed' FROM messages WHERE thread_id = $1 AND kind = 'user' LIMIT 1",
      [doomed.threadId],
    );

    const response = await call("DELETE", `/api/threads/${doomed.threadId}`, "deleter");
    expect(response.status).toBe(200);
    expect(threadDeletedResponse.parse(await response.json())).toEqual({
      threadId: doomed.threadId,
      deleted: true,
      announced: true,
    });
    expect(sent).toEqual([
      {
        id: `thread-deleted-${doomed.threadId}`,
        name: "thread/deleted",
        data: { threadId: doomed.threadId, userId: "deleter", reason: "user" },
      },
    ]);

    // Every row is gone; what remains is the thread's tombstone (its id and the time: migration 0016).
    expect(await tableRowCounts(bed.db.pool)).toEqual({ ...before, thread_tombstones: before.thread_tombstones! + 1 });
    expect((await call("GET", `/api/threads/${doomed.threadId}`, "deleter")).status).toBe(404);
    expect((await call("GET", `/api/threads/${doomed.threadId}/messages`, "deleter")).status).toBe(404);
    expect((await call("DELETE", `/api/threads/${doomed.threadId}`, "deleter")).status).toBe(404);
    expect((await listPage("deleter")).threads.map((t) => t.id)).toEqual([other.threadId]);
  });

  it("every table that keys rows by a thread (a thread_id column, or a reference to threads or messages) deletes them with it", async () => {
    // A table added later without ON DELETE CASCADE would keep rows of deleted threads: this names it.
    const { rows } = await bed.db.pool.query<{ table_name: string; cascades: boolean }>(
      `SELECT c.table_name,
              EXISTS (SELECT 1 FROM pg_constraint k
                      WHERE k.conrelid = (quote_ident(c.table_name))::regclass AND k.contype = 'f'
                        AND k.confrelid IN ('threads'::regclass, 'messages'::regclass) AND k.confdeltype = 'c') AS cascades
       FROM information_schema.columns c
       WHERE c.table_schema = current_schema() AND c.column_name = 'thread_id'`,
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    // The tombstones outlive their threads on purpose (deletion is final: docs/data-lifecycle.md), and
    // so does the usage ledger (what was spent stays spent, for budgets and the usage API: docs/usage.md).
    expect(
      rows
        .filter((row) => !row.cascades)
        .map((row) => row.table_name)
        .sort(),
    ).toEqual(["thread_tombstones", "usage_records"]);
  });

  it("answers 404 for another user's thread and deletes nothing", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 1, userId: "keeper" });
    const before = await tableRowCounts(bed.db.pool);
    expect((await call("DELETE", `/api/threads/${thread.threadId}`, "intruder")).status).toBe(404);
    expect(await tableRowCounts(bed.db.pool)).toEqual(before);
    expect(sent).toEqual([]);
  });

  it("still deletes when Inngest is unreachable, and says the event was not sent", async () => {
    const { app: offline } = createTestApp(bed.db.pool, {
      sendEvent: () => Promise.reject(new Error("connect ECONNREFUSED")),
    });
    const thread = await createThread("offline-deleter");
    const response = await offline.request(`/api/threads/${thread.id}`, {
      method: "DELETE",
      headers: await headersFor("offline-deleter"),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ threadId: thread.id, deleted: true, announced: false });
    expect((await call("GET", `/api/threads/${thread.id}`, "offline-deleter")).status).toBe(404);
  });
});

describe("message count and activity (kept by the messages triggers)", () => {
  it("counts current-path messages: a regenerate that takes an answer off the path keeps the count at what the path shows", async () => {
    const { threadId, userId } = await seedThread(bed.db.pool, { turns: 2, userId: "counter" });
    const { rows } = await bed.db.pool.query<{ id: string; seq: string }>(
      "SELECT id, seq FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq",
      [threadId],
    );
    const first = rows[0]!;
    // Regenerating the first message: its answer and the later turn leave the path, a new answer joins it.
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
          content: { output: [{ type: "text", role: "assistant", content: "again" }], toolCalls: [] },
        },
      ],
    });
    const onPath = (
      await bed.db.pool.query("SELECT count(*)::int AS n FROM messages WHERE thread_id = $1 AND on_path", [threadId])
    ).rows[0].n;
    const item = threadResponse.parse(await (await call("GET", `/api/threads/${threadId}`, userId)).json());
    expect(onPath).toBe(2);
    expect(item.messageCount).toBe(onPath);
  });
});
