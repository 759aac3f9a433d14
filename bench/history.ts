/**
 * npm run bench:history — what the chat turn's history step costs as a thread grows, against
 * loading the whole thread ordered by time (the AgentKit starter adapter's approach).
 *
 * Seeds threads of 100, 10,000 and 100,000 messages in a database created for the run (on
 * DATABASE_URL's server, or the embedded PostgreSQL) and drops it at the end.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { AGENT_HISTORY_DEFAULTS, historyWindow } from "../src/history/policy.js";
import * as sql from "../src/history/store-sql.js";
import { readHistory } from "../src/history/store.js";
import { readHistoryWithSummary, SUMMARIZE_AFTER_MESSAGES } from "../src/history/summaries.js";
import { openBenchDatabase } from "./bench-database.js";
import { median, printTable } from "./report.js";

const SIZES = [100, 10_000, 100_000];
const LAST_N = 20;
// The window the history step reads under the agent's default policy, lastN=20.
const WINDOW = historyWindow({ ...AGENT_HISTORY_DEFAULTS, policy: "lastN", length: LAST_N })!;
const CALLS = 50;
/** Calls before timing starts, so the first size measured does not pay for warming the pool and the JIT. */
const WARMUP = 20;
/** The whole-thread load of 100,000 rows takes long enough that fewer calls give a stable median. */
const fullLoadCalls = (size: number) => (size >= 100_000 ? 10 : CALLS);
const USER_ID = "bench-user";

/** The starter adapter's read: every message of the thread, ordered by time. */
const SELECT_WHOLE_THREAD = `
  SELECT id, thread_id, kind, agent_name, content, created_at
  FROM messages WHERE thread_id = $1 ORDER BY created_at`;

type Measure = { medianMs: number; rows: number; bytes: number; calls: number };

async function main() {
  const { pool, close } = await openBenchDatabase();
  try {
    // The starter's schema indexes messages by thread and time: give its read the same advantage.
    await pool.query("CREATE INDEX bench_messages_thread_created_idx ON messages (thread_id, created_at)");

    const threads = new Map<number, string>();
    for (const size of SIZES) {
      const started = performance.now();
      threads.set(size, await seedThread(pool, size));
      console.log(
        `seeded ${size.toLocaleString("en")} messages in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
    }
    await pool.query("VACUUM ANALYZE messages");

    const results = [];
    for (const size of SIZES) {
      const threadId = threads.get(size)!;
      const input = { threadId, userId: USER_ID, beforeSeq: size + 1, window: WINDOW };
      const lastN = await measure(CALLS, () => readHistory(pool, input));
      const step = await measure(CALLS, () =>
        readHistoryWithSummary(pool, { ...input, countUnsummarizedUpTo: SUMMARIZE_AFTER_MESSAGES + 1 }),
      );
      const full = await measure(
        fullLoadCalls(size),
        async () => (await pool.query(SELECT_WHOLE_THREAD, [threadId])).rows,
      );
      results.push({ size, lastN, step, full });
    }
    printResults(results);
    await explain(pool, threads.get(100_000)!);
  } finally {
    await close();
  }
}

/**
 * One thread of `size` messages in one statement: odd seqs are user messages, even seqs the
 * assistant's answer to the message before, all on the current path, a second apart in time.
 * Ids are derived from (thread, seq) so an answer can point at its question.
 */
async function seedThread(pool: pg.Pool, size: number): Promise<string> {
  const threadId = randomUUID();
  await pool.query("INSERT INTO threads (id, user_id, last_seq) VALUES ($1, $2, $3)", [threadId, USER_ID, size]);
  await pool.query(
    `INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, created_at)
     SELECT md5($1::text || ':' || g)::uuid, $1::uuid, g,
            CASE WHEN g % 2 = 1 THEN g ELSE g - 1 END,
            CASE WHEN g % 2 = 1 THEN 'user' ELSE 'agent' END,
            CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
            CASE WHEN g % 2 = 1
              THEN jsonb_build_object('text', 'Message ' || g || ': could you help me plan the next step of the migration? ' || repeat('We need to keep the service up while the tables move. ', 3))
              ELSE jsonb_build_object(
                'output', jsonb_build_array(jsonb_build_object('type', 'text', 'role', 'assistant', 'content',
                  'Answer ' || g || ': here is a plan. ' || repeat('First copy the data in batches, then switch reads, then switch writes. ', 5))),
                'toolCalls', '[]'::jsonb)
            END,
            CASE WHEN g % 2 = 0 THEN md5($1::text || ':' || (g - 1))::uuid END,
            CASE WHEN g % 2 = 0 THEN 1 END,
            CASE WHEN g % 2 = 0 THEN 0 END,
            now() - interval '1 second' * ($2 - g)
     FROM generate_series(1, $2::int) AS g`,
    [threadId, size],
  );
  return threadId;
}

async function measure(calls: number, load: () => Promise<unknown>): Promise<Measure> {
  let last: unknown;
  for (let i = 0; i < Math.min(WARMUP, calls); i++) last = await load();
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    last = await load();
    times.push(performance.now() - started);
  }
  const rows = Array.isArray(last) ? last.length : (last as { rows: unknown[] }).rows.length;
  return { medianMs: median(times), rows, bytes: JSON.stringify(last).length, calls };
}

function printResults(results: { size: number; lastN: Measure; step: Measure; full: Measure }[]) {
  const header = [
    "messages",
    "load",
    "calls",
    "median ms",
    "rows read",
    "bytes returned",
    "full/lastN time",
    "full/lastN bytes",
  ];
  const line = (size: number, load: string, m: Measure, ratios = ["", ""]) => [
    size.toLocaleString("en"),
    load,
    `${m.calls}`,
    m.medianMs.toFixed(2),
    `${m.rows}`,
    `${m.bytes}`,
    ...ratios,
  ];
  const lines = results.flatMap(({ size, lastN, step, full }) => [
    line(size, `readHistory lastN=${LAST_N}`, lastN),
    line(size, "history.get step (+summary)", step),
    line(size, "whole thread by created_at", full, [
      `${(full.medianMs / lastN.medianMs).toFixed(1)}x`,
      `${(full.bytes / lastN.bytes).toFixed(1)}x`,
    ]),
  ]);
  console.log();
  printTable(header, lines, 2);

  const small = results[0]!;
  const large = results.at(-1)!;
  const timeRatio = large.lastN.medianMs / small.lastN.medianMs;
  const stepRatio = large.step.medianMs / small.step.medianMs;
  console.log(
    `\nlastN@${large.size.toLocaleString("en")} / lastN@${small.size}: time ${timeRatio.toFixed(2)}x (target ≤ 1.5x: ${timeRatio <= 1.5 ? "met" : "MISSED"}), ` +
      `bytes ${(large.lastN.bytes / small.lastN.bytes).toFixed(2)}x`,
  );
  console.log(
    `history.get step@${large.size.toLocaleString("en")} / @${small.size}: time ${stepRatio.toFixed(2)}x, bytes ${(large.step.bytes / small.step.bytes).toFixed(2)}x`,
  );
}

/** Confirms the window (and the summary check riding on it) is read through the partial indexes, not by scanning the thread. */
async function explain(pool: pg.Pool, threadId: string) {
  const plan = await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql.selectHistoryWindow}`, [
    threadId,
    100_001,
    LAST_N - 1,
    WINDOW.preserveSystemMessages,
    SUMMARIZE_AFTER_MESSAGES + 1,
  ]);
  console.log(
    `\nEXPLAIN (ANALYZE, BUFFERS) selectHistoryWindow (the history.get statement) on the 100,000-message thread:`,
  );
  for (const line of plan.rows) console.log(`  ${line["QUERY PLAN"]}`);
}

await main();
