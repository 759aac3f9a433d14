import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import type { Hono } from "hono";
import pg from "pg";
import { SSEStreamingApi } from "hono/streaming";
import { afterAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { eventRoutes } from "../src/api/events.js";
import type { AuthEnv } from "../src/auth/identity.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createEventRetention } from "../src/functions/event-retention.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { requestApproval } from "../src/history/approvals.js";
import { appendEvents, readEventsAfter, type NewEvent } from "../src/history/events.js";
import { beginTurn } from "../src/history/store.js";
import { storeModelTitle } from "../src/history/titles.js";
import { cancelTurn, failTurn, findEarlierTurn } from "../src/history/turns.js";
import { logger } from "../src/platform/logger.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { createStreamSlots } from "../src/stream/stream-slots.js";
import { createThreadFeeds, type ThreadFeeds } from "../src/stream/thread-feeds.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { asUser, createTestApp, headersFor, listen, routesAs, type Listening } from "./helpers/http.js";
import { expectConsecutive, openEventStream } from "./helpers/sse.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const notifiers: EventNotifier[] = [];
const servers: Listening[] = [];
afterAll(async () => {
  for (const server of servers) await server.close();
  await Promise.all(notifiers.map((notifier) => notifier.close()));
});

/** The app in process and over HTTP (a listening server, where the event route writes Node's response itself). */
async function bothTransports(app: Hono<AuthEnv>) {
  const server = await listen(app.fetch);
  servers.push(server);
  return [app, { request: (path: string, init?: RequestInit) => fetch(`${server.url}${path}`, init) }];
}

/** An app instance as a process runs it: its own LISTEN connection. */
function appInstance() {
  const events = createEventNotifier(bed.db.pool);
  notifiers.push(events);
  return { app: createTestApp(bed.db.pool, { events }).app, events };
}

/** Waits until `done()` holds, polling briefly, at most 5 seconds. */
async function until(done: () => boolean) {
  const deadline = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("condition not reached within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A thread of user-1 with an empty event log. */
async function newThread() {
  const threadId = crypto.randomUUID();
  await bed.db.pool.query("INSERT INTO threads (id, user_id) VALUES ($1, 'user-1')", [threadId]);
  return threadId;
}

const note = (key: string): NewEvent => ({
  key,
  event: "text.delta",
  data: { partId: key, messageId: "m", delta: key },
});
const write = (threadId: string, ...keys: string[]) =>
  appendEvents(bed.db.pool, { threadId, runId: "writer", attempt: 0, events: keys.map(note) });
const logOf = async (threadId: string) =>
  (
    await bed.db.pool.query<{ id: string; event: string; key: string }>(
      "SELECT id, event, key FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [threadId],
    )
  ).rows;

describe("GET /api/threads/:threadId/events", () => {
  it("a client that disconnects after event k and reconnects with Last-Event-ID k receives k+1… once each, in order, including what was written while away", async () => {
    const { app, events } = appInstance();
    const threadId = await newThread();
    await write(threadId, "a", "b", "c");

    const first = await openEventStream(app, threadId);
    expect(first.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await first.waitFor(3);
    expectConsecutive(first.received, 1);
    await first.close();

    await write(threadId, "d", "e");
    const again = await openEventStream(app, threadId, { lastEventId: 3 });
    await again.waitFor(2);
    await write(threadId, "f");
    await write(threadId, "g", "h");
    await again.waitFor(5);
    expect(again.received.map((e) => e.data.delta)).toEqual(["d", "e", "f", "g", "h"]);
    expectConsecutive(again.received, 4);
    // ?after= is the same resume point for a client that cannot set the header.
    const byQuery = await openEventStream(app, threadId, { after: 6 });
    await byQuery.waitFor(2);
    expect(byQuery.received.map((e) => e.id)).toEqual([7, 8]);
    await Promise.all([again.close(), byQuery.close()]);
    expect(again.received).toHaveLength(5);
    // Each disconnected client's stream ended on the server: nothing is left subscribed.
    await until(() => events.subscriptions === 0);
  });

  it("a replay longer than a page arrives whole, in order, byte for byte what writeSSE writes row by row", async () => {
    const { app, events } = appInstance();
    const threadId = await newThread();
    const awkward = ['quote " and backslash \\', "line\nbreak\r\n", "\u2028 ünïcödé 🙂", "\u0001 control"];
    const keys = Array.from({ length: 1_203 }, (_, i) => `${awkward[i % awkward.length]} ${i}`);
    await write(threadId, ...keys);

    // What hono's writeSSE writes for each row, as the route wrote them before replaying a page in one write.
    const rows = await readEventsAfter(bed.db.pool, threadId, 0, 2_000);
    const { readable, writable } = new TransformStream();
    const reference = new SSEStreamingApi(writable, readable);
    const expected = new Response(reference.responseReadable).text();
    for (const row of rows)
      await reference.writeSSE({ id: String(row.id), event: row.event, data: JSON.stringify(row.data) });
    await reference.close();

    const controller = new AbortController();
    const response = await app.request(`/api/threads/${threadId}/events`, {
      headers: await headersFor("user-1"),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (text.split("\n\n").length <= rows.length)
      text += decoder.decode((await reader.read()).value, { stream: true });
    controller.abort();
    await reader.cancel().catch(() => undefined);
    expect(text).toBe(await expected);
    await until(() => events.subscriptions === 0);
  });

  it("a reconnect whose backlog is many pages reaches a client that reads at its own pace whole, and the stream stays open", async () => {
    const { app, events } = appInstance();
    const server = await listen(app.fetch);
    servers.push(server);
    const threadId = await newThread();
    // 12 MB of streamed text: more than the socket buffers between server and client hold, three pages.
    const rows = 12_000;
    for (let batch = 0; batch < rows / 1_000; batch += 1)
      await write(threadId, ...Array.from({ length: 1_000 }, (_, i) => `${batch}-${i} ${"x".repeat(1_000)}`));

    const controller = new AbortController();
    const response = await fetch(`${server.url}/api/threads/${threadId}/events`, {
      headers: await headersFor("user-1"),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    const ids: number[] = [];
    let pending = "";
    let ended = false;
    let unpaused = 0;
    while (ids.length < rows) {
      const { done, value } = await reader.read();
      if (done) {
        ended = true;
        break;
      }
      pending += decoder.decode(value, { stream: true });
      const frames = pending.split("\n\n");
      pending = frames.pop()!;
      for (const frame of frames) ids.push(Number(frame.slice(frame.lastIndexOf("\nid: ") + 5)));
      // A client on a slower network than loopback (~12 MB/s): the server writes faster than it reads.
      unpaused += value.length;
      if (unpaused < 128 * 1024) continue;
      unpaused = 0;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    expect({ ended, received: ids.length }).toEqual({ ended: false, received: rows });
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    await until(() => events.subscriptions === 0);
  });

  it("a client that stops reading a busy thread is let go before its rows fill the server's memory, and resumes whole", async () => {
    const events = createEventNotifier(bed.db.pool);
    notifiers.push(events);
    const feeds = createThreadFeeds({
      db: bed.db.pool,
      events,
      pageLimit: { rows: 100, bytes: 512 * 1024 },
      maxQueuedBytes: 1024 * 1024,
    });
    const slots = createStreamSlots({ perUser: 10, perProcess: 10 });
    const routes = eventRoutes({ db: bed.db.pool, sendEvent: async () => ({ ids: [] }), events, feeds, slots });
    const server = await listen(routesAs("user-1", "/api/threads", routes).fetch);
    servers.push(server);
    const http = { request: (path: string, init?: RequestInit) => fetch(`${server.url}${path}`, init) };
    const threadId = await newThread();
    const stalled = await fetch(`${server.url}/api/threads/${threadId}/events`);
    expect(stalled.status).toBe(200);

    // 64 rows of 256 KiB, far fewer rows than the queue bound: their bytes, past what the sockets
    // hold, wait for a client that reads nothing.
    const big = "y".repeat(256 * 1024);
    for (let n = 0; n < 64; n += 1)
      await appendEvents(bed.db.pool, {
        threadId,
        runId: "big-writer",
        attempt: 0,
        events: [{ key: `big-${n}`, event: "text.delta", data: { partId: "p", messageId: "m", delta: big } }],
      });
    await until(() => slots.open("user-1") === 0);

    // What it had been sent before it was let go arrives, in order, and a resume brings the rest.
    const reader = stalled.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const read = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (read.done) break;
      text += decoder.decode(read.value, { stream: true });
    }
    const sent = text
      .split("\n\n")
      .slice(0, -1)
      .map((frame) => Number(frame.slice(frame.lastIndexOf("\nid: ") + 5)));
    expect(sent).toEqual(sent.map((_, i) => i + 1));
    const resumed = await openEventStream(http, threadId, { lastEventId: sent.length });
    await resumed.waitFor(64 - sent.length);
    expectConsecutive(resumed.received, sent.length + 1);
    await resumed.close();
  });

  it("two app instances on one database both deliver an event written by either", async () => {
    const one = appInstance();
    const two = appInstance();
    const threadId = await newThread();
    const [a, b] = await Promise.all([openEventStream(one.app, threadId), openEventStream(two.app, threadId)]);
    await write(threadId, "from one");
    await appendEvents(bed.db.pool, { threadId, runId: "another-writer", attempt: 0, events: [note("from two")] });
    await Promise.all([a.waitFor(2), b.waitFor(2)]);
    expect(a.received).toEqual(b.received);
    expect(a.received.map((e) => e.data.delta)).toEqual(["from one", "from two"]);
    await Promise.all([a.close(), b.close()]);
  });

  it("sends a heartbeat comment while nothing happens", async () => {
    const { events } = appInstance();
    const threadId = await newThread();
    // The route alone, its heartbeat shortened, behind a stand-in for the authentication middleware.
    const app = routesAs(
      "user-1",
      "/api/threads",
      eventRoutes(
        {
          db: bed.db.pool,
          sendEvent: async () => ({ ids: [] }),
          events,
          feeds: createThreadFeeds({ db: bed.db.pool, events }),
          slots: createStreamSlots(),
        },
        20,
      ),
    );
    for (const transport of await bothTransports(app)) {
      const stream = await openEventStream(transport, threadId);
      await stream.waitForHeartbeat();
      expect(stream.received).toEqual([]);
      await stream.close();
    }
  });

  it("a failed read ends the stream with an error event (its cause logged, not sent), frees the caller's slot", async () => {
    const logged = vi.spyOn(logger, "error");
    const failure = new Error('relation "thread_events" does not exist');
    // A feed whose read fails mid-stream (as when the database does), behind the route alone.
    const feeds: ThreadFeeds = {
      feeds: 0,
      follow: async () => ({
        next: async () => ({ failed: failure }),
        take: () => ({ failed: failure }),
        close: () => undefined,
        whenBehind: () => undefined,
      }),
    };
    const events = createEventNotifier(bed.db.pool);
    notifiers.push(events);
    const app = routesAs(
      "user-1",
      "/api/threads",
      eventRoutes({
        db: bed.db.pool,
        sendEvent: async () => ({ ids: [] }),
        events,
        feeds,
        slots: createStreamSlots({ perUser: 1, perProcess: 10 }),
      }),
    );
    const threadId = crypto.randomUUID();
    // One stream a user at a time: the second is answered only if the first gave its slot back.
    for (const transport of [...(await bothTransports(app)), ...(await bothTransports(app))]) {
      const response = await transport.request(`/api/threads/${threadId}/events`);
      expect(response.status).toBe(200);
      expect(await response.text()).toBe(
        "event: error\ndata: The event stream failed: reconnect with Last-Event-ID to resume where it stopped.\n\n",
      );
    }
    expect(logged).toHaveBeenCalledWith(expect.objectContaining({ err: failure, threadId }), "event stream failed");
  });

  it("another user's thread answers 404 like an unknown one; a bad Last-Event-ID is a 400", async () => {
    const { app } = appInstance();
    const threadId = await newThread();
    expect((await asUser(app, "user-2").get(`/api/threads/${threadId}/events`)).status).toBe(404);
    expect((await asUser(app, "user-1").get(`/api/threads/${crypto.randomUUID()}/events`)).status).toBe(404);
    expect(
      (await app.request(`/api/threads/${threadId}/events?after=x`, { headers: { authorization: "Bearer nope" } }))
        .status,
    ).toBe(401);
    expect((await asUser(app, "user-1").get(`/api/threads/${threadId}/events?after=-1`)).status).toBe(400);
  });

  it("answers a malformed thread id, ?after= or Last-Event-ID with a 400 naming the field", async () => {
    const { app } = appInstance();
    const threadId = await newThread();
    const headers = await headersFor("user-1");
    const refused = async (path: string, lastEventId?: string) => {
      const response = await app.request(path, {
        headers: lastEventId === undefined ? headers : { ...headers, "last-event-id": lastEventId },
      });
      expect(response.status).toBe(400);
      return ((await response.json()) as { issues: { field: string }[] }).issues.map((issue) => issue.field);
    };
    expect(await refused("/api/threads/not-a-uuid/events")).toEqual(["threadId"]);
    expect(await refused(`/api/threads/${threadId}/events?after=1&after=2`)).toEqual(["after"]);
    expect(await refused(`/api/threads/${threadId}/events?after=1234567890123456`)).toEqual(["after"]);
    expect(await refused(`/api/threads/${threadId}/events?after=1`, "one")).toEqual(["last-event-id"]);
  });

  it("keeps following after the LISTEN connection drops, and ends every stream when its notifier closes", async () => {
    const events = createEventNotifier(bed.db.pool);
    const app = createTestApp(bed.db.pool, { events }).app;
    const threadId = await newThread();
    const stream = await openEventStream(app, threadId);
    await write(threadId, "before");
    await stream.waitFor(1);

    await bed.db.pool.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN threadline_events' AND datname = current_database()",
    );
    await write(threadId, "while reconnecting");
    await stream.waitFor(2);
    expect(stream.received.map((e) => e.data.delta)).toEqual(["before", "while reconnecting"]);

    await events.close();
    await stream.waitForEnd();
    expect(events.closed).toBe(true);
  });
});

/**
 * A TCP proxy to the test database: `partition()` stops carrying bytes on the connections open
 * now, both ways, without closing them (a network that drops packets, a NAT that forgot the
 * connection); later connections are carried.
 */
async function partitionableProxy(target: URL) {
  const open = new Set<{ client: Socket; upstream: Socket }>();
  const all: Socket[] = [];
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    const pair = { client, upstream };
    open.add(pair);
    all.push(client, upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const gone = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", gone).on("close", gone);
    upstream.on("error", gone).on("close", gone);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(target);
  url.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: url.toString(),
    partition: () => {
      for (const { client, upstream } of open) {
        client.unpipe(upstream).pause();
        upstream.unpipe(client).pause();
      }
      open.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of all) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("a LISTEN connection that goes silent", () => {
  it("is found dead and replaced: a stream following the thread gets what was written meanwhile", async () => {
    const proxy = await partitionableProxy(new URL(bed.db.url));
    // The notifier's connection goes through the proxy; the app's reads do not.
    const listenPool = new pg.Pool({ connectionString: proxy.url });
    const events = createEventNotifier(listenPool, { pingMs: 200 });
    onTestFinished(async () => {
      await proxy.close();
      await events.close();
      await listenPool.end();
    });
    const { app } = createTestApp(bed.db.pool, { events });
    const server = await listen(app.fetch);
    servers.push(server);
    const threadId = await newThread();
    const stream = await openEventStream({ request: (path, init) => fetch(`${server.url}${path}`, init) }, threadId);
    await write(threadId, "before going silent");
    await stream.waitFor(1);

    proxy.partition();
    await write(threadId, "while silent");
    await stream.waitFor(2);
    expect(stream.received.map((e) => e.data.delta)).toEqual(["before going silent", "while silent"]);
    await stream.close();
  });
});

describe("a notifier closed while its LISTEN connection is silent", () => {
  it("closes, ending its streams, without waiting for the dead connection's goodbye", async () => {
    const proxy = await partitionableProxy(new URL(bed.db.url));
    const listenPool = new pg.Pool({ connectionString: proxy.url });
    const events = createEventNotifier(listenPool);
    onTestFinished(async () => {
      await proxy.close();
      await listenPool.end();
    });
    const { app } = createTestApp(bed.db.pool, { events });
    const threadId = await newThread();
    const stream = await openEventStream(app, threadId);
    await write(threadId, "before the shutdown");
    await stream.waitFor(1);

    proxy.partition();
    await events.close();
    await stream.waitForEnd();
  });
});

describe("the thread event log", () => {
  it("a chat turn logs AgentKit's chunks and ends with stream.ended; running every step again (same run) adds nothing", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), eventLog: true });
    bed.model.script({ text: "Hello there" });
    const event = chatEvent({ content: "Hi" });
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    const threadId = event.data.messageId;
    const log = await logOf(threadId);
    expect(log.map((row) => row.event)).toEqual([
      "run.started",
      "run.started",
      "part.created",
      "text.delta",
      "part.completed",
      "run.completed",
      "stream.ended",
    ]);
    expect(log.map((row) => Number(row.id))).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const delta = await bed.db.pool.query(
      "SELECT data FROM thread_events WHERE thread_id = $1 AND event = 'text.delta'",
      [threadId],
    );
    expect(delta.rows[0].data).toMatchObject({ delta: "Hello there" });

    // The same run re-entered with no memoized step: every write happens again, inserts nothing.
    bed.model.script({ text: "Hello there" });
    const rerun = await execute(chatTurn, event, { runId: run.runId });
    expect(rerun.error).toBeUndefined();
    expect(await logOf(threadId)).toEqual(log);
  });

  it("a regenerate logs its chunks and ends with the new variant stored", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ text: "First" });
    const event = chatEvent({ content: "Hi" });
    expect((await execute(chatTurn, event)).error).toBeUndefined();
    const threadId = event.data.messageId;
    bed.model.script({ text: "Second" });
    const regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model), eventLog: true });
    const run = await execute(regenerate, {
      name: "chat/message.regenerate",
      data: { threadId, messageId: event.data.messageId, userId: "user-1" },
    });
    expect(run.error).toBeUndefined();
    const log = await bed.db.pool.query<{ event: string; data: { status?: string; variant?: number; delta?: string } }>(
      "SELECT event, data FROM thread_events WHERE run_id = $1 ORDER BY id",
      [run.runId],
    );
    expect(log.rows.map((row) => row.event)).toEqual([
      "run.started",
      "run.started",
      "part.created",
      "text.delta",
      "part.completed",
      "run.completed",
      "stream.ended",
    ]);
    expect(log.rows[3]!.data.delta).toBe("Second");
    expect(log.rows[6]!.data).toMatchObject({ status: "completed", variant: 2 });
  });

  it("a second run of an answered message logs nothing (no second stream.ended) and stores nothing", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), eventLog: true });
    bed.model.script({ text: "Once" });
    const event = chatEvent({ content: "Hi" });
    expect((await execute(chatTurn, event)).error).toBeUndefined();
    const again = await execute(chatTurn, event);
    expect(again.result).toMatchObject({ status: "skipped" });
    const log = await bed.db.pool.query<{ event: string; data: { status?: string } }>(
      "SELECT event, data FROM thread_events WHERE run_id = $1 ORDER BY id",
      [again.runId],
    );
    // The re-run rule (docs/engine.md): a run that finds its message answered as it begins has no stream.
    expect(log.rows.map((row) => [row.event, row.data.status ?? null])).toEqual([]);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((row) => row.kind)).toEqual(["user", "agent"]);
  });

  it("without chunk logging (EVENT_LOG_CHUNKS unset, the default) a turn logs only its outcome: the answer's ending once, whatever re-runs", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ text: "Once" });
    const event = chatEvent({ content: "Hi" });
    const first = await execute(chatTurn, event);
    expect(first.error).toBeUndefined();
    const again = await execute(chatTurn, event);
    expect(again.result).toMatchObject({ status: "skipped" });
    const log = await bed.db.pool.query<{ run_id: string; event: string; data: { status?: string } }>(
      "SELECT run_id, event, data FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [event.data.messageId],
    );
    expect(log.rows.map((row) => [row.run_id, row.event, row.data.status ?? null])).toEqual([
      [first.runId, "stream.ended", "completed"],
    ]);
  });

  it("a retried run adds no duplicate events: the chunks before the failed inference are written once", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), eventLog: true });
    bed.model.script({ status: 500 });
    const event = chatEvent({ content: "Hi" });
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    // The failed attempt is logged for the client (turn.retrying), once.
    expect((await logOf(event.data.messageId)).map((row) => row.event)).toEqual([
      "run.started",
      "run.started",
      "turn.retrying",
    ]);

    bed.model.script({ text: "Second try" });
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    const log = await logOf(event.data.messageId);
    expect(log.map((row) => row.event)).toEqual([
      "run.started",
      "run.started",
      "turn.retrying",
      "part.created",
      "text.delta",
      "part.completed",
      "run.completed",
      "stream.ended",
    ]);
    expect(new Set(log.map((row) => row.key)).size).toBe(log.length);
  });

  it("stream.ended is committed by the transaction that stores the answer, and by the one that records a failure", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ text: "Stored with its ending" });
    const event = chatEvent({ content: "Hi" });
    expect((await execute(chatTurn, event)).error).toBeUndefined();
    const threadId = event.data.messageId;
    const written = await bed.db.pool.query<{ event: string; data: { status: string }; xid: string }>(
      "SELECT event, data, xmin::text AS xid FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [threadId],
    );
    expect(written.rows.map((row) => [row.event, row.data.status])).toEqual([["stream.ended", "completed"]]);
    const answer = await bed.db.pool.query<{ xid: string }>(
      "SELECT xmin::text AS xid FROM messages WHERE thread_id = $1 AND kind = 'agent'",
      [threadId],
    );
    expect(answer.rows).toHaveLength(1);
    expect(answer.rows[0]!.xid).toBe(written.rows[0]!.xid);
    expect((await threadRows(bed.db.pool, threadId)).map((row) => row.kind)).toEqual(["user", "agent"]);

    bed.model.script({ status: 500 });
    const second = chatEvent({ content: "Fails", threadId });
    const failed = await execute(chatTurn, second);
    expect(failed.error).toBeDefined();
    await failTurn(bed.db.pool, failed.runId, "The model failed.");
    await failTurn(bed.db.pool, failed.runId, "The model failed.");
    const ended = await bed.db.pool.query<{ event: string; data: { status?: string; error?: string }; xid: string }>(
      "SELECT event, data, xmin::text AS xid FROM thread_events WHERE thread_id = $1 AND run_id = $2 ORDER BY id",
      [threadId, failed.runId],
    );
    expect(ended.rows.map((row) => row.event)).toEqual(["turn.retrying", "turn.failed", "stream.ended"]);
    expect(ended.rows[1]!.data.error).toBe("The model failed.");
    const turn = await bed.db.pool.query<{ status: string; xid: string }>(
      "SELECT status, xmin::text AS xid FROM turns WHERE run_id = $1",
      [failed.runId],
    );
    expect(turn.rows[0]).toEqual({ status: "failed", xid: ended.rows[2]!.xid });
  });

  it("a cancelled turn logs turn.cancelled and stream.ended with the cancellation, once", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ status: 500 });
    const event = chatEvent({ content: "Cancel me" });
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(await cancelTurn(bed.db.pool, failed.runId)).toEqual({
      threadId: event.data.messageId,
      messageId: event.data.messageId,
    });
    expect(await cancelTurn(bed.db.pool, failed.runId)).toBeNull();
    const log = await bed.db.pool.query<{ event: string; data: { status?: string } }>(
      "SELECT event, data FROM thread_events WHERE run_id = $1 ORDER BY id",
      [failed.runId],
    );
    expect(log.rows.map((row) => [row.event, row.data.status ?? null])).toEqual([
      ["turn.retrying", null],
      ["turn.cancelled", null],
      ["stream.ended", "cancelled"],
    ]);
  });

  it("a turn presumed lost by a later turn's wait is logged as failed and ended", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ status: 500 });
    const event = chatEvent({ content: "Lost" });
    const lost = await execute(chatTurn, event);
    expect(lost.error).toBeDefined();
    const threadId = event.data.messageId;
    await bed.db.pool.query(
      "SELECT * FROM threadline_begin_turn($1, 'user-1', $2, 'Next', NULL, 'run-waiting', 'chat', NULL, NULL)",
      [threadId, crypto.randomUUID()],
    );
    expect(await findEarlierTurn(bed.db.pool, { runId: "run-waiting", abandon: lost.runId })).toEqual({
      earlier: null,
      skipped: false,
    });
    const log = await bed.db.pool.query<{ event: string; data: { status?: string } }>(
      "SELECT event, data FROM thread_events WHERE run_id = $1 ORDER BY id",
      [lost.runId],
    );
    expect(log.rows.map((row) => [row.event, row.data.status ?? null])).toEqual([
      ["turn.retrying", null],
      ["turn.failed", null],
      ["stream.ended", "failed"],
    ]);
  });

  it("ids are per thread, increasing, and assigned in commit order under concurrent writers", async () => {
    const threadId = await newThread();
    const other = { threadId: await newThread() };
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        appendEvents(bed.db.pool, { threadId, runId: `run-${i}`, attempt: 0, events: [note("x"), note("y")] }),
      ),
    );
    await write(other.threadId, "first");
    expect((await logOf(threadId)).map((row) => Number(row.id))).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect((await logOf(other.threadId)).map((row) => Number(row.id))).toEqual([1]);
  });

  it("deleting a thread deletes its events; pruning deletes events older than EVENT_LOG_RETENTION_HOURS in batches", async () => {
    const { app } = appInstance();
    const gone = { threadId: await newThread() };
    await write(gone.threadId, "a");
    expect(
      (await app.request(`/api/threads/${gone.threadId}`, { method: "DELETE", headers: await headersFor("user-1") }))
        .status,
    ).toBe(200);
    expect(await logOf(gone.threadId)).toEqual([]);

    const threadId = await newThread();
    await write(threadId, "old-1", "old-2", "old-3", "new");
    await bed.db.pool.query(
      "UPDATE thread_events SET created_at = now() - interval '3 hours' WHERE thread_id = $1 AND key LIKE 'old-%'",
      [threadId],
    );
    const run = await execute(createEventRetention({ db: bed.db.pool, eventRetentionHours: 2 }), {
      name: "inngest/scheduled.timer",
      data: {},
    });
    expect(run.error).toBeUndefined();
    expect((await logOf(threadId)).map((row) => row.key)).toEqual(["new"]);
  });
});

describe("pruning while a turn waits on an approval", () => {
  it("keeps the waiting turn's events: a useChat resume after EVENT_LOG_RETENTION_HOURS still shows the call awaiting approval", async () => {
    const { app } = appInstance();
    const threadId = crypto.randomUUID();
    const messageId = crypto.randomUUID();
    const runId = `run-${messageId}`;
    await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: messageId, text: "Roll a d20" },
      turn: { runId, kind: "chat" },
    });
    await requestApproval(bed.db.pool, {
      approvalId: crypto.randomUUID(),
      runId,
      toolCallId: "call_dice",
      toolName: "roll_dice",
      arguments: { sides: 20 },
      expiresInSeconds: 48 * 3600,
    });
    // The approval waits longer than the log is kept; another thread's old events go as before.
    const quiet = await newThread();
    await write(quiet, "old");
    await bed.db.pool.query(
      "UPDATE thread_events SET created_at = now() - interval '3 hours' WHERE thread_id = ANY($1)",
      [[threadId, quiet]],
    );

    const run = await execute(createEventRetention({ db: bed.db.pool, eventRetentionHours: 2 }), {
      name: "inngest/scheduled.timer",
      data: {},
    });

    expect(run.error).toBeUndefined();
    expect(await logOf(quiet)).toEqual([]);
    const resumed = await app.request(`/api/ui/chat/${threadId}/stream`, { headers: await headersFor("user-1") });
    expect(resumed.status).toBe(200);
    const body = await Promise.race([
      resumed.text(),
      new Promise<string>((resolve) => setTimeout(() => resolve("(still open after 3 s)"), 3_000)),
    ]);
    expect(body).toContain('"type":"tool-approval-request"');
    expect(body).toContain('"status":"awaiting_approval"');
  });
});

describe("title.changed", () => {
  it("a rename and a model title are logged with the title, in the statement that stores it", async () => {
    const { app } = appInstance();
    const threadId = await newThread();
    expect(await storeModelTitle(bed.db.pool, threadId, "Model title")).toEqual({ stored: true });
    expect(await storeModelTitle(bed.db.pool, threadId, "Another")).toEqual({ stored: false });
    const renamed = await app.request(`/api/threads/${threadId}`, {
      method: "PATCH",
      headers: await headersFor("user-1"),
      body: JSON.stringify({ title: "Mine" }),
    });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).not.toHaveProperty("titleEventId");
    const metadataOnly = await app.request(`/api/threads/${threadId}`, {
      method: "PATCH",
      headers: await headersFor("user-1"),
      body: JSON.stringify({ metadata: { a: 1 } }),
    });
    expect(metadataOnly.status).toBe(200);
    const log = await bed.db.pool.query(
      "SELECT id::int, event, data FROM thread_events WHERE thread_id = $1 ORDER BY id",
      [threadId],
    );
    expect(log.rows).toEqual([
      { id: 1, event: "title.changed", data: { title: "Model title", titleSource: "model" } },
      { id: 2, event: "title.changed", data: { title: "Mine", titleSource: "user" } },
    ]);
  });
});
