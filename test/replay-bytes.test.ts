import { SSEStreamingApi } from "hono/streaming";
import { afterAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { eventRoutes } from "../src/api/events.js";
import { appendEvents, framesAfter, readEventsAfter, type NewEvent, type PageLimit } from "../src/history/events.js";
import { storeModelTitle } from "../src/history/titles.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { createStreamSlots } from "../src/stream/stream-slots.js";
import { createThreadFeeds } from "../src/stream/thread-feeds.js";
import { createTestApp, headersFor, listen, routesAs, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const notifiers: EventNotifier[] = [];
const servers: Listening[] = [];
afterAll(async () => {
  for (const server of servers) await server.close();
  await Promise.all(notifiers.map((notifier) => notifier.close()));
});

type App = { request: (path: string, init?: RequestInit) => Response | Promise<Response> };

/**
 * The app, or with `pageLimit` its event route alone, reading pages that small; in process
 * (app.request: the route answers with a web stream) or over HTTP (a listening server, where the
 * route writes Node's response itself).
 */
async function appInstance(transport: Transport, pageLimit?: PageLimit): Promise<App> {
  const app = routes(pageLimit);
  if (transport === "in process") return app;
  const server = await listen(app.fetch);
  servers.push(server);
  return { request: (path, init) => fetch(`${server.url}${path}`, init) };
}

type Transport = "in process" | "over HTTP";

function routes(pageLimit?: PageLimit) {
  const events = createEventNotifier(bed.db.pool);
  notifiers.push(events);
  if (!pageLimit) return createTestApp(bed.db.pool, { events }).app;
  return routesAs(
    "user-1",
    "/api/threads",
    eventRoutes({
      db: bed.db.pool,
      sendEvent: async () => ({ ids: [] }),
      events,
      feeds: createThreadFeeds({ db: bed.db.pool, events, pageLimit }),
      slots: createStreamSlots(),
    }),
  );
}

/**
 * The raw bytes of a thread's event stream (after `after`), read until `frames` frames arrived;
 * `read()` resolves with them. Opened before the events are written, it is a live client.
 */
async function rawStream(app: App, threadId: string, after: number, frames: number) {
  const controller = new AbortController();
  const response = await app.request(`/api/threads/${threadId}/events?after=${after}`, {
    headers: await headersFor("user-1"),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const read = async () => {
    const decoder = new TextDecoder();
    let text = "";
    while (text.split("\n\n").length <= frames) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the stream ended after ${text.split("\n\n").length - 1} frames`);
      text += decoder.decode(value, { stream: true });
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    return text;
  };
  return { read };
}

/** What hono's writeSSE writes for each row as readers parse it, the way every stream wrote before 0022. */
async function writeSseReference(threadId: string, after: number) {
  const rows = await readEventsAfter(bed.db.pool, threadId, after, 10_000);
  const { readable, writable } = new TransformStream();
  const reference = new SSEStreamingApi(writable, readable);
  const text = new Response(reference.responseReadable).text();
  for (const row of rows)
    await reference.writeSSE({ id: String(row.id), event: row.event, data: JSON.stringify(row.data) });
  await reference.close();
  return { text: await text, rows: rows.length };
}

const awkward = [
  'quote " and backslash \\',
  "line\nbreak\r\n and tab\t",
  "\u2028 \u2029 ünïcödé 🙂 \u{10ffff}",
  "\u0001 \u001f \u007f control",
  "</script> & / ",
];

/** Payloads the log holds: streamed text, and AgentKit chunks with whatever JSON a tool returned. */
const payloads: NewEvent[] = [
  ...awkward.map((text, i) => ({
    key: `delta-${i}`,
    event: "text.delta" as const,
    data: { runId: "r", stepId: "assistant", attempt: i, delta: text },
  })),
  {
    key: "numbers",
    event: "part.completed",
    data: {
      partId: "p",
      runId: "r",
      messageId: "m",
      type: "tool-output",
      finalContent: { small: 1e-7, large: 1e21, float: 0.1 + 0.2, big: 2 ** 53 + 2, negative: -0, half: 1.5 },
    },
  },
  {
    key: "keys",
    event: "part.completed",
    data: {
      partId: "p",
      runId: "r",
      messageId: "m",
      type: "tool-output",
      finalContent: { 10: "ten", 2: "two", b: [true, null, { "": "empty", é: 1, z: {} }], aa: [] },
    },
  },
];

describe.each([
  ["in one page", "in process", undefined],
  ["in pages of 3 rows or 120 bytes", "in process", { rows: 3, bytes: 120 }],
  ["in one page", "over HTTP", undefined],
  ["in pages of 3 rows or 120 bytes", "over HTTP", { rows: 3, bytes: 120 }],
] as const)("a reconnect's replay %s, %s", (_, transport: Transport, pageLimit?: PageLimit) => {
  /** A thread of user-1 streamed live while `write` writes `frames` rows, then replayed from 0 and from `resumeAfter`. */
  async function liveAndReplayed(frames: number, resumeAfter: number, write: (threadId: string) => Promise<void>) {
    const app = await appInstance(transport, pageLimit);
    const threadId = crypto.randomUUID();
    await bed.db.pool.query("INSERT INTO threads (id, user_id) VALUES ($1, 'user-1')", [threadId]);
    const live = await rawStream(app, threadId, 0, frames);
    const liveText = live.read();
    // Awaited below; a failure before that fails the test, not the run.
    liveText.catch(() => undefined);
    await write(threadId);
    const reference = await writeSseReference(threadId, 0);
    expect(reference.rows).toBe(frames);
    expect(await liveText).toBe(reference.text);
    const replay = await rawStream(app, threadId, 0, frames);
    expect(await replay.read()).toBe(reference.text);
    const rest = await writeSseReference(threadId, resumeAfter);
    const resumed = await rawStream(app, threadId, resumeAfter, rest.rows);
    expect(await resumed.read()).toBe(rest.text);
    expect(reference.text.endsWith(rest.text)).toBe(true);
    return threadId;
  }

  const withText = async (threadId: string) =>
    (
      await bed.db.pool.query<{ id: string }>(
        "SELECT id FROM thread_events WHERE thread_id = $1 AND frame IS NOT NULL ORDER BY id",
        [threadId],
      )
    ).rows.map((row) => Number(row.id));

  it("is byte for byte what a live client received, as writeSSE wrote them row by row, pages built by the database", async () => {
    const threadId = await liveAndReplayed(payloads.length - 1, 3, async (threadId) => {
      // Written in several statements, by TypeScript and by the database's own writers.
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(0, 3) });
      expect(await storeModelTitle(bed.db.pool, threadId, 'A "title" \u2028 🙂')).toEqual({ stored: true });
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(3, -2) });
    });
    expect(await withText(threadId)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("is byte for byte what writeSSE wrote for a page whose frames come in two pieces (over 64 KiB of frames)", async () => {
    const rows = 600;
    await liveAndReplayed(rows, 350, async (threadId) => {
      const deltas = Array.from({ length: rows }, (_, i) => ({
        key: `long-${i}`,
        event: "text.delta" as const,
        data: {
          runId: "r",
          stepId: "assistant",
          attempt: 0,
          delta: `${awkward[i % awkward.length]} ${"x".repeat(80)} ${i}`,
        },
      }));
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: deltas });
      const { rows: sizes } = await bed.db.pool.query<{ bytes: number }>(
        "SELECT sum(octet_length(frame))::int AS bytes FROM thread_events WHERE thread_id = $1",
        [threadId],
      );
      expect(sizes[0]!.bytes).toBeGreaterThan(64 * 1024);
    });
  });

  it("sends rows without a frame (written before migration 0022, or numbers the database prints otherwise) as before", async () => {
    const threadId = await liveAndReplayed(payloads.length, 4, async (threadId) => {
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(0, 3) });
      // As if written before the migration.
      await bed.db.pool.query("UPDATE thread_events SET frame = NULL WHERE thread_id = $1 AND id = 2", [threadId]);
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(3) });
    });
    expect(await withText(threadId)).toEqual([1, 3, 4, 5]);
  });

  it("sends rows an instance of the previous version wrote during a rolling deploy (no frame, offset 0) among framed ones", async () => {
    const threadId = await liveAndReplayed(payloads.length, 2, async (threadId) => {
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(0, 2) });
      // What the append function before migration 0028 wrote: data_text, no frame, no offset, the counter's bytes unmoved.
      await bed.db.pool.query(
        `WITH c AS (UPDATE thread_event_counters SET last_id = last_id + 1 WHERE thread_id = $1 RETURNING last_id)
         INSERT INTO thread_events (thread_id, id, run_id, attempt, key, event, data, data_text)
         SELECT $1, c.last_id, $1, 0, $2, $3, $4::jsonb, threadline_event_text($4::jsonb) FROM c`,
        [threadId, payloads[2]!.key, payloads[2]!.event, JSON.stringify(payloads[2]!.data)],
      );
      await appendEvents(bed.db.pool, { threadId, runId: threadId, attempt: 0, events: payloads.slice(3) });
    });
    expect(await withText(threadId)).toEqual([1, 2, 4, 5]);
  });
});

describe("threadline_event_text", () => {
  it("is JSON.stringify of what node-pg reads from the jsonb, or NULL", async () => {
    // What jsonb stores: well-formed strings without NUL.
    const storable = fc
      .jsonValue({ stringUnit: "grapheme" })
      .filter((value) => !JSON.stringify(value).includes("\\u0000"));
    let rendered = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(storable, { minLength: 1, maxLength: 20 }), async (values) => {
        const { rows } = await bed.db.pool.query<{ data: unknown; text: string | null }>(
          "SELECT x.data, threadline_event_text(x.data) AS text FROM jsonb_array_elements($1::jsonb) AS x(data)",
          [JSON.stringify(values)],
        );
        for (const row of rows) {
          if (row.text === null) continue;
          rendered += 1;
          expect(row.text).toBe(JSON.stringify(row.data));
        }
      }),
      { numRuns: 200 },
    );
    expect(rendered).toBeGreaterThan(200);
  });
});

describe("framesAfter", () => {
  it("cuts a page, in pieces as the database sends it, after a row a reader already has", () => {
    const page = {
      frames: [
        'event: a\ndata: {}\nid: 3\n\nevent: b\ndata: {"x":"id: 5"}\nid: 4\n\n',
        "event: c\ndata: {}\nid: 6\n\n",
      ],
      count: 3,
      firstId: 3,
      lastId: 6,
    };
    expect(framesAfter(page, 2)).toBe(page);
    expect(framesAfter(page, 3)).toEqual({
      ...page,
      frames: ['event: b\ndata: {"x":"id: 5"}\nid: 4\n\nevent: c\ndata: {}\nid: 6\n\n'],
      count: 2,
      firstId: 4,
    });
    expect(framesAfter(page, 5)).toEqual({
      frames: ["event: c\ndata: {}\nid: 6\n\n"],
      count: 1,
      firstId: 6,
      lastId: 6,
    });
    expect(framesAfter(page, 6)).toBeNull();
  });
});
