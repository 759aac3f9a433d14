/**
 * npm run bench:streams — does one user holding every stream they may open slow another user's
 * requests down? Another user's GET /api/threads latency is measured idle and while one user holds
 * their share of event streams (STREAM_MAX_PER_USER, default 16, each on its own thread, the worst
 * case for the shared reads), a writer appends an event to each of those threads every 20 ms, and
 * the same user asks for 400 streams in all (those beyond the cap refused, 429). Idle and loaded rounds
 * alternate in one run, on one app over real HTTP; the ratio of the medians (and of the 95th
 * percentiles) is printed. Target: loaded / idle ≤ 2.
 *
 * Runs on a database created for the run (on DATABASE_URL's server, or the embedded PostgreSQL),
 * dropped at the end.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { serve } from "@hono/node-server";
import { createPool } from "../src/platform/database.js";
import { appendEvents } from "../src/history/events.js";
import { createThread } from "../src/history/threads.js";
import { createApp } from "../src/server.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import { DEFAULT_STREAM_LIMITS } from "../src/stream/stream-slots.js";
import { openBenchDatabase } from "./bench-database.js";
import { percentile } from "./report.js";

const HEAVY = "bench-heavy";
const OTHER = "bench-other";
const OTHER_THREADS = 50;
const ROUNDS = 4;
const CALLS_PER_ROUND = 100;
const WARMUP = 20;
const WRITE_EVERY_MS = 20;
/** Streams the heavy user asks for in each round (as in the review): all beyond the cap are refused (429). */
const ASKED_STREAMS = 400;
const TARGET_RATIO = 2;

const database = await openBenchDatabase();
// The writer stands for the turns writing answers (Inngest's calls, or another app instance): its
// own connections, so what is measured is the streams' cost, not a writer queueing on the app's pool.
const writerPool = createPool((database.pool.options as { connectionString: string }).connectionString);
const events = createEventNotifier(database.pool);
const app = createApp({
  db: database.pool,
  functions: [],
  sendEvent: async () => ({ ids: [] }),
  auth: { dev: true },
  serving: { mode: "dev" },
  events,
  streams: DEFAULT_STREAM_LIMITS,
});
const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
await new Promise((resolve) => server.once("listening", resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const as = (userId: string) => ({ "X-Threadline-User": userId });

try {
  for (let i = 0; i < OTHER_THREADS; i += 1)
    await createThread(database.pool, { threadId: randomUUID(), userId: OTHER, title: `Thread ${i}`, metadata: {} });
  const heavyThreads: string[] = [];
  for (let i = 0; i < DEFAULT_STREAM_LIMITS.perUser; i += 1) {
    heavyThreads.push(
      (await createThread(database.pool, { threadId: randomUUID(), userId: HEAVY, title: null, metadata: {} })).thread
        .id,
    );
  }

  const listLatency = async (): Promise<number> => {
    const started = performance.now();
    const response = await fetch(`${base}/api/threads?limit=20`, { headers: as(OTHER) });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`GET /api/threads answered ${response.status}`);
    return performance.now() - started;
  };

  /** The heavy user's load, until stopped: streams at the cap, events written to them, refused requests for more. */
  const startLoad = async () => {
    const controller = new AbortController();
    let stopped = false;
    let received = 0;
    let refused = 0;
    const streams = await Promise.all(
      heavyThreads.map(async (threadId) => {
        const response = await fetch(`${base}/api/threads/${threadId}/events`, {
          headers: as(HEAVY),
          signal: controller.signal,
        });
        if (response.status !== 200) throw new Error(`the heavy user's stream answered ${response.status}`);
        const reader = response.body!.getReader();
        // Wrapped: an async function returning the reading promise itself would wait for the stream's end.
        const reading = (async () => {
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) return;
              received += new TextDecoder()
                .decode(value)
                .split("\n\n")
                .filter((frame) => frame.includes("data:")).length;
            }
          } catch {
            // Aborted at the end of the round.
          }
        })();
        return { reading };
      }),
    );
    let n = 0;
    const writer = (async () => {
      while (!stopped) {
        n += 1;
        await Promise.all(
          heavyThreads.map((threadId) =>
            appendEvents(writerPool, {
              threadId,
              runId: null,
              attempt: 0,
              events: [{ key: `e${n}`, event: "title.changed", data: { title: `Title ${n}`, titleSource: "user" } }],
            }),
          ),
        );
        await new Promise((resolve) => setTimeout(resolve, WRITE_EVERY_MS));
      }
    })();
    // The rest of the streams the user asks for, as the review's client did (400 in all): refused.
    await Promise.all(
      Array.from({ length: ASKED_STREAMS - heavyThreads.length }, async (_, i) => {
        const response = await fetch(`${base}/api/threads/${heavyThreads[i % heavyThreads.length]}/events`, {
          headers: as(HEAVY),
        });
        await response.arrayBuffer();
        if (response.status !== 429) throw new Error(`a stream beyond the cap answered ${response.status}`);
        refused += 1;
      }),
    );
    return async () => {
      stopped = true;
      await writer;
      controller.abort();
      await Promise.all(streams.map((stream) => stream.reading));
      return { received, refused };
    };
  };

  for (let i = 0; i < WARMUP; i += 1) await listLatency();
  const idle: number[] = [];
  const loaded: number[] = [];
  let received = 0;
  let refused = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let i = 0; i < CALLS_PER_ROUND; i += 1) idle.push(await listLatency());
    const stop = await startLoad();
    // Let the load settle into its steady state before measuring.
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (let i = 0; i < CALLS_PER_ROUND; i += 1) loaded.push(await listLatency());
    const load = await stop();
    received += load.received;
    refused += load.refused;
  }

  const row = (name: string, values: number[]) =>
    `${name.padEnd(34)} p50 ${percentile(values, 50).toFixed(2).padStart(7)} ms   p95 ${percentile(values, 95).toFixed(2).padStart(7)} ms`;
  const ratio50 = percentile(loaded, 50) / percentile(idle, 50);
  const ratio95 = percentile(loaded, 95) / percentile(idle, 95);
  console.log(
    `GET /api/threads (${OTHER_THREADS} threads, page of 20) by another user, ${ROUNDS} × ${CALLS_PER_ROUND} calls each, rounds alternating:`,
  );
  console.log(row("idle", idle));
  console.log(row(`one user at the cap (${DEFAULT_STREAM_LIMITS.perUser} streams)`, loaded));
  console.log(
    `load: ${received} events streamed to the capped user, ${refused} of their stream requests refused (429)`,
  );
  console.log(
    `ratio loaded / idle: p50 ${ratio50.toFixed(2)}×, p95 ${ratio95.toFixed(2)}× (target ≤ ${TARGET_RATIO}× at p50) ${ratio50 <= TARGET_RATIO ? "OK" : "OVER TARGET"}`,
  );
} finally {
  await events.close();
  await writerPool.end();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await database.close();
}
