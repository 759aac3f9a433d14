/**
 * npm run bench:streams — three measurements of the event streams, on one app over real HTTP:
 *
 * 1. First token: how long after a (local, OpenAI-compatible) provider emits an inference's first
 *    piece of text does it reach an SSE client of the thread, at 10 concurrent streams? The path
 *    is the production one: streamCompletion → deltaWriter → the log (NOTIFY) → the notifier →
 *    the thread's feed → GET /api/threads/:id/events. Target: ≤ 25 ms p50, ≤ 50 ms p95.
 * 2. Replay: a reconnect (?after=0) of a thread holding 100 / 1,000 / 5,000 rows, from the request
 *    to its last row at the client, ÷ a plain SELECT of the same rows through the same pool,
 *    paired rounds (p10 / p50 / p90 of the rounds' ratios). Target: ≤ 1.2× at 1,000 and 5,000
 *    rows. Measured by two clients, each on a new connection per replay (as a reconnect is), and
 *    both printed: Node's fetch (undici: a web-stream body, ~1 ms of its own CPU per 1,000-row
 *    replay, twice node:http's) and node:http. The target is checked against node:http: a
 *    browser's EventSource, what real clients reconnect with, reads the stream with the
 *    browser's native HTTP stack, which node:http stands closer to than fetch's JavaScript
 *    client; the fetch figure says what a Node client using fetch sees. Beside each, the floor of
 *    any replay over HTTP: a bare node:http server's one frame, read by the same client, and the
 *    replay ÷ (SELECT + that floor). Then where this checkout's 1,000-row replay goes: the frames
 *    read alone, the app in process (no socket), over HTTP (fetch).
 * 3. Shares: does one user holding every stream they may open slow another user's requests down?
 *    Another user's GET /api/threads latency is measured idle and while one user holds their
 *    share of event streams (STREAM_MAX_PER_USER, default 16, each on its own thread, the worst
 *    case for the shared reads), a writer appends an event to each of those threads every 20 ms,
 *    and the same user asks for 400 streams in all (those beyond the cap refused, 429). Idle and
 *    loaded rounds alternate; the ratio of the medians (and of the 95th percentiles) is printed.
 *    Target: loaded / idle ≤ 2.
 *
 * BENCH_STREAMS_BASELINE=<a checkout of another commit, its node_modules installed or linked>
 * measures 1 and 2 on that checkout's app too, in the same process, rounds alternating, printed
 * side by side ("before" / "after").
 *
 * Runs on a database created for the run (on DATABASE_URL's server, or the embedded PostgreSQL),
 * dropped at the end.
 */
import http, { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { streamCompletion } from "../src/agents/streamed-completion.js";
import { createPool } from "../src/platform/database.js";
import { appendEvents, readThreadEventFrames } from "../src/history/events.js";
import { selectEventsAfter } from "../src/history/events-sql.js";
import { createThread } from "../src/history/threads.js";
import { createApp } from "../src/server.js";
import { deltaWriter } from "../src/stream/delta-writer.js";
import { createEventNotifier } from "../src/stream/notifier.js";
import { DEFAULT_STREAM_LIMITS } from "../src/stream/stream-slots.js";
import { openBenchDatabase } from "./bench-database.js";
import { median, percentile, printTable } from "./report.js";
import { listen } from "../test/helpers/http.js";

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

/** First token: concurrent streams, rounds, and the provider's pace after its first piece. */
const FIRST_TOKEN_STREAMS = 10;
const FIRST_TOKEN_ROUNDS = 20;
const PROVIDER_PIECES = 20;
const PROVIDER_PIECE_EVERY_MS = 15;
const FIRST_TOKEN_TARGET = { p50: 25, p95: 50 };
/** Replay: thread sizes, paired rounds per size, and the target ratio to a plain SELECT. */
const REPLAY_ROWS = [100, 1_000, 5_000];
const REPLAY_ROUNDS = 30;
const REPLAY_WARMUP = 5;
const REPLAY_TARGET = 1.2;
/** The breakdown of this checkout's replay: its size and rounds. */
const BREAKDOWN_ROWS = 1_000;
const BREAKDOWN_ROUNDS = 100;

const database = await openBenchDatabase();
// The writer stands for the turns writing answers (Inngest's calls, or another app instance): its
// own connections, so what is measured is the streams' cost, not a writer queueing on the app's pool.
const { connectionString } = database.pool.options as { connectionString: string };
const writerPool = createPool(connectionString);
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
const { server, url: base } = await listen(app.fetch);
const as = (userId: string) => ({ "X-Threadline-User": userId });

/** One app under measure: its base URL, its pool and the delta writer its code has. */
type Variant = {
  name: string;
  base: string;
  pool: typeof database.pool;
  deltaWriter: typeof deltaWriter;
  close: () => Promise<void>;
};

/**
 * The app of another checkout (BENCH_STREAMS_BASELINE), on the same database, its own notifier and
 * pool of the same size: a prepared statement's name is per connection, and the two checkouts may
 * prepare different text under one name.
 */
async function baselineVariant(root: string): Promise<Variant> {
  const from = (file: string) => import(pathToFileURL(path.resolve(root, "src", file)).href);
  const [{ createApp: createBaselineApp }, notifier, writer, slots] = await Promise.all([
    from("server.js"),
    from("stream/notifier.js"),
    from("stream/delta-writer.js"),
    from("stream/stream-slots.js"),
  ]);
  const baselinePool = createPool(connectionString);
  const baselineEvents = notifier.createEventNotifier(baselinePool);
  const baselineApp = createBaselineApp({
    db: baselinePool,
    functions: [],
    sendEvent: async () => ({ ids: [] }),
    auth: { dev: true },
    serving: { mode: "dev" },
    events: baselineEvents,
    streams: slots.DEFAULT_STREAM_LIMITS,
  });
  const { server: baselineServer, url: baselineBase } = await listen(baselineApp.fetch);
  return {
    name: "before",
    base: baselineBase,
    pool: baselinePool,
    deltaWriter: writer.deltaWriter,
    close: async () => {
      await baselineEvents.close();
      baselineServer.closeAllConnections();
      await new Promise((resolve) => baselineServer.close(resolve));
      await baselinePool.end();
    },
  };
}

const baselineRoot = process.env.BENCH_STREAMS_BASELINE?.trim();
const variants: Variant[] = [
  ...(baselineRoot ? [await baselineVariant(baselineRoot)] : []),
  {
    name: baselineRoot ? "after" : "this checkout",
    base,
    pool: database.pool,
    deltaWriter,
    close: async () => undefined,
  },
];

/**
 * A local OpenAI-compatible provider streaming PROVIDER_PIECES pieces of text, one every
 * PROVIDER_PIECE_EVERY_MS; `emitted` holds when it wrote each request's first piece (the request's
 * `model` names it).
 */
const emitted = new Map<string, number>();
const provider = createServer(async (request, response) => {
  let body = "";
  for await (const chunk of request) body += chunk;
  const { model } = JSON.parse(body) as { model: string };
  const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null) =>
    `data: ${JSON.stringify({ id: model, object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta, finish_reason }] })}\n\n`;
  response.writeHead(200, { "content-type": "text/event-stream" });
  for (let piece = 0; piece < PROVIDER_PIECES; piece += 1) {
    if (piece > 0) await new Promise((resolve) => setTimeout(resolve, PROVIDER_PIECE_EVERY_MS));
    if (piece === 0) emitted.set(model, performance.now());
    response.write(chunk({ content: `word${piece} ` }));
  }
  response.write(chunk({}, "stop"));
  response.end("data: [DONE]\n\n");
});
provider.listen(0, "127.0.0.1");
await new Promise((resolve) => provider.once("listening", resolve));
const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1/chat/completions`;

/** An SSE client of a thread: calls `onFrame` with each event's name and data as it arrives. */
async function sseClient(url: string, userId: string, onFrame: (event: string, data: string) => void) {
  const controller = new AbortController();
  const response = await fetch(url, { headers: as(userId), signal: controller.signal });
  if (response.status !== 200) throw new Error(`the stream answered ${response.status}`);
  const reader = response.body!.getReader();
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const lines = buffer.slice(0, end).split("\n");
          buffer = buffer.slice(end + 2);
          const field = (name: string) => lines.find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2);
          onFrame(field("event") ?? "", field("data") ?? "");
        }
      }
    } catch {
      // Closed.
    }
  })();
  return async () => {
    controller.abort();
    await reader.cancel().catch(() => undefined);
    await reading;
  };
}

/** First token: FIRST_TOKEN_ROUNDS rounds of FIRST_TOKEN_STREAMS concurrent inferences, variants alternating. */
async function measureFirstToken(): Promise<Map<string, number[]>> {
  const latencies = new Map(variants.map((variant) => [variant.name, [] as number[]]));
  const arrived = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const clients: (() => Promise<void>)[] = [];
  const threads = new Map<string, string[]>();
  for (const variant of variants) {
    const ids: string[] = [];
    for (let i = 0; i < FIRST_TOKEN_STREAMS; i += 1) {
      const threadId = randomUUID();
      await createThread(database.pool, { threadId, userId: "bench-first", title: null, metadata: {} });
      ids.push(threadId);
      clients.push(
        await sseClient(`${variant.base}/api/threads/${threadId}/events`, "bench-first", (event, data) => {
          if (event !== "text.delta") return;
          const { runId } = JSON.parse(data) as { runId: string };
          if (arrived.has(runId)) return;
          arrived.set(runId, performance.now());
          waiting.get(runId)?.();
        }),
      );
    }
    threads.set(variant.name, ids);
  }
  try {
    for (let round = 0; round < FIRST_TOKEN_ROUNDS; round += 1) {
      for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
        await Promise.all(
          threads.get(variant.name)!.map(async (threadId, i) => {
            const runId = `${variant.name}-${round}-${i}`;
            const seen = new Promise<void>((resolve) => waiting.set(runId, resolve));
            const writer = variant.deltaWriter(
              variant.pool,
              { threadId, runId, stepId: "assistant", attempt: 0 },
              (error: unknown) => {
                throw error;
              },
            );
            await streamCompletion({
              model: { url: providerUrl, format: "openai-chat" },
              body: { model: runId, messages: [{ role: "user", content: "Hi" }] },
              onText: (text) => writer.push(text),
            });
            await writer.finish();
            await seen;
            latencies.get(variant.name)!.push(arrived.get(runId)! - emitted.get(runId)!);
          }),
        );
      }
    }
  } finally {
    await Promise.all(clients.map((close) => close()));
  }
  return latencies;
}

/**
 * The floor under any replay over HTTP: a bare node:http server answering one frame, read by the
 * same client the same way (a new connection each time, as a reconnect is).
 */
const bareHttp = createServer((_, response) => {
  response.writeHead(200, { "content-type": "text/event-stream" });
  response.write("event: bench\ndata: {}\nid: 1\n\n");
});
bareHttp.listen(0, "127.0.0.1");
await new Promise((resolve) => bareHttp.once("listening", resolve));
const bareHttpUrl = `http://127.0.0.1:${(bareHttp.address() as AddressInfo).port}/`;

/**
 * Counts the frames of a stream read chunk by chunk: frames end with a blank line (no raw line
 * break inside a frame's data), so it counts "\n\n", also across two chunks. Returns the total so far.
 */
function frameCounter(): (chunk: Uint8Array) => number {
  let frames = 0;
  let previous = 0;
  return (value) => {
    if (previous === 10 && value[0] === 10) frames += 1;
    for (let at = value.indexOf(10); at >= 0; at = value.indexOf(10, at + 1)) {
      if (value[at + 1] === 10) {
        frames += 1;
        at += 1;
      }
    }
    previous = value.at(-1)!;
    return frames;
  };
}

/** Reads until `rows` frames arrived. */
async function readFrames(reader: ReadableStreamDefaultReader<Uint8Array>, rows: number) {
  const count = frameCounter();
  for (let frames = 0; frames < rows; ) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the replay ended after ${frames} of ${rows} rows`);
    frames = count(value);
  }
}

/**
 * The time from a replay's request (sent by `request`, which aborts with the signal) until `rows`
 * frames arrived; the stream is then dropped.
 */
async function timeReplay(
  request: (signal: AbortSignal) => Response | Promise<Response>,
  rows: number,
): Promise<number> {
  const controller = new AbortController();
  const started = performance.now();
  const reader = (await request(controller.signal)).body!.getReader();
  await readFrames(reader, rows);
  const elapsed = performance.now() - started;
  controller.abort();
  await reader.cancel().catch(() => undefined);
  return elapsed;
}

/**
 * timeReplay with node:http as the client (its default agent; the socket is destroyed at the end,
 * so each replay is a new connection, as with fetch).
 */
function timeNodeReplay(url: string, rows: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let finished = false;
    const request = http.get(url, { headers: as("bench-replay") }, (response) => {
      const count = frameCounter();
      let frames = 0;
      response.on("data", (value: Buffer) => {
        frames = count(value);
        if (frames < rows || finished) return;
        finished = true;
        resolve(performance.now() - started);
        request.destroy();
      });
      response.on("end", () => finished || reject(new Error(`the replay ended after ${frames} of ${rows} rows`)));
    });
    request.on("error", (error) => finished || reject(error));
  });
}

/** The two clients a replay is measured with (see the header). */
const CLIENTS = ["node:http", "fetch"] as const;
type Client = (typeof CLIENTS)[number];
/** The time from a replay's request by `client` until `rows` frames arrived. */
const replayBy = (client: Client, url: string, rows: number) =>
  client === "fetch"
    ? timeReplay((signal) => fetch(url, { headers: as("bench-replay"), signal }), rows)
    : timeNodeReplay(url, rows);

/**
 * Where this checkout's replay of a thread's `rows` rows goes, paired rounds, order rotating: the
 * frames read alone (the route's one statement), the app in process (app.fetch to the last row,
 * no socket), and over HTTP (as the replay table measures it).
 */
async function replayBreakdown(threadId: string, rows: number) {
  const url = `${base}/api/threads/${threadId}/events?after=0`;
  const sides = {
    read: async () => {
      const started = performance.now();
      // The feeds' page (src/stream/thread-feeds.ts).
      const first = await readThreadEventFrames(database.pool, {
        threadId,
        userId: "bench-replay",
        afterId: 0,
        limit: { rows: 5_000, bytes: 4 * 1024 * 1024 },
      });
      if (first?.page?.count !== rows) throw new Error(`the read brought ${first?.page?.count} rows, not ${rows}`);
      return performance.now() - started;
    },
    app: () => timeReplay((signal) => app.fetch(new Request(url, { headers: as("bench-replay"), signal })), rows),
    http: () => timeReplay((signal) => fetch(url, { headers: as("bench-replay"), signal }), rows),
  };
  const names = Object.keys(sides) as (keyof typeof sides)[];
  const measured = { read: [] as number[], app: [] as number[], http: [] as number[] };
  for (let round = 0; round < REPLAY_WARMUP + BREAKDOWN_ROUNDS; round += 1) {
    const rotated = [...names.slice(round % names.length), ...names.slice(0, round % names.length)];
    for (const name of rotated) {
      const ms = await sides[name]();
      if (round >= REPLAY_WARMUP) measured[name].push(ms);
    }
  }
  return { read: median(measured.read), app: median(measured.app), http: median(measured.http) };
}

/** One client's figures at one size: its HTTP floor and each variant's replays, paired with `select`. */
type ClientReplays = { http: number[]; replay: Map<string, number[]> };

/**
 * Replay: per size, REPLAY_ROUNDS paired rounds of a plain SELECT and, by each client, the bare
 * HTTP floor and each variant's replay, order rotating.
 */
async function measureReplay(): Promise<
  { rows: number; threadId: string; select: number[]; clients: Map<Client, ClientReplays> }[]
> {
  const results = [];
  for (const rows of REPLAY_ROWS) {
    const threadId = randomUUID();
    await createThread(database.pool, { threadId, userId: "bench-replay", title: null, metadata: {} });
    // Keys are unique per run: a run per thread.
    const runId = `bench-replay-${rows}`;
    await appendEvents(database.pool, {
      threadId,
      runId,
      attempt: 0,
      events: Array.from({ length: rows }, (_, i) => ({
        key: `delta-${i}`,
        event: "text.delta" as const,
        data: {
          runId: "bench-replay",
          stepId: "assistant",
          attempt: 0,
          delta: `a piece of streamed answer text, number ${i} `,
        },
      })),
    });
    const select = async () => {
      const started = performance.now();
      const { rowCount } = await database.pool.query(selectEventsAfter, [threadId, 0, rows]);
      if (rowCount !== rows) throw new Error(`the SELECT read ${rowCount} rows, not ${rows}`);
      return performance.now() - started;
    };
    const measured = {
      rows,
      threadId,
      select: [] as number[],
      clients: new Map(
        CLIENTS.map((client) => [
          client,
          { http: [] as number[], replay: new Map(variants.map((v) => [v.name, [] as number[]])) },
        ]),
      ),
    };
    type Side = "select" | { client: Client; variant: Variant | "http" };
    const order: Side[] = [
      "select",
      ...CLIENTS.flatMap((client) => (["http", ...variants] as const).map((variant) => ({ client, variant }))),
    ];
    for (let round = 0; round < REPLAY_WARMUP + REPLAY_ROUNDS; round += 1) {
      // Rotating who goes first, so no side always runs on a warmer cache.
      const rotated = [...order.slice(round % order.length), ...order.slice(0, round % order.length)];
      for (const side of rotated) {
        const ms =
          side === "select"
            ? await select()
            : side.variant === "http"
              ? await replayBy(side.client, bareHttpUrl, 1)
              : await replayBy(side.client, `${side.variant.base}/api/threads/${threadId}/events?after=0`, rows);
        if (round < REPLAY_WARMUP) continue;
        if (side === "select") measured.select.push(ms);
        else if (side.variant === "http") measured.clients.get(side.client)!.http.push(ms);
        else measured.clients.get(side.client)!.replay.get(side.variant.name)!.push(ms);
      }
    }
    results.push(measured);
  }
  return results;
}

try {
  const firstToken = await measureFirstToken();
  console.log(
    `First token to an SSE client after the provider emits it, ${FIRST_TOKEN_STREAMS} concurrent streams × ${FIRST_TOKEN_ROUNDS} rounds (target ≤ ${FIRST_TOKEN_TARGET.p50} ms p50, ≤ ${FIRST_TOKEN_TARGET.p95} ms p95):`,
  );
  printTable(
    ["", ...variants.map((v) => v.name)],
    [50, 95].map((p) => [`p${p} ms`, ...variants.map((v) => percentile(firstToken.get(v.name)!, p).toFixed(1))]),
    1,
  );

  const replays = await measureReplay();
  const ratios = (replay: number[], select: number[]) => {
    const paired = replay.map((ms, i) => ms / select[i]!);
    return [10, 50, 90].map((p) => `${percentile(paired, p).toFixed(2)}×`).join(" / ");
  };
  for (const client of CLIENTS) {
    console.log(
      `\nReplay (?after=0, request to last row at the client) ÷ a plain SELECT of the same rows, client ${client}${client === "node:http" ? " (the target's client, see the header)" : " (printed beside it, see the header)"}, ${REPLAY_ROUNDS} paired rounds: medians, and p10 / p50 / p90 of each round's ratio (target ≤ ${REPLAY_TARGET}× at 1,000 and 5,000 rows):`,
    );
    printTable(
      [
        "rows",
        "SELECT ms",
        "HTTP floor ms",
        ...variants.flatMap((v) => [
          `${v.name} ms`,
          `${v.name} ÷ SELECT`,
          "p10 / p50 / p90",
          "÷ (SELECT + HTTP floor)",
        ]),
      ],
      replays.map(({ rows, select, clients }) => {
        const { http, replay } = clients.get(client)!;
        return [
          rows.toLocaleString("en"),
          median(select).toFixed(2),
          median(http).toFixed(2),
          ...variants.flatMap((v) => [
            median(replay.get(v.name)!).toFixed(2),
            `${(median(replay.get(v.name)!) / median(select)).toFixed(2)}×`,
            ratios(replay.get(v.name)!, select),
            `${(median(replay.get(v.name)!) / (median(select) + median(http))).toFixed(2)}×`,
          ]),
        ];
      }),
      1,
    );
  }
  console.log(
    "HTTP floor: a bare node:http server answering one frame, read by the same client (a new connection each time).",
  );
  const breakdown = await replayBreakdown(replays.find((r) => r.rows === BREAKDOWN_ROWS)!.threadId, BREAKDOWN_ROWS);
  console.log(
    `This checkout's replay of ${BREAKDOWN_ROWS.toLocaleString("en")} rows, ${BREAKDOWN_ROUNDS} rounds (medians): the frames read alone ${breakdown.read.toFixed(2)} ms; ` +
      `the app in process (app.fetch to the last row, no socket) ${breakdown.app.toFixed(2)} ms (+${(breakdown.app - breakdown.read).toFixed(2)}); ` +
      `over HTTP ${breakdown.http.toFixed(2)} ms (+${(breakdown.http - breakdown.app).toFixed(2)}).`,
  );
  console.log("");

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
  for (const variant of variants) await variant.close();
  provider.closeAllConnections();
  await new Promise((resolve) => provider.close(resolve));
  bareHttp.closeAllConnections();
  await new Promise((resolve) => bareHttp.close(resolve));
  await events.close();
  await writerPool.end();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await database.close();
}
