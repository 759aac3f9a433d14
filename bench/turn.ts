/**
 * Turn benchmark: what one chat turn costs next to the floor it could reach, on the path production
 * takes.
 *
 *   npm run bench:turn [-- --rounds=N]     N measured rounds per mode (default 150)
 *
 * The script compiles this file, the app and the test helpers it uses with the production tsc
 * options (tsconfig.bench.json, into dist-bench/) and runs the JavaScript on plain node with
 * `npm start`'s flags: the turn and both floors run the code production runs, with no tsx
 * transform (whose keepNames wrappers cost CPU that production does not pay).
 *
 * The app is served over HTTP in this process and driven by the engine stand-in over the SDK's
 * serve protocol, in both of the SDK's modes: async (a request per step) and checkpoint (the SDK
 * runs what it can in one request and reports each step to the executor). Beside the turn (an
 * existing 100-message thread, the scripted model answering at once) run two floors, same
 * process, same protocol, same model server:
 *
 * (a) bare: a function with the turn's Inngest ops, in its order and of its kinds (step.run,
 *     step.sendEvent, and step.invoke of the same model-inference function with the request body
 *     the turn's model call sent, so both send the model the same prompt), each step.run doing
 *     nothing;
 * (b) durable: the same, each history step sending one trivial indexed statement (an INSERT for a
 *     step that writes, a SELECT for one that reads) on the same database.
 *
 * Both floors report their steps in checkpoint mode as the turn functions do (TURN_CHECKPOINTING).
 *
 * Each round runs turn, (a) and (b) in a rotating order, so all three meet the same load on a
 * shared machine; ratios are taken within a round and reported as p10/p50/p90. CPU is this
 * process's (app, SDK, stand-in and model server alike); PostgreSQL CPU is the on-CPU time of the
 * database's backends (/proc/<pid>/schedstat, when the server is local). Statement time is how long
 * the app waited on its statements (sent to result, summed): a ratio's excess splits into what the
 * database took and what the app did (wall − statements). Afterwards every thread
 * is checked: each message sent stored once, answered once, its turn completed once.
 *
 * Also prints the statements each step of a turn sends (InngestTestEngine, one run per kind of
 * turn), what each of them costs PostgreSQL (backend CPU and WAL bytes, sent one after another by
 * the storage functions the steps call, beside the durable floor's statements), and the plans of
 * the history read and of the latest-turn lookup.
 */
import { randomUUID } from "node:crypto";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { ASSISTANT_NAME } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createModelInference, type ModelInference } from "../src/functions/model-inference.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { CHAT_TURN_ID, TURN_CHECKPOINTING } from "../src/functions/turn-lifecycle.js";
import { resultId } from "../src/history/ids.js";
import { historyWindow, resolveHistoryPolicy } from "../src/history/policy.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import * as sql from "../src/history/store-sql.js";
import { SUMMARIZE_AFTER_MESSAGES, withSummary } from "../src/history/summaries.js";
import { countingPool } from "../test/helpers/counting-pool.js";
import { startEngineStandIn, type StandInRun } from "../test/helpers/engine-stand-in.js";
import { serveToStandIn } from "../test/helpers/http.js";
import { type ModelServer, startModelServer } from "../test/helpers/model-server.js";
import { seedThread } from "../test/helpers/seed.js";
import { statementsPerStep, totalStatements } from "../test/helpers/step-statements.js";
import { backendCpuDelta, backendCpuNs, backendPids } from "./postgres-cpu.js";
import { openBenchDatabase } from "./bench-database.js";
import { percentile, printTable } from "./report.js";

const roundsFlag = process.argv.find((a) => a.startsWith("--rounds="));
/** Measured rounds per mode (each round: a turn and both floors); --rounds=N for more. */
const ROUNDS = roundsFlag ? Number(roundsFlag.slice("--rounds=".length)) : 150;
const WARMUP_ROUNDS = 10;
/** Turns of each seeded thread: 100 messages, a question and an answer each. */
const SEEDED_TURNS = 50;
/** Threads per mode; rounds take them in turn, so each grows by ROUNDS / THREADS turns. */
const THREADS = 10;
const LATEST_TURN_ROWS = 50_000;
const MODES = ["async", "checkpoint"] as const;
type Mode = (typeof MODES)[number];
const KINDS = ["turn", "bare (a)", "durable (b)"] as const;
type Kind = (typeof KINDS)[number];

type Sample = {
  wallMs: number;
  cpuMs: number;
  pgMs: number | undefined;
  /** How long the run's statements took as the app saw them: sent to result, summed. */
  statementMs: number;
  statements: number;
  /** Requests the executor made to the app, and checkpoint requests the SDK made to the executor. */
  requests: number;
  checkpoints: number;
};
/** The turn's ops in order, as the floors repeat them. */
type Op = { id: string; kind: string };

async function main() {
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
    throw new Error(`--rounds must be a positive integer, got ${roundsFlag} (usage: npm run bench:turn -- --rounds=N)`);
  const { pool, close } = await openBenchDatabase();
  const model = await startModelServer();
  try {
    await printStatementsPerStep(pool, model);
    await pool.query(
      "CREATE TABLE bench_floor (id uuid PRIMARY KEY, run text NOT NULL, seq int NOT NULL, body text NOT NULL)",
    );
    await pool.query("CREATE INDEX bench_floor_run_idx ON bench_floor (run, seq)");
    await printStatementCosts(pool);
    const results = new Map<Mode, Map<Kind, Sample[]>>();
    const turnOps = new Map<Mode, Op[]>();
    for (const mode of MODES) {
      const measured = await measureMode(pool, model, mode);
      results.set(mode, measured.samples);
      turnOps.set(mode, measured.ops);
    }
    printResults(results, turnOps);
    await explainHistoryRead(pool);
    await explainLatestTurn(pool);
  } finally {
    await model.close();
    await close();
  }
}

async function measureMode(pool: pg.Pool, model: ModelServer, mode: Mode) {
  let statements = 0;
  let statementMs = 0;
  const counting = countingPool(pool, () => {
    statements += 1;
    const sent = performance.now();
    return () => {
      statementMs += performance.now() - sent;
    };
  });
  const choice = chooseModel(
    readEnvironment({ OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: "bench", MODEL: "bench-model" }),
  );
  if (!choice.configured) throw new Error("bench: the scripted model is not configured");
  const chatTurn = createChatTurn({ db: counting.pool, model: choice });
  // The turn's inference is an invoke of model-inference (INFERENCE=gateway): served beside it, as in production.
  const modelInference = createModelInference({ model: choice });

  const engine = await startEngineStandIn({ checkpoint: mode === "checkpoint" });
  // The app's Inngest client is built when the app is: it sends events and checkpoints to the stand-in.
  process.env.INNGEST_BASE_URL = engine.url;
  const served: InngestFunction.Any[] = [chatTurn, modelInference];
  const app = await serveToStandIn(counting.pool, engine, served);
  try {
    // Titled, as a thread is after its first turn (title-thread): no title to ask for.
    const threads = await Promise.all(
      Array.from({ length: THREADS }, () => seedThread(pool, { turns: SEEDED_TURNS, title: "What to read next" })),
    );
    const sent: { threadId: string; messageId: string }[] = [];
    const runOnce = async (fn: string, event: { name: string; data: Record<string, unknown> }) => {
      model.script({ text: "An answer." });
      const pids = await backendPids(pool);
      const pgBefore = await backendCpuNs(pids);
      const statementsBefore = statements;
      const statementMsBefore = statementMs;
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const received = await engine.send(event);
      const run = engine.runs.find((r) => r.event.id === received.id && r.fnId === fn);
      if (!run) throw new Error(`bench: no run of ${fn} started`);
      await run.ended;
      const wallMs = performance.now() - started;
      const cpu = process.cpuUsage(cpuBefore);
      const pgAfter = await backendCpuNs(pids);
      if (run.status !== "completed") throw new Error(`bench: ${fn} ${run.status}: ${JSON.stringify(run.output)}`);
      return {
        run,
        sample: {
          wallMs,
          cpuMs: (cpu.user + cpu.system) / 1000,
          pgMs: backendCpuDelta(pgBefore, pgAfter),
          statementMs: statementMs - statementMsBefore,
          statements: statements - statementsBefore,
          // The turn's requests include those of the runs it invoked (its model calls).
          requests: engine.runs
            .filter((r) => r === run || r.invokedBy === run)
            .reduce((n, r) => n + r.requests.length, 0),
          checkpoints: run.checkpoints,
        } satisfies Sample,
      };
    };
    let next = 0;
    const turn = async () => {
      const thread = threads[next++ % THREADS]!;
      const messageId = randomUUID();
      sent.push({ threadId: thread.threadId, messageId });
      return runOnce(`${inngest.id}-${CHAT_TURN_ID}`, {
        name: "chat/message.sent",
        data: { messageId, userId: thread.userId, content: "What should I read next?", threadId: thread.threadId },
      });
    };

    // The floors repeat what the first turn did, op for op, and send the model what it was sent.
    const ops = (await turn()).run.order.map(({ id, kind }) => ({ id, kind }));
    const inference = { modelInference, body: model.requests.at(-1)! as unknown as Record<string, unknown> };
    const floors = {
      bare: floorFunction("bare", ops, inference, counting.pool),
      durable: floorFunction("durable", ops, inference, counting.pool),
    };
    await app.close();
    const floorApp = await serveToStandIn(counting.pool, engine, [
      chatTurn,
      modelInference,
      floors.bare.fn,
      floors.durable.fn,
    ]);
    const samples = new Map<Kind, Sample[]>(KINDS.map((k) => [k, []]));
    const floorRuns: StandInRun[] = [];
    try {
      const runners: Record<Kind, () => Promise<{ run: StandInRun; sample: Sample }>> = {
        turn,
        "bare (a)": () => runOnce(floors.bare.id, { name: floors.bare.event, data: { run: randomUUID() } }),
        "durable (b)": async () => {
          const result = await runOnce(floors.durable.id, { name: floors.durable.event, data: { run: randomUUID() } });
          floorRuns.push(result.run);
          return result;
        },
      };
      for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
        // A rotating order: no kind always runs first (after the model's idle time) or last.
        for (let i = 0; i < KINDS.length; i++) {
          const kind = KINDS[(round + i) % KINDS.length]!;
          const { sample } = await runners[kind]();
          if (round >= WARMUP_ROUNDS) samples.get(kind)!.push(sample);
        }
      }
    } finally {
      await floorApp.close();
    }
    await checkThreads(pool, mode, threads, sent, floorRuns, floors.durable.writes);
    return { samples, ops };
  } finally {
    await engine.close();
  }
}

/** History steps that write (the others read); the durable floor sends an INSERT for these, a SELECT for the rest. */
const WRITES = /^history\.(append-|rerun-begin-turn)/;

/**
 * A function with the turn's ops: step.run as no-op (bare) or, for history steps, one trivial
 * indexed statement (durable); the turn's model call as a step.invoke of the same model-inference
 * function with the same request body; step.sendEvent of a small event.
 */
function floorFunction(
  name: "bare" | "durable",
  ops: Op[],
  inference: { modelInference: ModelInference; body: Record<string, unknown> },
  db: pg.Pool,
) {
  const invokeData = { body: inference.body };
  const event = `bench/floor.${name}`;
  const writes = name === "durable" ? ops.filter((op) => WRITES.test(op.id)).length : 0;
  const fn = inngest.createFunction(
    // Checkpoint mode: the floors report their steps to the executor as the turn does.
    { id: `bench-floor-${name}`, triggers: [{ event }], retries: 0, checkpointing: TURN_CHECKPOINTING },
    async ({ event: { data }, step }) => {
      const run = String(data.run);
      let seq = 0;
      for (const op of ops) {
        if (op.kind === "InvokeFunction") {
          const invoke = step.invoke as unknown as (
            id: string,
            opts: { function: ModelInference; data: typeof invokeData },
          ) => Promise<unknown>;
          await invoke(op.id, { function: inference.modelInference, data: invokeData });
        } else if (op.kind === "step.sendEvent") {
          await step.sendEvent(op.id, { name: "bench/floor.finished", data: { run } });
        } else if (name === "durable" && WRITES.test(op.id)) {
          seq += 1;
          const at = seq;
          await step.run(op.id, async () => {
            const { rowCount } = await db.query(
              "INSERT INTO bench_floor (id, run, seq, body) VALUES ($1, $2, $3, $4)",
              [randomUUID(), run, at, "What should I read next?"],
            );
            return rowCount;
          });
        } else if (name === "durable" && op.id.startsWith("history.")) {
          await step.run(op.id, async () => {
            const { rows } = await db.query(
              "SELECT id, seq FROM bench_floor WHERE run = $1 ORDER BY seq DESC LIMIT 1",
              [run],
            );
            return rows[0] ?? null;
          });
        } else if (op.kind === "StepRun") {
          await step.run(op.id, async () => null);
        } else {
          throw new Error(`bench: the floor has no counterpart for ${op.id} [${op.kind}]`);
        }
      }
    },
  );
  return { fn, id: `${inngest.id}-bench-floor-${name}`, event, writes };
}

/** Every thread holds its seeded turns and each message sent exactly once, answered once, its turn completed once. */
async function checkThreads(
  pool: pg.Pool,
  mode: Mode,
  threads: { threadId: string }[],
  sent: { threadId: string; messageId: string }[],
  floorRuns: StandInRun[],
  floorWrites: number,
) {
  const problems: string[] = [];
  for (const { threadId } of threads) {
    const expected = SEEDED_TURNS + sent.filter((s) => s.threadId === threadId).length;
    const { rows } = await pool.query(
      `SELECT count(*) FILTER (WHERE kind = 'user')::int AS users, count(*) FILTER (WHERE kind = 'agent')::int AS answers,
              (SELECT count(*)::int FROM turns WHERE thread_id = $1 AND status = 'completed') AS completed,
              (SELECT count(*)::int FROM turns WHERE thread_id = $1) AS turns
         FROM messages WHERE thread_id = $1`,
      [threadId],
    );
    const { users, answers, completed, turns } = rows[0] as {
      users: number;
      answers: number;
      completed: number;
      turns: number;
    };
    if (users !== expected || answers !== expected)
      problems.push(`thread ${threadId}: ${users} user messages and ${answers} answers, expected ${expected} each`);
    if (turns !== completed || completed < expected - SEEDED_TURNS)
      problems.push(`thread ${threadId}: ${completed} of ${turns} turns completed`);
  }
  const { rows } = await pool.query(
    "SELECT message_id, count(*)::int AS n FROM turns WHERE message_id = ANY($1) GROUP BY message_id",
    [sent.map((s) => s.messageId)],
  );
  const once = rows.filter((r) => r.n === 1).length;
  if (once !== sent.length)
    problems.push(`${sent.length - once} of ${sent.length} messages sent lack exactly one turn`);
  const { rows: floorRows } = await pool.query(
    "SELECT run, count(*)::int AS n FROM bench_floor WHERE run = ANY($1) GROUP BY run",
    [floorRuns.map((r) => String(r.event.data.run))],
  );
  const written = floorRows.filter((r) => r.n === floorWrites).length;
  if (floorWrites > 0 && written !== floorRuns.length)
    problems.push(`${floorRuns.length - written} of ${floorRuns.length} durable floor runs lack ${floorWrites} rows`);
  if (problems.length > 0) throw new Error(`bench: lost or doubled:\n${problems.join("\n")}`);
  console.log(
    `${mode} mode: checked ${threads.length} threads: ${sent.length} messages sent, each stored, answered and its turn completed once; ${floorRuns.length} durable floor runs wrote ${floorWrites} rows each`,
  );
}

const p = (values: number[], digits = 1) => [10, 50, 90].map((q) => percentile(values, q).toFixed(digits)).join(" / ");

function printResults(results: Map<Mode, Map<Kind, Sample[]>>, turnOps: Map<Mode, Op[]>) {
  for (const mode of MODES) {
    const ops = turnOps.get(mode)!;
    console.log(
      `\n${mode} mode — the turn's ops (${ops.length}): ${ops.map((o) => `${o.id} [${o.kind.replace(/^step\./, "")}]`).join(", ")}`,
    );
  }
  console.log(
    `\nPer run, p10 / p50 / p90 over ${ROUNDS} rounds (after ${WARMUP_ROUNDS} warm-up rounds); CPU = this process (app, SDK, stand-in, model server); PG CPU = the database's backends; statement ms = the time the app waited on its statements (sent to result, summed); requests: executor to app; checkpoints: SDK to executor.\n`,
  );
  const lines: string[][] = [];
  for (const mode of MODES) {
    for (const kind of KINDS) {
      const s = results.get(mode)!.get(kind)!;
      const pg = s.every((x) => x.pgMs !== undefined)
        ? p(
            s.map((x) => x.pgMs!),
            2,
          )
        : "–";
      lines.push([
        mode,
        kind,
        p(s.map((x) => x.wallMs)),
        p(s.map((x) => x.cpuMs)),
        pg,
        p(
          s.map((x) => x.statementMs),
          2,
        ),
        `${percentile(
          s.map((x) => x.statements),
          50,
        )}`,
        `${percentile(
          s.map((x) => x.requests),
          50,
        )}`,
        `${percentile(
          s.map((x) => x.checkpoints),
          50,
        )}`,
      ]);
    }
  }
  printTable(
    ["mode", "run", "wall ms", "CPU ms", "PG CPU ms", "statement ms", "statements", "requests", "checkpoints"],
    lines,
    2,
  );

  console.log("\nRatios within each round, p10 / p50 / p90 (target: ÷ durable ≤ 1.2×, ÷ bare ≤ 1.35×):\n");
  const ratioLines: string[][] = [];
  for (const mode of MODES) {
    const turn = results.get(mode)!.get("turn")!;
    for (const floor of ["bare (a)", "durable (b)"] as const) {
      const base = results.get(mode)!.get(floor)!;
      const ratio = (f: (x: Sample) => number) =>
        p(
          turn.map((x, i) => f(x) / f(base[i]!)),
          2,
        );
      const excess = (f: (x: Sample) => number) =>
        p(
          turn.map((x, i) => f(x) - f(base[i]!)),
          1,
        );
      ratioLines.push([
        mode,
        `turn ÷ ${floor}`,
        ratio((x) => x.wallMs),
        ratio((x) => x.cpuMs),
        turn.every((x) => x.pgMs !== undefined) && base.every((x) => x.pgMs !== undefined)
          ? excess((x) => x.pgMs!)
          : "–",
        excess((x) => x.statementMs),
        excess((x) => x.wallMs),
        excess((x) => x.cpuMs),
        excess((x) => x.wallMs - x.statementMs),
      ]);
    }
  }
  printTable(
    ["mode", "ratio", "wall ×", "CPU ×", "PG CPU +ms", "statement +ms", "wall +ms", "CPU +ms", "wall − statements +ms"],
    ratioLines,
    2,
  );
}

/**
 * Statements per step of each kind of turn, counted under InngestTestEngine (one run each; the
 * scripted model answering over HTTP): where the turn's round trips to the database are.
 */
async function printStatementsPerStep(pool: pg.Pool, model: ModelServer) {
  const counting = statementsPerStep(pool);
  const deps = {
    db: counting.pool,
    model: chooseModel(
      readEnvironment({ OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: "bench", MODEL: "bench-model" }),
    ),
  };
  const chatTurn = createChatTurn(deps);
  const seeded = async () => seedThread(pool, { turns: SEEDED_TURNS });
  const chat = (data: { threadId?: string }) => ({
    name: "chat/message.sent",
    data: { messageId: randomUUID(), userId: "user-1", content: "What should I read next?", ...data },
  });
  type Event = { name: string; data: Record<string, unknown> };
  const scenarios: { name: string; run: () => Promise<{ fn: InngestFunction.Like; event: Event }> }[] = [
    { name: "chat turn, new thread", run: async () => ({ fn: chatTurn, event: chat({}) }) },
    {
      name: `chat turn, ${SEEDED_TURNS * 2}-message thread`,
      run: async () => ({ fn: chatTurn, event: chat({ threadId: (await seeded()).threadId }) }),
    },
    {
      name: `chat turn, ${SEEDED_TURNS * 2}-message thread, INFERENCE=stream`,
      run: async () => ({
        fn: createChatTurn({ ...deps, inference: "stream" }),
        event: chat({ threadId: (await seeded()).threadId }),
      }),
    },
    {
      name: `regenerate, ${SEEDED_TURNS * 2}-message thread`,
      run: async () => {
        const { threadId, userId } = await seeded();
        const { rows } = await pool.query(
          "SELECT id FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq DESC LIMIT 1",
          [threadId],
        );
        return {
          fn: createRegenerate(deps),
          event: { name: "chat/message.regenerate", data: { threadId, messageId: rows[0].id, userId } },
        };
      },
    },
  ];
  const counted: { name: string; perStep: Map<string, number> }[] = [];
  for (const scenario of scenarios) {
    const { fn, event } = await scenario.run();
    model.reset();
    model.script({ text: "An answer." });
    const { error } = await counting.run(fn, event);
    if (error) throw error;
    counted.push({ name: scenario.name, perStep: new Map(counting.perStep) });
  }
  const stepNames = [...new Set(counted.flatMap((c) => [...c.perStep.keys()]))].sort();
  console.log("\nSQL statements per step of one turn (InngestTestEngine):\n");
  printTable(
    ["turn", "statements", ...stepNames],
    counted.map((c) => [c.name, `${totalStatements(c.perStep)}`, ...stepNames.map((s) => `${c.perStep.get(s) ?? 0}`)]),
    1,
  );
  const worst = Math.max(
    ...counted.map((c) => Math.max(0, ...[...c.perStep].filter(([s]) => s.startsWith("history.")).map(([, n]) => n))),
  );
  const most = Math.max(...counted.map((c) => totalStatements(c.perStep)));
  console.log(
    `\nmost statements in one history step: ${worst} (target ≤ 1: ${worst <= 1 ? "met" : "MISSED"}); most per turn: ${most} (target ≤ 6: ${most <= 6 ? "met" : "MISSED"})`,
  );
}

/** Turns whose statements are measured one by one (after STATEMENT_WARMUP turns). */
const STATEMENT_TURNS = 200;
const STATEMENT_WARMUP = 20;

/**
 * What each statement of a turn costs PostgreSQL: a turn's two statements sent by the storage
 * functions its steps call (no Inngest, nothing else in flight), turn after turn on seeded
 * threads, with the durable floor's INSERT and SELECT after each. Per statement: the backends' CPU
 * (schedstat around it alone) and the WAL it wrote (insert position before and after, read outside
 * the CPU reading). Where the turn's PostgreSQL excess over the floor goes, statement by statement.
 */
async function printStatementCosts(pool: pg.Pool) {
  const threads = await Promise.all(
    Array.from({ length: THREADS }, () => seedThread(pool, { turns: SEEDED_TURNS, title: "What to read next" })),
  );
  const policy = resolveHistoryPolicy({});
  const window = historyWindow(policy)!;
  const costs = new Map<string, { cpuMs: number[]; walBytes: number[] }>();
  const measure = async <T>(name: string, counted: boolean, statement: () => Promise<T>): Promise<T> => {
    const pids = await backendPids(pool);
    const lsn = (await pool.query("SELECT pg_current_wal_insert_lsn() AS lsn")).rows[0].lsn;
    const before = await backendCpuNs(pids);
    const result = await statement();
    const cpuMs = backendCpuDelta(before, await backendCpuNs(pids));
    const { rows } = await pool.query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::int AS bytes", [lsn]);
    if (counted && cpuMs !== undefined) {
      const cost = costs.get(name) ?? { cpuMs: [], walBytes: [] };
      cost.cpuMs.push(cpuMs);
      cost.walBytes.push(rows[0].bytes);
      costs.set(name, cost);
    }
    return result;
  };
  for (let i = 0; i < STATEMENT_WARMUP + STATEMENT_TURNS; i++) {
    const counted = i >= STATEMENT_WARMUP;
    const { threadId, userId } = threads[i % THREADS]!;
    const messageId = randomUUID();
    const runId = `bench-statements-${messageId}`;
    // No turn ahead: the statement reads the history window too (the turn takes no history.get).
    const start = await measure("history.append-user-message (threadline_begin_turn, with the window)", counted, () =>
      beginTurn(pool, {
        threadId,
        userId,
        message: { id: messageId, text: "What should I read next?" },
        turn: { runId, kind: "chat", eventId: randomUUID() },
        context: { policy, model: { provider: "openai", name: "bench-model" } },
        history: { window, countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1 },
      }),
    );
    const read = withSummary(threadId, start.window!);
    // The answer's usage rides on its store (a final answer takes no usage step).
    await measure("history.append-results (threadline_store_answer, with the usage row)", counted, () =>
      storeAnswer(pool, {
        threadId,
        userId,
        runId,
        messageId,
        messageSeq: start.messageSeq,
        variant: start.variant,
        detachLaterTurns: false,
        results: [
          {
            id: resultId(messageId, start.variant, 0),
            agentName: ASSISTANT_NAME,
            content: { output: [{ type: "text", role: "assistant", content: "An answer." }], toolCalls: [] },
          },
        ],
        context: { history: { from: "database", read: read.rows.length, sent: read.rows.length } },
        usage: {
          key: `${runId}:assistant`,
          userId,
          threadId,
          messageId,
          runId,
          stepId: "assistant",
          attempt: 0,
          provider: "openai",
          model: "bench-model",
          inputTokens: 500,
          outputTokens: 20,
          cachedTokens: null,
          reasoningTokens: null,
          latencyMs: null,
          costUsd: null,
          failed: false,
        },
      }),
    );
    await measure("durable floor INSERT", counted, () =>
      pool.query("INSERT INTO bench_floor (id, run, seq, body) VALUES ($1, $2, $3, $4)", [
        randomUUID(),
        runId,
        1,
        "What should I read next?",
      ]),
    );
    await measure("durable floor SELECT", counted, () =>
      pool.query("SELECT id, seq FROM bench_floor WHERE run = $1 ORDER BY seq DESC LIMIT 1", [runId]),
    );
  }
  if (costs.size === 0) {
    console.log("\nPostgreSQL cost per statement: not measured (PostgreSQL is not local).");
    return;
  }
  console.log(
    `\nPostgreSQL cost per statement, ${STATEMENT_TURNS} turns sent one statement at a time (after ${STATEMENT_WARMUP}), ${SEEDED_TURNS * 2}-message threads:\n`,
  );
  printTable(
    ["statement", "backend CPU ms p10 / p50 / p90", "WAL bytes p50"],
    [...costs].map(([name, cost]) => [name, p(cost.cpuMs, 3), `${percentile(cost.walBytes, 50)}`]),
    1,
  );
  const p50 = (name: string) => percentile(costs.get(name)!.cpuMs, 50);
  const turnMs = [...costs.keys()]
    .filter((name) => !name.startsWith("durable floor"))
    .reduce((ms, name) => ms + p50(name), 0);
  // The floor of a turn on an idle existing thread sends two INSERTs (the steps that write), no SELECT
  // (the turn reads no history in a step of its own); a turn with one ahead adds the SELECT of history.get.
  const floorMs = 2 * p50("durable floor INSERT");
  console.log(
    `\nsum of p50s: the turn's statements ${turnMs.toFixed(2)} ms, the floor's (2 INSERTs) ${floorMs.toFixed(2)} ms`,
  );
}

/** The history.get statement on a seeded thread: index scans only, the summary check included. */
async function explainHistoryRead(pool: pg.Pool) {
  const { threadId } = await seedThread(pool, { turns: SEEDED_TURNS });
  await pool.query("ANALYZE");
  const plan = await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql.selectHistoryWindow}`, [
    threadId,
    SEEDED_TURNS * 2 + 1,
    19,
    true,
    21,
  ]);
  console.log(
    `\nEXPLAIN (ANALYZE, BUFFERS) history.get (selectHistoryWindow) on a ${SEEDED_TURNS * 2}-message thread, lastN 20:`,
  );
  for (const line of plan.rows) console.log(`  ${line["QUERY PLAN"]}`);
}

/**
 * The debug view's latest-turn lookup among LATEST_TURN_ROWS turns of 500 threads, with its index
 * (turns_thread_idx, migration 0006) and, in a rolled-back transaction, without it.
 */
async function explainLatestTurn(pool: pg.Pool) {
  await pool.query(
    `WITH t AS (
       INSERT INTO threads (id, user_id, last_seq) SELECT md5('t' || g)::uuid, 'bench', $1 / 500 FROM generate_series(1, 500) g RETURNING id
     ), m AS (
       INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content)
       SELECT md5(t.id::text || s)::uuid, t.id, s, s, 'user', 'user', '{"text": "q"}'::jsonb FROM t, generate_series(1, $1 / 500) s
       RETURNING id, thread_id
     )
     INSERT INTO turns (run_id, thread_id, message_id, kind, variant, status, started_at)
     SELECT 'bench-' || m.id, m.thread_id, m.id, 'chat', 1, 'completed', now() - random() * interval '30 days' FROM m`,
    [LATEST_TURN_ROWS],
  );
  await pool.query("ANALYZE turns");
  const threadId = (await pool.query("SELECT md5('t' || 250)::uuid AS id")).rows[0].id;
  const explain = async (client: pg.PoolClient) =>
    (await client.query(`EXPLAIN (ANALYZE) ${sql.selectLatestTurn}`, [threadId])).rows.map(
      (r) => r["QUERY PLAN"] as string,
    );
  const client = await pool.connect();
  try {
    const withIndex = await explain(client);
    await client.query("BEGIN");
    await client.query("DROP INDEX turns_thread_idx");
    const withoutIndex = await explain(client);
    await client.query("ROLLBACK");
    console.log(
      `\nEXPLAIN (ANALYZE) latest-turn lookup among ${LATEST_TURN_ROWS.toLocaleString("en")} turns, with turns_thread_idx:`,
    );
    for (const line of withIndex) console.log(`  ${line}`);
    console.log("without it (dropped in a rolled-back transaction):");
    for (const line of withoutIndex) console.log(`  ${line}`);
  } finally {
    client.release();
  }
}

await main();
