/**
 * Turn benchmark (npm run bench:turn): what one chat turn costs in SQL statements, per history
 * step and per turn, and in time next to a bare Inngest function with the same number of no-op
 * steps under the same engine (InngestTestEngine, the scripted model answering at once). The time
 * above that floor is the turn's own work: database round trips, the model call over HTTP,
 * AgentKit. One row runs the turn with INFERENCE=stream (the model streamed in-process, its text
 * logged as text.delta batches) next to the gateway's. Also shows the plans of the history read and of the latest-turn lookup (with and
 * without its index, on 50,000 turns).
 *
 * Uses DATABASE_URL's server (or the embedded PostgreSQL) in a database created for the run.
 */
import { randomUUID } from "node:crypto";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import * as sql from "../src/history/store-sql.js";
import { startModelServer } from "../test/helpers/model-server.js";
import { seedThread } from "../test/helpers/seed.js";
import { statementsPerStep, totalStatements } from "../test/helpers/step-statements.js";
import { openBenchDatabase } from "./bench-database.js";
import { median, printTable } from "./report.js";

const TURNS = 40;
const WARMUP = 5;
/** Turns of the seeded thread: 100 messages, a question and an answer each. */
const SEEDED_TURNS = 50;
const LATEST_TURN_ROWS = 50_000;

type Scenario = {
  name: string;
  run: () => Promise<{ fn: InngestFunction.Like; event: { name: string; data: Record<string, unknown> } }>;
};
type Measured = {
  name: string;
  steps: number;
  perStep: Map<string, number>;
  statements: number;
  medianMs: number;
  sqlMs: number;
  bareMs: number;
};

async function main() {
  const { pool, close } = await openBenchDatabase();
  const model = await startModelServer();
  try {
    const counting = statementsPerStep(pool);
    const deps = {
      db: counting.pool,
      model: chooseModel(
        readEnvironment({ OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: "bench", MODEL: "bench-model" }),
      ),
    };
    const chatTurn = createChatTurn(deps);
    const regenerate = createRegenerate(deps);
    // The same turn with the model called in-process and its text logged as it streams (one batch here).
    const streamingTurn = createChatTurn({ ...deps, inference: "stream" });

    const scenarios: Scenario[] = [
      { name: "chat turn, new thread", run: async () => ({ fn: chatTurn, event: chatEvent({}) }) },
      {
        name: `chat turn, ${SEEDED_TURNS * 2}-message thread`,
        run: async () => ({
          fn: chatTurn,
          event: chatEvent({ threadId: (await seedThread(pool, { turns: SEEDED_TURNS })).threadId }),
        }),
      },
      {
        name: `chat turn, ${SEEDED_TURNS * 2}-message thread, INFERENCE=stream`,
        run: async () => ({
          fn: streamingTurn,
          event: chatEvent({ threadId: (await seedThread(pool, { turns: SEEDED_TURNS })).threadId }),
        }),
      },
      {
        name: `regenerate, ${SEEDED_TURNS * 2}-message thread`,
        run: async () => {
          const { threadId, userId } = await seedThread(pool, { turns: SEEDED_TURNS });
          const { rows } = await pool.query(
            "SELECT id FROM messages WHERE thread_id = $1 AND kind = 'user' ORDER BY seq DESC LIMIT 1",
            [threadId],
          );
          return {
            fn: regenerate,
            event: { name: "chat/message.regenerate", data: { threadId, messageId: rows[0].id, userId } },
          };
        },
      },
    ];

    const results: Measured[] = [];
    for (const scenario of scenarios) {
      const turn = async () => {
        const { fn, event } = await scenario.run();
        model.reset();
        model.script({ text: "An answer." });
        const started = performance.now();
        const { steps, error } = await counting.run(fn, event);
        if (error) throw error;
        return {
          steps,
          ms: performance.now() - started,
          sqlMs: counting.sqlTime.ms,
          perStep: new Map(counting.perStep),
        };
      };
      const first = await turn();
      const bare = bareFunction(first.steps);
      // Turn and bare function alternate, so both meet the same load on a shared machine.
      const times: number[] = [];
      const sqlTimes: number[] = [];
      const bareTimes: number[] = [];
      for (let i = 0; i < WARMUP + TURNS; i++) {
        const { ms, sqlMs } = await turn();
        const started = performance.now();
        await counting.run(bare, { name: "bench/bare", data: {} });
        if (i < WARMUP) continue;
        times.push(ms);
        sqlTimes.push(sqlMs);
        bareTimes.push(performance.now() - started);
      }
      results.push({
        name: scenario.name,
        steps: first.steps,
        perStep: first.perStep,
        statements: totalStatements(first.perStep),
        medianMs: median(times),
        sqlMs: median(sqlTimes),
        bareMs: median(bareTimes),
      });
    }
    printResults(results);
    await explainHistoryRead(pool);
    await explainLatestTurn(pool);
  } finally {
    await model.close();
    await close();
  }
}

const chatEvent = (data: { threadId?: string }) => ({
  name: "chat/message.sent",
  data: { messageId: randomUUID(), userId: "user-1", content: "What should I read next?", ...data },
});

/** A function of `steps` no-op steps: the floor a turn is compared with, under the same engine. */
const bareFunction = (steps: number) =>
  inngest.createFunction(
    { id: `bare-${steps}-steps`, triggers: [{ event: "bench/bare" }], retries: 0 },
    async ({ step }) => {
      for (let i = 0; i < steps; i++) await step.run(`noop-${i}`, async () => null);
    },
  );

function printResults(results: Measured[]) {
  const stepNames = [...new Set(results.flatMap((r) => [...r.perStep.keys()]))].sort();
  const header = [
    "turn",
    "steps",
    "SQL statements",
    ...stepNames,
    "median ms",
    "of which SQL ms",
    "bare fn ms",
    "turn/bare",
  ];
  const lines = results.map((r) => [
    r.name,
    `${r.steps}`,
    `${r.statements}`,
    ...stepNames.map((s) => `${r.perStep.get(s) ?? 0}`),
    r.medianMs.toFixed(1),
    r.sqlMs.toFixed(1),
    r.bareMs.toFixed(1),
    `${(r.medianMs / r.bareMs).toFixed(2)}x`,
  ]);
  console.log(
    `\n${TURNS} turns each (after ${WARMUP} warm-up turns), medians; statements counted per step of one turn; "of which SQL" sums the time ` +
      "spent waiting for each statement; the bare function has as many no-op steps and alternates with the turn.\n",
  );
  printTable(header, lines, 1);
  const worst = Math.max(
    ...results.map((r) => Math.max(0, ...[...r.perStep].filter(([s]) => s.startsWith("history.")).map(([, n]) => n))),
  );
  const most = Math.max(...results.map((r) => r.statements));
  console.log(
    `\nmost statements in one history step: ${worst} (target ≤ 1: ${worst <= 1 ? "met" : "MISSED"}); most per turn: ${most} (target ≤ 6: ${most <= 6 ? "met" : "MISSED"})`,
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
