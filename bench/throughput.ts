/**
 * Throughput benchmark (npm run bench:throughput [-- --turns=N --modes=async,checkpoint --in-flight=1,10,50]):
 * how many chat turns one app process completes per second, and what each costs it in CPU.
 *
 * "One process" is the app's: this process serves the app over real HTTP (the REST API and the
 * Inngest serve endpoint, with the chat turn and, as INFERENCE=gateway has it, the model-inference
 * function it invokes for its model call). Everything that is not the app in production runs in a
 * child process (bench/throughput-executor.ts), so its CPU is not counted as the app's: the engine
 * stand-in in the SDK's async or checkpoint mode, the scripted model server, and the clients that
 * send each message with POST /api/chat and wait until its turn's run ended.
 *
 * Cases, each mode: 1, 10 and 50 turns in flight, each turn on a thread no other turn in flight
 * is using (spread), and 50 in flight on half as many threads, so a thread's turns wait for each
 * other (follow-ups). Threads are seeded with SEEDED_TURNS answered turns and take at most
 * TURNS_PER_THREAD more, so no turn outgrows the summary threshold (a long thread's turns also
 * request a summary). Printed per case: turns/s, this process's CPU per turn (process.cpuUsage),
 * PostgreSQL's backend CPU per turn (/proc/<pid>/schedstat, when the server is local), the child's
 * CPU per turn, p50/p95 latency from the POST to the run's end, requests per turn (stand-in to
 * app), and the load average. Afterwards every thread is checked: each message sent stored once,
 * answered once, its turn completed once. The npm script runs node with the app's production
 * heap flag (--max-semi-space-size, docs/operations.md), printed at the start.
 */
import { fork } from "node:child_process";
import os from "node:os";
import type pg from "pg";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference } from "../src/functions/model-inference.js";
import { CHAT_TURN_ID } from "../src/functions/turn-lifecycle.js";
import { inngestClient } from "../src/platform/inngest-serve.js";
import { createTestApp, tokenFor, listen } from "../test/helpers/http.js";
import { seedThread } from "../test/helpers/seed.js";
import { backendCpuDelta, backendCpuNs, backendPids } from "./postgres-cpu.js";
import { openBenchDatabase } from "./bench-database.js";
import { percentile, printTable } from "./report.js";
import type {
  DriveRequest,
  DriveResult,
  DriveThread,
  FromExecutor,
  ToExecutor,
  TurnResult,
} from "./throughput-executor.js";

const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
/** Turns per spread case (--turns=N). */
const TURNS = Number(flag("turns") ?? 300);
const MODES = (flag("modes") ?? "async,checkpoint").split(",") as Mode[];
const IN_FLIGHT = (flag("in-flight") ?? "1,10,50").split(",").map(Number);
const FOLLOW_UPS = flag("follow-ups") !== "off";
type Mode = "async" | "checkpoint";

/** Answered turns each thread starts with (2 messages each). */
const SEEDED_TURNS = 2;
/** Turns a thread takes at most: 2 × (SEEDED_TURNS + this) messages stay within SUMMARIZE_AFTER_MESSAGES. */
const TURNS_PER_THREAD = 8;
/** Turns of each mode's warm-up, at 10 in flight (not measured). */
const WARMUP_TURNS = 60;
/** Follow-ups: turns of each thread in flight at once. */
const FOLLOW_UPS_PER_THREAD = 2;
const TARGETS: Record<Mode, number> = { checkpoint: 60, async: 40 };
const TURN_FUNCTION = `${inngest.id}-${CHAT_TURN_ID}`;

type Case = { name: string; inFlight: number; assign: DriveRequest["assign"]; turns: number; threads: number };

type Measured = Case & {
  mode: Mode;
  wallMs: number;
  appCpuMs: number;
  pgCpuMs: number | undefined;
  result: DriveResult;
  /** The app's CPU per kind of request it served (1 in flight only). */
  requests: Map<string, RequestCpu>;
  load: number[];
};

async function main() {
  // npm run adds its npm_* variables to this process's environment; the app runs without them in
  // production (node dist/src/main.js), and the Inngest SDK reads the whole environment on every request.
  for (const name of Object.keys(process.env)) if (name.startsWith("npm_")) delete process.env[name];
  for (const n of [TURNS, ...IN_FLIGHT])
    if (!Number.isInteger(n) || n < 1) throw new Error(`bench: --turns and --in-flight take positive integers`);
  const { pool, close } = await openBenchDatabase();
  const measured: Measured[] = [];
  try {
    const flags = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].filter((a) => a.startsWith("--max-"));
    console.log(`uptime at start: ${uptime()}; node ${process.version} ${flags.join(" ") || "(default heap flags)"}`);
    for (const mode of MODES) measured.push(...(await measureMode(pool, mode)));
  } finally {
    await close();
  }
  printResults(measured);
}

function casesOf(): Case[] {
  const spread = IN_FLIGHT.map((inFlight) => ({
    name: "spread",
    inFlight,
    assign: "spread" as const,
    turns: TURNS,
    threads: Math.max(2 * inFlight, Math.ceil(TURNS / TURNS_PER_THREAD)),
  }));
  const inFlight = Math.max(...IN_FLIGHT);
  const threads = Math.max(1, Math.floor(inFlight / FOLLOW_UPS_PER_THREAD));
  const followUps = {
    name: "follow-ups",
    inFlight,
    assign: "follow-ups" as const,
    turns: threads * TURNS_PER_THREAD,
    threads,
  };
  return FOLLOW_UPS ? [...spread, followUps] : spread;
}

async function measureMode(pool: pg.Pool, mode: Mode): Promise<Measured[]> {
  const executor = startExecutor();
  try {
    const { engineUrl, modelBaseUrl } = await executor.ask(
      { type: "start", checkpoint: mode === "checkpoint" },
      "started",
    );
    // The app's Inngest clients (the serve handler's and the one the API sends events with) are built with the app.
    process.env.INNGEST_BASE_URL = engineUrl;
    const choice = chooseModel(
      readEnvironment({ OPENAI_BASE_URL: modelBaseUrl, OPENAI_API_KEY: "bench", MODEL: "bench-model" }),
    );
    if (!choice.configured) throw new Error("bench: the scripted model is not configured");
    const client = inngestClient({ mode: "dev" });
    const { app } = createTestApp(pool, {
      functions: [createChatTurn({ db: pool, model: choice }), createModelInference({ model: choice })],
      sendEvent: (event) => client.send(event),
    });
    const perRequest = requestCpu();
    const { server, url: appUrl } = await listen(perRequest.wrap(app.fetch));
    await executor.ask({ type: "register", appUrl: `${appUrl}/api/inngest` }, "registered");
    const drive = (c: Case, threads: DriveThread[]) =>
      executor.ask(
        {
          type: "drive",
          appUrl,
          turnFunction: TURN_FUNCTION,
          turns: c.turns,
          inFlight: c.inFlight,
          threads,
          assign: c.assign,
        },
        "driven",
      );
    const sent: TurnResult[] = [];
    const allThreads: string[] = [];
    try {
      const warmup: Case = { name: "warm-up", inFlight: 10, assign: "spread", turns: WARMUP_TURNS, threads: 20 };
      const warmupThreads = await seedThreads(pool, warmup.threads, `${mode}-warmup`);
      allThreads.push(...warmupThreads.map((t) => t.threadId));
      sent.push(...(await drive(warmup, warmupThreads)).turns);
      const results: Measured[] = [];
      for (const c of casesOf()) {
        const threads = await seedThreads(pool, c.threads, `${mode}-${c.name}-${c.inFlight}`);
        allThreads.push(...threads.map((t) => t.threadId));
        const pids = await backendPids(pool);
        const pgBefore = await backendCpuNs(pids);
        const cpuBefore = process.cpuUsage();
        const started = performance.now();
        // One turn at a time, requests do not overlap: each one's CPU is its own.
        if (c.inFlight === 1) perRequest.start();
        const result = await drive(c, threads);
        const wallMs = performance.now() - started;
        const cpu = process.cpuUsage(cpuBefore);
        const requests = perRequest.stop();
        const pgCpuMs = backendCpuDelta(pgBefore, await backendCpuNs(await backendPids(pool)));
        sent.push(...result.turns);
        results.push({
          ...c,
          mode,
          wallMs,
          appCpuMs: (cpu.user + cpu.system) / 1000,
          pgCpuMs,
          result,
          requests,
          load: os.loadavg(),
        });
        console.log(
          `${mode} ${c.name} ${c.inFlight} in flight: ${(c.turns / (wallMs / 1000)).toFixed(1)} turns/s (load ${os
            .loadavg()
            .map((l) => l.toFixed(2))
            .join(" ")})`,
        );
      }
      console.log(`${mode} mode, a turn's ops: ${results[0]?.result.ops.join(", ")}`);
      await checkThreads(pool, mode, allThreads, sent);
      return results;
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  } finally {
    await executor.stop();
  }
}

/** The child process and a request/answer exchange with it (one at a time). */
function startExecutor() {
  const child = fork(new URL("./throughput-executor.ts", import.meta.url), { stdio: "inherit" });
  let exited: Error | undefined;
  child.once("exit", (code) => {
    exited = new Error(`bench: the executor process exited (${code})`);
  });
  return {
    ask: <T extends FromExecutor["type"]>(message: ToExecutor, answer: T) =>
      new Promise<Extract<FromExecutor, { type: T }>>((resolve, reject) => {
        if (exited) return reject(exited);
        const onMessage = (reply: FromExecutor) => {
          child.off("message", onMessage);
          if (reply.type === answer) resolve(reply as Extract<FromExecutor, { type: T }>);
          else reject(new Error(`bench: the executor failed: ${"message" in reply ? reply.message : reply.type}`));
        };
        child.on("message", onMessage);
        child.send(message);
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited || child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.send({ type: "stop" } satisfies ToExecutor);
      }),
  };
}

type RequestCpu = { count: number; cpuMs: number };

/**
 * The CPU of each request the app serves while started, by kind (the function a serve request
 * runs, else the route): from the request's arrival to its response, the work it awaited included.
 * Only meaningful while requests do not overlap.
 */
function requestCpu() {
  let byKind: Map<string, RequestCpu> | undefined;
  return {
    start: () => {
      byKind = new Map();
    },
    stop: () => {
      const measured = byKind ?? new Map<string, RequestCpu>();
      byKind = undefined;
      return measured;
    },
    wrap:
      (fetch: (request: Request, env: unknown) => Response | Promise<Response>) =>
      async (request: Request, env: unknown) => {
        const counting = byKind;
        if (!counting) return fetch(request, env);
        const before = process.cpuUsage();
        const response = await fetch(request, env);
        const cpu = process.cpuUsage(before);
        const url = new URL(request.url);
        const fn = url.searchParams.get("fnId")?.replace(`${inngest.id}-`, "");
        const kind = fn ? `serve ${fn}` : `${request.method} ${url.pathname}`;
        const entry = counting.get(kind) ?? { count: 0, cpuMs: 0 };
        entry.count += 1;
        entry.cpuMs += (cpu.user + cpu.system) / 1000;
        counting.set(kind, entry);
        return response;
      },
  };
}

/** `count` threads of SEEDED_TURNS answered turns, each its own user's, with that user's token. */
async function seedThreads(pool: pg.Pool, count: number, label: string): Promise<DriveThread[]> {
  const threads: DriveThread[] = [];
  for (let i = 0; i < count; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, count - i) }, async (_, j) => {
        const userId = `bench-${label}-${i + j}`;
        // Titled, as a thread is after its first turn (title-thread).
        const { threadId } = await seedThread(pool, { turns: SEEDED_TURNS, userId, title: "Bench thread" });
        return { threadId, token: await tokenFor(userId) };
      }),
    );
    threads.push(...batch);
  }
  return threads;
}

/** Every thread holds its seeded turns and each message sent, each stored once, answered once, its turn completed once. */
async function checkThreads(pool: pg.Pool, mode: Mode, threadIds: string[], sent: TurnResult[]) {
  const problems: string[] = [];
  const failed = sent.filter((s) => s.status !== "completed");
  for (const s of failed.slice(0, 5))
    problems.push(`message ${s.messageId}: run ${s.status}: ${JSON.stringify(s.output).slice(0, 300)}`);
  const { rows: perThread } = await pool.query<{ thread_id: string; users: number; answers: number }>(
    `SELECT thread_id, count(*) FILTER (WHERE kind = 'user')::int AS users, count(*) FILTER (WHERE kind = 'agent')::int AS answers
       FROM messages WHERE thread_id = ANY($1) GROUP BY thread_id`,
    [threadIds],
  );
  const sentTo = new Map<string, number>();
  for (const s of sent) sentTo.set(s.threadId, (sentTo.get(s.threadId) ?? 0) + 1);
  for (const threadId of threadIds) {
    const row = perThread.find((r) => r.thread_id === threadId);
    const expected = SEEDED_TURNS + (sentTo.get(threadId) ?? 0);
    if (row?.users !== expected || row.answers !== expected)
      problems.push(
        `thread ${threadId}: ${row?.users ?? 0} user messages and ${row?.answers ?? 0} answers, expected ${expected} each`,
      );
  }
  const { rows: perMessage } = await pool.query<{
    id: string;
    stored: number;
    answers: number;
    turns: number;
    completed: number;
  }>(
    `SELECT m.id::text, count(*)::int AS stored,
            (SELECT count(*)::int FROM messages a WHERE a.answers = m.id) AS answers,
            (SELECT count(*)::int FROM turns t WHERE t.message_id = m.id) AS turns,
            (SELECT count(*)::int FROM turns t WHERE t.message_id = m.id AND t.status = 'completed') AS completed
       FROM messages m WHERE m.id = ANY($1) GROUP BY m.id`,
    [sent.map((s) => s.messageId)],
  );
  const once = perMessage.filter((r) => r.stored === 1 && r.answers === 1 && r.turns === 1 && r.completed === 1);
  if (once.length !== sent.length)
    problems.push(
      `${sent.length - once.length} of ${sent.length} messages sent are not stored, answered and completed exactly once`,
    );
  if (problems.length > 0) throw new Error(`bench: lost or doubled (${mode}):\n${problems.join("\n")}`);
  console.log(
    `${mode} mode: checked ${threadIds.length} threads: ${sent.length} messages sent (warm-up included), each stored, answered and its turn completed once`,
  );
}

/** What `uptime` prints: the time and the 1, 5 and 15 minute load averages. */
const uptime = () =>
  `${new Date().toISOString().slice(11, 19)} UTC, load average: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(", ")} (${os.cpus().length} CPUs)`;

function printResults(measured: Measured[]) {
  console.log(
    `\nPer case (after a ${WARMUP_TURNS}-turn warm-up per mode): app CPU = this process (API, serve endpoint, SDK, turns); PG = the database's backends; executor = the child (stand-in, model, clients); turns/s per app core = 1000 / app CPU ms per turn, what the process would serve with a core of its own (the load-independent figure on a shared machine); latency from POST /api/chat to the run's end; requests = stand-in to app per turn, checkpoints = SDK to stand-in per turn (model-inference's included), medians.\n`,
  );
  printTable(
    [
      "mode",
      "case",
      "in flight",
      "threads",
      "turns",
      "turns/s",
      "app CPU ms/turn",
      "turns/s per app core",
      "app CPU %",
      "PG CPU ms/turn",
      "executor CPU ms/turn",
      "p50 ms",
      "p95 ms",
      "requests",
      "checkpoints",
      "load 1m",
    ],
    measured.map((m) => {
      const latencies = m.result.turns.map((t) => t.latencyMs);
      return [
        m.mode,
        m.name,
        `${m.inFlight}`,
        `${m.threads}`,
        `${m.turns}`,
        (m.turns / (m.wallMs / 1000)).toFixed(1),
        (m.appCpuMs / m.turns).toFixed(2),
        (m.turns / (m.appCpuMs / 1000)).toFixed(1),
        ((100 * m.appCpuMs) / m.wallMs).toFixed(0),
        m.pgCpuMs === undefined ? "–" : (m.pgCpuMs / m.turns).toFixed(2),
        (m.result.executorCpuMs / m.turns).toFixed(2),
        percentile(latencies, 50).toFixed(1),
        percentile(latencies, 95).toFixed(1),
        `${percentile(
          m.result.turns.map((t) => t.requests),
          50,
        )}`,
        `${percentile(
          m.result.turns.map((t) => t.checkpoints),
          50,
        )}`,
        m.load[0]!.toFixed(2),
      ];
    }),
    2,
  );
  console.log(
    "\nThe app's CPU by kind of request, 1 in flight (requests do not overlap; a request's awaited work included):\n",
  );
  printTable(
    ["mode", "request", "per turn", "CPU ms/request", "CPU ms/turn", "share of app CPU"],
    measured
      .filter((m) => m.requests.size > 0)
      .flatMap((m) =>
        [...m.requests].map(([kind, { count, cpuMs }]) => [
          m.mode,
          kind,
          (count / m.turns).toFixed(1),
          (cpuMs / count).toFixed(2),
          (cpuMs / m.turns).toFixed(2),
          `${((100 * cpuMs) / m.appCpuMs).toFixed(0)}%`,
        ]),
      ),
    2,
  );
  console.log("");
  for (const mode of MODES) {
    const at50 = measured.find((m) => m.mode === mode && m.name === "spread" && m.inFlight === 50);
    if (!at50) continue;
    const rate = at50.turns / (at50.wallMs / 1000);
    const perCore = at50.turns / (at50.appCpuMs / 1000);
    console.log(
      `target ${mode}: ≥ ${TARGETS[mode]} turns/s at 50 in flight: ${rate.toFixed(1)} measured (${rate >= TARGETS[mode] ? "met" : "MISSED"}), ${perCore.toFixed(1)} per app core (${perCore >= TARGETS[mode] ? "met" : "MISSED"}); app CPU ${(at50.appCpuMs / at50.turns).toFixed(2)} ms/turn`,
    );
  }
  console.log(`uptime at end: ${uptime()}`);
}

await main();
