import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { appendEvents } from "../src/history/events.js";
import * as eventsSql from "../src/history/events-sql.js";
import { beginTurn } from "../src/history/store.js";
import { createThread } from "../src/history/threads.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import type { StreamLimits } from "../src/stream/stream-slots.js";
import { countingPool } from "./helpers/counting-pool.js";
import { createTestApp, headersFor, listen } from "./helpers/http.js";
import { openEventStream } from "./helpers/sse.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** The app over real HTTP on a free port, with these stream caps and every query it runs recorded. */
async function listeningApp(streams: StreamLimits) {
  const busy = { queries: 0 };
  const { pool, queries } = countingPool(bed.db.pool, () => {
    busy.queries += 1;
    return () => {
      busy.queries -= 1;
    };
  });
  const events = createEventNotifier(bed.db.pool);
  const { app } = createTestApp(pool, { events, streams });
  const { url, close } = await listen(app.fetch);
  closers.push(async () => {
    await events.close();
    await close();
  });
  return { url, queries, busy, http: { request: (path: string, init?: RequestInit) => fetch(`${url}${path}`, init) } };
}

const newThread = async (userId: string) =>
  (await createThread(bed.db.pool, { threadId: randomUUID(), userId, title: null, metadata: {} })).thread.id;

describe("fair shares of the live streams", () => {
  it("50 streams of one user beyond the cap get 429 with Retry-After; another user still gets one; a closed stream frees its slot", async () => {
    const { http } = await listeningApp({ perUser: 5, perProcess: 100 });
    const threadId = await newThread("ada");
    const open = await Promise.all(Array.from({ length: 5 }, () => openEventStream(http, threadId, { userId: "ada" })));
    expect(open.map((stream) => stream.response.status)).toEqual([200, 200, 200, 200, 200]);

    const headers = await headersFor("ada");
    const beyond = await Promise.all(
      Array.from({ length: 50 }, () => http.request(`/api/threads/${threadId}/events`, { headers })),
    );
    expect(new Set(beyond.map((response) => response.status))).toEqual(new Set([429]));
    expect(new Set(beyond.map((response) => response.headers.get("retry-after")))).toEqual(new Set(["5"]));
    expect(await beyond[0]!.json()).toMatchObject({ code: "too_many_streams" });

    const bobs = await openEventStream(http, await newThread("bob"), { userId: "bob" });
    expect(bobs.response.status).toBe(200);

    await open[0]!.close();
    const deadline = Date.now() + 5_000;
    let again = await openEventStream(http, threadId, { userId: "ada" });
    while (again.response.status === 429 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await openEventStream(http, threadId, { userId: "ada" });
    }
    expect(again.response.status).toBe(200);
    await Promise.all([...open.slice(1), bobs, again].map((stream) => stream.close()));
  });

  it("HEAD of a stream route answers the stream's headers and holds no stream: the caller's next stream is not refused", async () => {
    const { http } = await listeningApp({ perUser: 1, perProcess: 100 });
    const headers = await headersFor("cy");
    const threadId = await newThread("cy");
    const running = randomUUID();
    await beginTurn(bed.db.pool, {
      threadId: running,
      userId: "cy",
      message: { id: randomUUID(), text: "Hi" },
      turn: { runId: `run-${randomUUID()}`, kind: "chat" },
    });
    for (const path of [`/api/ui/chat/${running}/stream`, `/api/threads/${threadId}/events`]) {
      for (let n = 0; n < 3; n += 1) {
        const head = await http.request(path, { method: "HEAD", headers });
        expect([head.status, head.headers.get("content-type")]).toEqual([200, "text/event-stream"]);
      }
    }
    // One stream a user: a HEAD that held one would refuse this.
    const stream = await openEventStream(http, threadId, { userId: "cy" });
    expect(stream.response.status).toBe(200);
    await stream.close();
  });

  it("the process's cap holds across users", async () => {
    const { http } = await listeningApp({ perUser: 5, perProcess: 3 });
    const streams = await Promise.all(
      ["ada", "bob", "cyd"].map(async (userId) => openEventStream(http, await newThread(userId), { userId })),
    );
    expect(streams.map((stream) => stream.response.status)).toEqual([200, 200, 200]);
    const refused = await http.request(`/api/threads/${await newThread("dan")}/events`, {
      headers: await headersFor("dan"),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("5");
    await Promise.all(streams.map((stream) => stream.close()));
  });

  it("one database read per wake-up serves every stream of a thread", async () => {
    const { http, queries, busy } = await listeningApp({ perUser: 20, perProcess: 100 });
    const threadId = await newThread("ada");
    await appendEvents(bed.db.pool, {
      threadId,
      runId: null,
      attempt: 0,
      events: [{ key: "a", event: "title.changed", data: { title: "One", titleSource: "user" } }],
    });
    const streams = await Promise.all(
      Array.from({ length: 10 }, () => openEventStream(http, threadId, { userId: "ada" })),
    );
    await Promise.all(streams.map((stream) => stream.waitFor(1)));

    // Every read the joining streams started has settled (a join during a read is one more read).
    const deadline = Date.now() + 5_000;
    while (busy.queries > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const reads = () => queries.filter((text) => text === eventsSql.selectOwnedEventFramesAfter).length;
    const before = reads();
    await appendEvents(bed.db.pool, {
      threadId,
      runId: null,
      attempt: 0,
      events: [{ key: "b", event: "title.changed", data: { title: "Two", titleSource: "user" } }],
    });
    await Promise.all(streams.map((stream) => stream.waitFor(2)));
    expect(reads() - before).toBe(1);
    expect(streams.every((stream) => stream.received.map((e) => e.data.title).join() === "One,Two")).toBe(true);
    await Promise.all(streams.map((stream) => stream.close()));
  });
});
