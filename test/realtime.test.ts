import { randomUUID } from "node:crypto";
import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { appendEvents } from "../src/history/events.js";
import {
  inngestRealtime,
  userChannel,
  type AgentStreamChunk,
  type RealtimePublisher,
} from "../src/stream/realtime-publisher.js";
import { startRealtimeRelay, type RealtimeRelay } from "../src/stream/realtime-relay.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** Inngest realtime as the tests see it: what was published, on which channel and topic, and the channels tokens were asked for. */
function fakeRealtime(fail: { publish?: boolean; token?: boolean } = {}) {
  const published: { channel: string; topic: string; chunk: AgentStreamChunk }[] = [];
  const tokensFor: string[] = [];
  const attempts = { publish: 0 };
  const publisher: RealtimePublisher = {
    async publish(userId, chunk) {
      attempts.publish += 1;
      if (fail.publish) throw new Error("realtime unreachable");
      published.push({ channel: userChannel(userId), topic: "agent_stream", chunk });
    },
    async subscriptionToken(userId) {
      tokensFor.push(userChannel(userId));
      if (fail.token) throw new Error("ECONNREFUSED");
      return { key: `token-for-${userId}`, channel: userChannel(userId), topics: ["agent_stream"] };
    },
  };
  return { publisher, published, tokensFor, fail, attempts };
}

async function threadOf(userId: string) {
  const threadId = randomUUID();
  await bed.db.pool.query("INSERT INTO threads (id, user_id) VALUES ($1, $2)", [threadId, userId]);
  return threadId;
}

const write = (threadId: string, ...deltas: string[]) =>
  appendEvents(bed.db.pool, {
    threadId,
    runId: null,
    attempt: 0,
    events: deltas.map((delta) => ({
      key: delta,
      event: "text.delta",
      data: { partId: delta, messageId: "m", delta },
    })),
  });

/** Waits until `done()` holds, polling briefly, at most 5 seconds. */
async function until(done: () => boolean) {
  const deadline = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("condition not reached within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("the realtime relay", () => {
  let events: EventNotifier;
  let relay: RealtimeRelay;
  const fake = fakeRealtime();
  let before: string;

  beforeAll(async () => {
    events = createEventNotifier(bed.db.pool);
    before = await threadOf("user-1");
    await write(before, "written before the relay started");
    relay = await startRealtimeRelay({ db: bed.db.pool, events, publisher: fake.publisher });
  });
  afterAll(async () => {
    await relay.close();
    await events.close();
  });

  it("publishes each event written to the log once, in order, on its thread owner's channel, topic agent_stream, in AgentKit's chunk shape", async () => {
    const alices = await threadOf("alice");
    const bobs = await threadOf("bob");
    await write(alices, "a1", "a2");
    await write(bobs, "b1");
    await write(alices, "a3");
    await write(before, "after the start");
    await until(() => fake.published.length >= 5);
    await relay.idle();

    const of = (channel: string) => fake.published.filter((p) => p.channel === channel);
    expect(
      of("user:alice").map((p) => [p.topic, p.chunk.data.delta, p.chunk.data.threadId, p.chunk.sequenceNumber]),
    ).toEqual([
      ["agent_stream", "a1", alices, 1],
      ["agent_stream", "a2", alices, 2],
      ["agent_stream", "a3", alices, 3],
    ]);
    expect(of("user:bob").map((p) => p.chunk)).toEqual([
      {
        event: "text.delta",
        data: { partId: "b1", messageId: "m", delta: "b1", threadId: bobs },
        timestamp: expect.any(Number),
        sequenceNumber: 1,
        id: `${bobs}:1`,
      },
    ]);
    // What was written before the relay started is not published; what came after is.
    expect(of("user:user-1").map((p) => p.chunk.data.delta)).toEqual(["after the start"]);

    // A dropped LISTEN connection wakes the relay for every thread it knows: nothing is published twice.
    await bed.db.pool.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN threadline_events' AND datname = current_database()",
    );
    await write(alices, "a4");
    await until(() => fake.published.some((p) => p.chunk.data.delta === "a4"));
    await relay.idle();
    expect(of("user:alice").map((p) => p.chunk.data.delta)).toEqual(["a1", "a2", "a3", "a4"]);
    expect(fake.published).toHaveLength(6);
  });

  it("a chat turn's ending reaches its owner's channel", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ text: "Hello" });
    const event = chatEvent({ content: "Hi", userId: "carol" });
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    await until(() => fake.published.some((p) => p.chunk.event === "stream.ended" && p.chunk.data.runId === run.runId));
    const ended = fake.published.find((p) => p.chunk.event === "stream.ended" && p.chunk.data.runId === run.runId)!;
    expect(ended.channel).toBe("user:carol");
    expect(ended.chunk.data).toMatchObject({
      status: "completed",
      threadId: event.data.messageId,
      messageId: event.data.messageId,
    });
  });
});

describe("a relay whose publishing fails", () => {
  it("logs it and publishes the same events, in order, on the thread's next event", async () => {
    const events = createEventNotifier(bed.db.pool);
    const fake = fakeRealtime({ publish: true });
    const relay = await startRealtimeRelay({ db: bed.db.pool, events, publisher: fake.publisher });
    const threadId = await threadOf("dave");
    await write(threadId, "first");
    await until(() => fake.attempts.publish === 1);
    await relay.idle();
    expect(fake.published).toEqual([]);
    fake.fail.publish = false;
    await write(threadId, "second");
    await until(() => fake.published.length >= 2);
    await relay.idle();
    expect(fake.published.map((p) => p.chunk.data.delta)).toEqual(["first", "second"]);
    await relay.close();
    await events.close();
  });
});

describe("a relay that has followed many threads", () => {
  it("holds only the threads active since its previous sweep; a forgotten thread's next event is published once, its earlier ones not again", async () => {
    const events = createEventNotifier(bed.db.pool);
    const fake = fakeRealtime();
    const relay = await startRealtimeRelay({ db: bed.db.pool, events, publisher: fake.publisher });
    const quiet = await threadOf("erin");
    const busy = await threadOf("frank");
    await write(quiet, "one");
    await until(() => fake.published.length === 1);
    // A thread still being relayed counts as awake: the sweeps judge threads at rest.
    await relay.idle();
    await relay.sweep();
    await write(busy, "still talking");
    await until(() => fake.published.length === 2);
    await relay.idle();
    await relay.sweep();
    // The quiet thread is forgotten; the one written to since the first sweep is kept.
    expect(relay.threads).toBe(1);

    await write(quiet, "two");
    await until(() => fake.published.some((p) => p.chunk.data.delta === "two"));
    await relay.idle();
    const erins = fake.published
      .filter((p) => p.channel === "user:erin")
      .map((p) => [p.chunk.data.delta, p.chunk.sequenceNumber]);
    expect(erins).toEqual([
      ["one", 1],
      ["two", 2],
    ]);
    await relay.sweep();
    await relay.sweep();
    expect(relay.threads).toBe(0);
    await relay.close();
    await events.close();
  });
});

describe("a relay whose LISTEN connection drops", () => {
  it("publishes what threads it did not hold got while the connection was down, once it is back", async () => {
    const events = createEventNotifier(bed.db.pool);
    const fake = fakeRealtime();
    const relay = await startRealtimeRelay({ db: bed.db.pool, events, publisher: fake.publisher });
    const held = await threadOf("mia");
    await write(held, "held-1");
    await until(() => fake.published.length === 1);
    await relay.idle();
    const quiet = await threadOf("ned");

    // The connection is gone (waited for) before the writes, and comes back 100 ms later at the
    // earliest: their notifications are lost, and only the reconnect can tell the relay.
    await bed.db.pool.query(
      "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE query = 'LISTEN threadline_events' AND datname = current_database()",
    );
    await write(quiet, "ned-1");
    const created = await threadOf("olga");
    await write(created, "olga-1");
    await write(held, "held-2");

    // The reconnect is seen: the held thread's row is published.
    await until(() => fake.published.some((p) => p.chunk.data.delta === "held-2"));
    await relay.idle();
    expect(fake.published.map((p) => [p.channel, p.chunk.data.delta]).sort()).toEqual([
      ["user:mia", "held-1"],
      ["user:mia", "held-2"],
      ["user:ned", "ned-1"],
      ["user:olga", "olga-1"],
    ]);
    await relay.close();
    await events.close();
  });
});

describe("Inngest realtime through the app's Inngest client (its HTTP calls answered by a stand-in)", () => {
  it("publishes a chunk to user:<id>, topic agent_stream, and asks for a token of the caller's channel and that topic only", async () => {
    const calls: { url: URL; body: unknown }[] = [];
    const fakeFetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      calls.push({ url, body: JSON.parse(String(init?.body ?? "null")) });
      return Response.json(url.pathname.endsWith("/token") ? { jwt: "signed-token" } : {});
    }) as typeof fetch;
    const realtime = inngestRealtime(
      new Inngest({ id: "realtime-test", isDev: true, baseUrl: "http://inngest.test", fetch: fakeFetch }),
    );
    const chunk: AgentStreamChunk = {
      event: "stream.ended",
      data: { status: "completed", threadId: "t" },
      timestamp: 1,
      sequenceNumber: 7,
      id: "t:7",
    };
    await realtime.publish("alice", chunk);
    expect(await realtime.subscriptionToken("alice")).toMatchObject({
      key: "signed-token",
      channel: "user:alice",
      topics: ["agent_stream"],
    });

    const [published, token] = calls;
    expect(published!.url.pathname).toBe("/v1/realtime/publish");
    expect([
      published!.url.searchParams.get("channel"),
      published!.url.searchParams.getAll("topic"),
      published!.body,
    ]).toEqual(["user:alice", ["agent_stream"], chunk]);
    expect(token!.url.pathname).toBe("/v1/realtime/token");
    expect(token!.body).toEqual([{ channel: "user:alice", name: "agent_stream", kind: "run" }]);
    // A chunk that is not AgentKit's shape is refused before anything is sent.
    await expect(realtime.publish("alice", { event: "x" } as AgentStreamChunk)).rejects.toThrow(
      /Schema validation failed/,
    );
    expect(calls).toHaveLength(2);
  });
});

describe("POST /api/realtime/token", () => {
  it("asks for the caller's channel only, whatever the body names", async () => {
    const fake = fakeRealtime();
    const { app } = createTestApp(bed.db.pool, { realtime: fake.publisher });
    const response = await asUser(app, "alice").post("/api/realtime/token", {
      threadId: randomUUID(),
      channelKey: "user:bob",
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ key: "token-for-alice", channel: "user:alice", topics: ["agent_stream"] });
    expect(fake.tokensFor).toEqual(["user:alice"]);
    expect((await asUser(app, "alice").post("/api/realtime/token", { userId: "bob" })).status).toBe(400);
    expect(fake.tokensFor).toEqual(["user:alice"]);
  });

  it("404 when realtime is off; 503 when Inngest cannot issue a token", async () => {
    const off = createTestApp(bed.db.pool).app;
    const response = await asUser(off, "alice").post("/api/realtime/token", {});
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: "realtime_off" });
    const unreachable = createTestApp(bed.db.pool, { realtime: fakeRealtime({ token: true }).publisher }).app;
    const failed = await asUser(unreachable, "alice").post("/api/realtime/token", {});
    expect(failed.status).toBe(503);
    expect(failed.headers.get("retry-after")).toBe("5");
  });
});

describe("the relay's queue", () => {
  /** A publisher that holds every publish until released, recording what it published. */
  function heldRealtime() {
    const published: { userId: string; chunk: AgentStreamChunk }[] = [];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const publisher: RealtimePublisher = {
      async publish(userId, chunk) {
        await released;
        published.push({ userId, chunk });
      },
      subscriptionToken: async () => {
        throw new Error("not used");
      },
    };
    return {
      publisher,
      published,
      release: () => release(),
    };
  }

  it("holds a thread once however often it wakes, bounds what waits, and still publishes every event once, in order per thread", async () => {
    const events = createEventNotifier(bed.db.pool);
    const fake = heldRealtime();
    const relay = await startRealtimeRelay({
      db: bed.db.pool,
      events,
      publisher: fake.publisher,
      concurrency: 1,
      maxPending: 2,
    });
    const threads = await Promise.all(["gus", "hal", "ida", "jan", "kim"].map((user) => threadOf(user)));
    // The first thread's publish is held: every later wake-up waits behind it.
    await write(threads[0]!, "0-1");
    for (let n = 2; n <= 6; n += 1) for (const [i, threadId] of threads.entries()) await write(threadId, `${i}-${n}`);
    await until(() => relay.queued === 2);
    // Thirty wake-ups of five threads: two wait (the bound), the rest are remembered, not queued.
    expect(relay.queued).toBe(2);
    fake.release();
    await until(() => fake.published.length === 26);
    await relay.idle();
    for (const [i, threadId] of threads.entries()) {
      const mine = fake.published.filter((p) => p.chunk.data.threadId === threadId);
      const expected = i === 0 ? [1, 2, 3, 4, 5, 6] : [1, 2, 3, 4, 5];
      expect(mine.map((p) => p.chunk.sequenceNumber)).toEqual(expected);
    }
    await relay.close();
    await events.close();
  });

  it("a deleted thread's owner gets a final thread.deleted; a new thread under its id is another user's from its first event, and nothing of it reaches the first owner", async () => {
    const events = createEventNotifier(bed.db.pool);
    const fake = fakeRealtime();
    const relay = await startRealtimeRelay({ db: bed.db.pool, events, publisher: fake.publisher });
    const threadId = await threadOf("lea");
    await write(threadId, "lea-1", "lea-2");
    await until(() => fake.published.length === 2);
    await relay.idle();

    // Deleted and, in the same transaction, taken by another user (its tombstone pruned): both
    // reach the relay in one wake-up.
    const client = await bed.db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("DELETE FROM threads WHERE id = $1", [threadId]);
      await client.query("DELETE FROM thread_tombstones WHERE thread_id = $1", [threadId]);
      await client.query("INSERT INTO threads (id, user_id) VALUES ($1, 'max')", [threadId]);
      await client.query("SELECT threadline_append_events($1, NULL, 0, $2)", [
        threadId,
        JSON.stringify(
          ["max-1", "max-2", "max-3"].map((delta) => ({ key: delta, event: "text.delta", data: { delta } })),
        ),
      ]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    await until(() => fake.published.length === 6);
    await relay.idle();
    expect(
      fake.published.filter((p) => p.channel === "user:lea").map((p) => [p.chunk.event, p.chunk.data.delta ?? null]),
    ).toEqual([
      ["text.delta", "lea-1"],
      ["text.delta", "lea-2"],
      ["thread.deleted", null],
    ]);
    expect(
      fake.published.filter((p) => p.channel === "user:max").map((p) => [p.chunk.data.delta, p.chunk.sequenceNumber]),
    ).toEqual([
      ["max-1", 1],
      ["max-2", 2],
      ["max-3", 3],
    ]);

    await bed.db.pool.query("DELETE FROM threads WHERE id = $1", [threadId]);
    await until(() => fake.published.length === 7);
    await relay.idle();
    expect(fake.published.at(-1)).toMatchObject({
      channel: "user:max",
      chunk: { event: "thread.deleted", data: { threadId } },
    });
    expect(relay.threads).toBe(0);
    await relay.close();
    await events.close();
  });
});
