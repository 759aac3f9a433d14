import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { appendEvents } from "../src/history/events.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import { createThreadFeeds } from "../src/stream/thread-feeds.js";
import { startLiveApp, type LiveApp } from "./helpers/live-app.js";
import { gate } from "./helpers/model-server.js";
import { openEventStream } from "./helpers/sse.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let app: LiveApp;

beforeAll(async () => {
  app = await startLiveApp(bed.db.pool, bed.model);
});
afterAll(() => app?.close());

/** The live app over real HTTP as one user (AUTH=dev: the header names the user; a bearer token is not sent). */
const asLiveUser = (userId: string) => ({
  request: (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.delete("authorization");
    headers.set("X-Threadline-User", userId);
    headers.set("content-type", "application/json");
    return fetch(`${app.url}${path}`, { ...init, headers });
  },
});

const call = (userId: string, method: string, path: string, body?: unknown) =>
  asLiveUser(userId).request(path, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

/** Three title.changed rows in the thread's log, written by renaming it as its owner. */
async function renameThrice(userId: string, threadId: string, title: string) {
  for (const n of [1, 2, 3])
    expect((await call(userId, "PATCH", `/api/threads/${threadId}`, { title: `${title} ${n}` })).status).toBe(200);
}

describe("streams stay the owner's", () => {
  it("a deleted id taken by another user: the first user's open stream ends with thread.deleted and receives nothing of the second user's", async () => {
    const threadId = randomUUID();
    expect((await call("ada", "POST", "/api/threads", { id: threadId })).status).toBe(201);
    expect((await call("ada", "PATCH", `/api/threads/${threadId}`, { title: "Ada's plans" })).status).toBe(200);
    const adas = await openEventStream(asLiveUser("ada"), threadId, { userId: "ada" });
    await adas.waitFor(1);

    // In one transaction, so that both reach Ada's stream in the same wake-up: the thread is deleted,
    // its tombstone pruned (as after THREAD_TOMBSTONE_DAYS), and Bob creates a thread under the same
    // id and writes more events than Ada's stream has seen (their ids start again from 1).
    const client = await bed.db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("DELETE FROM threads WHERE id = $1", [threadId]);
      await client.query("DELETE FROM thread_tombstones WHERE thread_id = $1", [threadId]);
      await client.query(
        "INSERT INTO threads (id, user_id, title, title_source) VALUES ($1, 'bob', 'Bob''s secret', 'user')",
        [threadId],
      );
      const secrets = [1, 2, 3].map((n) => ({
        key: `secret-${n}`,
        event: "title.changed",
        data: { title: `Bob's secret ${n}` },
      }));
      await client.query("SELECT threadline_append_events($1, NULL, 0, $2)", [threadId, JSON.stringify(secrets)]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }

    await adas.waitForEnd();
    expect(adas.received.map((e) => e.event)).toEqual(["title.changed", "thread.deleted"]);
    expect(adas.received[0]!.data).toEqual({ title: "Ada's plans", titleSource: "user" });
    expect(adas.received[1]!.data).toEqual({ threadId });
    expect(JSON.stringify(adas.received)).not.toContain("Bob");

    // Bob's own stream of the id is his thread's, from its beginning; Ada cannot open it.
    const bobs = await openEventStream(asLiveUser("bob"), threadId, { userId: "bob" });
    await bobs.waitFor(3);
    expect(bobs.received.map((e) => e.data.title)).toEqual(["Bob's secret 1", "Bob's secret 2", "Bob's secret 3"]);
    await bobs.close();
    expect((await call("ada", "GET", `/api/threads/${threadId}/events`)).status).toBe(404);
  });

  it("the owner's DELETE ends every open stream of the thread with thread.deleted, and the id stays refused", async () => {
    const threadId = randomUUID();
    expect((await call("ada", "POST", "/api/threads", { id: threadId })).status).toBe(201);
    await renameThrice("ada", threadId, "Draft");
    const streams = await Promise.all(
      [0, 2].map((after) => openEventStream(asLiveUser("ada"), threadId, { userId: "ada", after })),
    );
    await Promise.all([streams[0]!.waitFor(3), streams[1]!.waitFor(1)]);

    expect((await call("ada", "DELETE", `/api/threads/${threadId}`)).status).toBe(200);
    await Promise.all(streams.map((stream) => stream.waitForEnd()));
    expect(streams.map((stream) => stream.received.map((e) => e.event).at(-1))).toEqual([
      "thread.deleted",
      "thread.deleted",
    ]);
    expect(streams[1]!.received.map((e) => e.id)).toEqual([3, NaN]);

    expect((await call("bob", "POST", "/api/threads", { id: threadId })).status).toBe(409);
  });

  it("useChat's stream of a running turn ends with a data-thread-deleted part when the thread is deleted under it", async () => {
    const threadId = randomUUID();
    const held = gate();
    bed.model.script({
      text: "Once upon a time",
      stream: { chunks: ["Once ", "upon a time"], holdAfter: { chunks: 1, gate: held } },
    });
    const response = await call("ada", "POST", "/api/ui/chat", {
      id: threadId,
      trigger: "submit-message",
      messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text: "Tell me a story." }] }],
    });
    expect(response.status).toBe(200);
    await held.reached;
    expect((await call("ada", "DELETE", `/api/threads/${threadId}`)).status).toBe(200);
    held.release();
    const frames = (await response.text()).split("\n\n").filter((frame) => frame.startsWith("data: "));
    const chunks = frames.map((frame) => frame.slice("data: ".length));
    expect(chunks.at(-1)).toBe("[DONE]");
    const parsed = chunks.slice(0, -1).map((chunk) => JSON.parse(chunk) as { type: string; data?: unknown });
    expect(parsed.slice(-3)).toEqual([
      { type: "data-thread-deleted", data: { threadId }, transient: true },
      { type: "abort", reason: "thread.deleted" },
      { type: "finish", finishReason: "other", messageMetadata: { status: "deleted" } },
    ]);
  });
});

describe("a thread's feed", () => {
  it("ends a follower waiting to read on its backlog when a read that began before it asked finds the thread deleted", async () => {
    const events = createEventNotifier(bed.db.pool);
    // The feed's reads go through one connection, which the test holds: a read can be kept in flight.
    const reads = new pg.Pool({ connectionString: bed.db.url, max: 1 });
    onTestFinished(async () => {
      await events.close();
      await reads.end();
    });
    const feeds = createThreadFeeds({ db: reads, events, pageLimit: { rows: 2, bytes: 1024 * 1024 } });
    const threadId = randomUUID();
    await bed.db.pool.query("INSERT INTO threads (id, user_id) VALUES ($1, 'ada')", [threadId]);
    await appendEvents(bed.db.pool, {
      threadId,
      runId: "feed-writer",
      attempt: 0,
      events: [1, 2, 3, 4, 5].map((n) => ({
        key: `${n}`,
        event: "title.changed",
        data: { title: `T${n}`, titleSource: "user" },
      })),
    });
    // A replay longer than its first page: the rest is read once that page is taken.
    const behind = (await feeds.follow({ threadId, userId: "ada", afterId: 0 }))!;
    const live = (await feeds.follow({ threadId, userId: "ada", afterId: 5 }))!;

    const held = await reads.connect();
    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [threadId]);
    // The deletion's wake-up read waits for the connection; the first page is taken meanwhile.
    while (reads.waitingCount === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(behind.take()).toMatchObject({ frames: { firstId: 1, lastId: 2 } });
    held.release();

    expect(await live.next(5_000)).toEqual({ deleted: true });
    expect(await behind.next(5_000)).toEqual({ deleted: true });
    behind.close();
    live.close();
  });
});
