/**
 * npm run bench:search — what GET /api/search costs for a user with 100,000 messages among
 * 1,000,000 (1,000 users), for a common word, a rare word, a phrase, two words and no match.
 *
 * Seeds a database created for the run (on DATABASE_URL's server, or the embedded PostgreSQL) in
 * bulk SQL and drops it at the end. Messages are interleaved across users' threads as they would
 * arrive, so one user's messages are spread over the whole table, not packed together. Their text
 * draws words with Zipf-like frequencies (a few common words, a long tail of rare ones) among
 * English stop words, and 1% of messages carry a stock phrase.
 *
 * Seeding takes a few minutes: BENCH_SEARCH_KEEP=1 keeps the database (its name is printed) and
 * BENCH_SEARCH_DATABASE=<name> measures a kept one again without seeding (nor dropping it).
 */
import os from "node:os";
import type pg from "pg";
import { decodeSearchCursor, searchMessages, type SearchPosition } from "../src/history/search.js";
import * as sql from "../src/history/search-sql.js";
import { openBenchDatabase } from "./bench-database.js";
import { printTable } from "./report.js";

const USERS = 1_000;
const MESSAGES = 1_000_000;
const MESSAGES_PER_THREAD = 100;
const THREADS = MESSAGES / MESSAGES_PER_THREAD;
/** The measured user's threads: the first tenth, so 100,000 of the messages are theirs. */
const BIG_USER_THREADS = THREADS / 10;
const BIG_USER = "bench-user-0";
/** A user like most: about 900 messages. */
const SMALL_USER = "bench-user-1";
/** Statements the seeding is cut into, run two at a time: each holds whole turns (2 × THREADS messages). */
const CHUNKS = 25;
const PAGE_SIZE = 20;
const CALLS = 50;
const WARMUP = 10;
const TARGET_P50_MS = 20;

/** The most frequent content words, most frequent first; a tail of made-up words follows them. */
const COMMON_WORDS = `database deploy migration server schema query index customer invoice report budget
  meeting release feature ticket backup cluster latency payment account design review contract
  pipeline dashboard metric alert storage network upgrade vendor roadmap sprint estimate analysis
  document template policy license refund shipment warehouse inventory forecast revenue pricing
  campaign audience content article draft editor translation summary interview candidate salary
  schedule calendar travel flight hotel booking recipe ingredient garden weather holiday birthday
  present gift movie concert ticketing playlist podcast episode chapter novel poem lyric painting
  sketch camera battery charger laptop monitor keyboard printer router firewall password
  certificate domain email newsletter survey feedback complaint support question answer solution`
  .split(/\s+/)
  .filter(Boolean);
const VOCABULARY = 20_000;
/** Zipf's rank of the first content word: the ranks above it are the stop words of real text. */
const FIRST_CONTENT_RANK = 50;
const STOP_WORDS = "the a an of to and in is it that for on with as was at by this be or are from but not have".split(
  " ",
);
const PHRASE = "the connection pool ran out during the nightly batch";

type Query = { name: string; q: string };
const QUERIES: Query[] = [
  { name: "common word", q: COMMON_WORDS[0]! },
  // Chosen from the seeded data: a word the user wrote 3 to 10 times.
  { name: "rare word", q: "" },
  { name: "phrase", q: '"connection pool"' },
  { name: "two words", q: `${COMMON_WORDS[1]} ${COMMON_WORDS[2]}` },
  { name: "no match", q: "xylophonic" },
];

async function main() {
  const kept = process.env.BENCH_SEARCH_DATABASE?.trim() || undefined;
  const { pool, name, fresh, close } = await openBenchDatabase({
    reuse: kept,
    keep: Boolean(process.env.BENCH_SEARCH_KEEP),
  });
  try {
    if (fresh) {
      const started = performance.now();
      await seed(pool);
      console.log(`seeded ${MESSAGES.toLocaleString("en")} messages of ${USERS} users in ${seconds(started)} s`);
    }
    await report(pool);
  } finally {
    await close();
    if (!fresh || process.env.BENCH_SEARCH_KEEP)
      console.log(`\nkept database ${name}: BENCH_SEARCH_DATABASE=${name} npm run bench:search measures it again`);
  }
}

type Case = { name: string; q: string; userId: string; after?: SearchPosition };
type Measured = Case & { matches: number; times: number[]; databaseTimes: number[] };

async function report(pool: pg.Pool) {
  const rare = await rareWord(pool);
  const cases: Case[] = QUERIES.map(({ name, q }) => ({ name, q: q || rare, userId: BIG_USER }));
  const common = cases[0]!;
  const first = await searchMessages(pool, {
    userId: BIG_USER,
    query: common.q,
    limit: PAGE_SIZE,
    includeOffPath: false,
  });
  cases.push({ ...common, name: "common word, page 2", after: decodeSearchCursor(first.nextCursor!)! });
  cases.push({ ...common, name: `common word, ${SMALL_USER}`, userId: SMALL_USER });

  const load = os.loadavg()[0]!;
  const rows: Measured[] = [];
  for (const c of cases) {
    const request = { userId: c.userId, query: c.q, limit: PAGE_SIZE, includeOffPath: false, after: c.after };
    const times = await measure(() => searchMessages(pool, request));
    const databaseTimes = await measure(() =>
      executionTime(pool, sql.searchMessages, [
        c.userId,
        c.q,
        false,
        c.after?.rank ?? null,
        c.after?.id ?? null,
        PAGE_SIZE + 1,
      ]),
    );
    rows.push({
      ...c,
      matches: await countMatches(pool, c.userId, c.q),
      times: times.durations,
      databaseTimes: databaseTimes.results as number[],
    });
  }
  printResults(rows, [load, os.loadavg()[0]!]);
  await explain(
    pool,
    sql.searchMessages,
    [BIG_USER, common.q, false, null, null, PAGE_SIZE + 1],
    `searchMessages, common word (${common.q})`,
  );
  await explain(
    pool,
    sql.searchMessages,
    [BIG_USER, rare, false, null, null, PAGE_SIZE + 1],
    `searchMessages, rare word (${rare})`,
  );
  // Last: reading every user's matches pushes the measured user's rows out of shared buffers.
  await compareWithoutOwner(pool, [common, cases[1]!]);
}

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

/**
 * Threads, then messages in CHUNKS statements (two at a time: the machine has two cores), then
 * the search index, built once over the loaded table as CREATE INDEX does fastest (the same
 * definition the migration created).
 */
async function seed(pool: pg.Pool) {
  const { rows } = await pool.query<{ definition: string }>(
    "SELECT pg_get_indexdef('messages_search_idx'::regclass) AS definition",
  );
  await pool.query("DROP INDEX messages_search_idx");
  // Stop words first (ids 1..S), then content words by rank: the common words, then made-up words
  // of three to five syllables, distinct by construction (their number in base 40).
  await pool.query("CREATE TABLE bench_words (id int PRIMARY KEY, word text NOT NULL)");
  await pool.query("INSERT INTO bench_words SELECT id, word FROM unnest($1::text[]) WITH ORDINALITY AS w(word, id)", [
    [...STOP_WORDS, ...COMMON_WORDS],
  ]);
  await pool.query(
    `INSERT INTO bench_words
     SELECT i, string_agg((ARRAY['ka','lo','mi','ne','ru','ta','vo','pe','si','du','ga','bo','ze','fi','ha','jo','ly','wu','xe','qua',
                                 'tor','vin','mar','sel','dan','pol','rek','tis','gum','bar','lin','cor','fen','hul','mos','nar','pid','sov','tek','wal'])[(i / (40 ^ k)::int) % 40 + 1], '' ORDER BY k)
     FROM generate_series($1::int, $2::int) AS i, generate_series(0, 2 + i % 3) AS k
     GROUP BY i`,
    [STOP_WORDS.length + COMMON_WORDS.length + 1, STOP_WORDS.length + VOCABULARY],
  );
  const started = performance.now();
  await pool.query(
    `INSERT INTO threads (id, user_id, last_seq)
     SELECT md5('thread:' || t)::uuid, CASE WHEN t < $1 THEN $2 ELSE 'bench-user-' || (1 + (t - $1) % ($3 - 1)) END, $4
     FROM generate_series(0, $5 - 1) AS t`,
    [BIG_USER_THREADS, BIG_USER, USERS, MESSAGES_PER_THREAD, THREADS],
  );
  const chunk = MESSAGES / CHUNKS;
  const queue = Array.from({ length: CHUNKS }, (_, i) => i);
  const worker = async () => {
    for (let i = queue.shift(); i !== undefined; i = queue.shift())
      await pool.query(insertMessages, [i * chunk, (i + 1) * chunk - 1, THREADS, PHRASE]);
  };
  await Promise.all([worker(), worker()]);
  console.log(`  messages inserted in ${seconds(started)} s`);
  const indexed = performance.now();
  const client = await pool.connect();
  try {
    await client.query("SET maintenance_work_mem = '512MB'");
    await client.query(rows[0]!.definition);
  } finally {
    client.release();
  }
  await pool.query("DROP TABLE bench_words");
  await pool.query("VACUUM ANALYZE threads, messages");
  console.log(`  search index built and table analyzed in ${seconds(indexed)} s`);
}

/**
 * Message g belongs to thread g % THREADS (so consecutive rows belong to different threads and
 * users) at seq g / THREADS + 1: odd seqs are the user's words, even seqs the answer to the
 * message before. 5% of answers are off the current path, as a regenerate leaves them. Each text
 * has 8 to 40 words: 45% stop words, the rest content words whose rank r is drawn with density
 * proportional to 1/r (Zipf), starting at FIRST_CONTENT_RANK.
 */
const insertMessages = `
  INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, on_path, created_at)
  SELECT md5('message:' || g)::uuid, md5('thread:' || t)::uuid, s, s - 1 + s % 2,
         CASE WHEN s % 2 = 1 THEN 'user' ELSE 'agent' END,
         CASE WHEN s % 2 = 1 THEN 'user' ELSE 'assistant' END,
         CASE WHEN s % 2 = 1 THEN jsonb_build_object('text', text)
           ELSE jsonb_build_object('output', jsonb_build_array(jsonb_build_object('type', 'text', 'role', 'assistant', 'content', text)), 'toolCalls', '[]'::jsonb) END,
         CASE WHEN s % 2 = 0 THEN md5('message:' || (g - $3))::uuid END,
         CASE WHEN s % 2 = 0 THEN 1 END,
         CASE WHEN s % 2 = 0 THEN 0 END,
         s % 2 = 1 OR abs(hashint4(g)) % 20 <> 0,
         now() - interval '1 second' * (${MESSAGES} - g)
  FROM generate_series($1::int, $2::int) AS g,
       LATERAL (SELECT g % $3 AS t, g / $3 + 1 AS s) AS position,
       LATERAL (
         SELECT string_agg(w.word, ' ' ORDER BY tokens.n) || CASE WHEN random() < 0.01 THEN ' ' || $4 ELSE '' END AS text
         FROM (SELECT n, CASE WHEN random() < 0.45 THEN 1 + floor(random() * ${STOP_WORDS.length})::int
                              ELSE ${STOP_WORDS.length - FIRST_CONTENT_RANK + 1} + floor(${FIRST_CONTENT_RANK} * exp(random() * ln(${(FIRST_CONTENT_RANK + VOCABULARY) / FIRST_CONTENT_RANK})))::int END AS id
               FROM generate_series(1, 8 + g % 33) AS n) AS tokens
         JOIN bench_words w ON w.id = tokens.id
       ) AS words`;

/** A word of the tail that the user used a handful of times. */
async function rareWord(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ word: string }>(
    `SELECT word FROM ts_stat($$SELECT search FROM messages WHERE user_id = '${BIG_USER}' AND on_path$$)
     WHERE ndoc BETWEEN 3 AND 10 AND word ~ '^[a-z]{8,}$' ORDER BY word LIMIT 1`,
  );
  return rows[0]!.word;
}

async function countMatches(pool: pg.Pool, userId: string, q: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM messages WHERE user_id = $1 AND on_path AND search @@ websearch_to_tsquery('english', $2)",
    [userId, q],
  );
  return rows[0]!.n;
}

async function measure<T>(call: () => Promise<T>): Promise<{ durations: number[]; results: T[] }> {
  for (let i = 0; i < WARMUP; i++) await call();
  const durations: number[] = [];
  const results: T[] = [];
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    results.push(await call());
    durations.push(performance.now() - started);
  }
  return { durations, results };
}

/** The time PostgreSQL spent executing a statement (EXPLAIN ANALYZE without per-node timing, so barely slowed). */
async function executionTime(pool: pg.Pool, statement: string, params: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ "QUERY PLAN": [{ "Execution Time": number }] }>(
    `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${statement}`,
    params,
  );
  return rows[0]!["QUERY PLAN"][0]["Execution Time"];
}

function percentiles(times: number[]) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  return { p50: at(0.5), p95: at(0.95) };
}

function printResults(rows: Measured[], load: number[]) {
  const header = [
    "query",
    "q",
    "user's matches",
    "p50 ms",
    "p95 ms",
    "p50 in database ms",
    `p50 / ${TARGET_P50_MS} ms target`,
  ];
  const lines = rows.map((r) => {
    const { p50, p95 } = percentiles(r.times);
    const n = r.matches.toLocaleString("en");
    return [
      r.name,
      r.q,
      n,
      p50.toFixed(2),
      p95.toFixed(2),
      percentiles(r.databaseTimes).p50.toFixed(2),
      `${(p50 / TARGET_P50_MS).toFixed(2)}x`,
    ];
  });
  console.log(
    `\nGET /api/search's query (searchMessages: first page of ${PAGE_SIZE} with snippets) for ${BIG_USER}, who has 100,000 of ` +
      `${MESSAGES.toLocaleString("en")} messages, ${CALLS} calls each; load average ${load.map((l) => l.toFixed(1)).join(" → ")} on ${os.cpus().length} cores:\n`,
  );
  printTable(header, lines, 2);
  const measured = rows.filter((r) => r.userId === BIG_USER);
  const all = percentiles(measured.flatMap((r) => r.times));
  const worst = Math.max(...measured.map((r) => percentiles(r.times).p50));
  console.log(
    `\n${BIG_USER}, every query together: p50 ${all.p50.toFixed(2)} ms, p95 ${all.p95.toFixed(2)} ms (target p50 < ${TARGET_P50_MS} ms: ` +
      `${all.p50 < TARGET_P50_MS ? "met" : "MISSED"}); slowest query's p50 ${worst.toFixed(2)} ms`,
  );
}

/** The ranked page of ids, found through the owner on messages (what the migration indexes). */
const RANKED_BY_OWNER = `
  SELECT m.id, ts_rank_cd(m.search, websearch_to_tsquery('english', $2), 1) AS rank
  FROM messages m
  WHERE m.user_id = $1 AND m.search @@ websearch_to_tsquery('english', $2) AND m.on_path
  ORDER BY rank DESC, m.id DESC LIMIT ${PAGE_SIZE + 1}`;
/** The same page without the owner on messages: every user's matches, then the caller's threads. */
const RANKED_THROUGH_THREADS = `
  SELECT m.id, ts_rank_cd(m.search, websearch_to_tsquery('english', $2), 1) AS rank
  FROM messages m JOIN threads t ON t.id = m.thread_id
  WHERE t.user_id = $1 AND m.search @@ websearch_to_tsquery('english', $2) AND m.on_path
  ORDER BY rank DESC, m.id DESC LIMIT ${PAGE_SIZE + 1}`;

/** Why the owner is copied onto messages: the same ranked page, found through the threads table instead. */
async function compareWithoutOwner(pool: pg.Pool, cases: Case[]) {
  const header = ["query", "q", "owner on messages p50 ms", "through threads p50 ms", "through threads / owner"];
  const lines: string[][] = [];
  for (const c of cases) {
    const owner = percentiles((await measure(() => pool.query(RANKED_BY_OWNER, [c.userId, c.q]))).durations).p50;
    const threads = percentiles(
      (await measure(() => pool.query(RANKED_THROUGH_THREADS, [c.userId, c.q]))).durations,
    ).p50;
    lines.push([c.name, c.q, owner.toFixed(2), threads.toFixed(2), `${(threads / owner).toFixed(1)}x`]);
  }
  console.log(
    `\nThe ranked page of ids alone, for ${BIG_USER}: found with messages.user_id (GIN on (user_id, search)) vs joined through threads.user_id:\n`,
  );
  printTable(header, lines, 2);
  await explain(pool, RANKED_THROUGH_THREADS, [BIG_USER, cases[0]!.q], `through threads, common word (${cases[0]!.q})`);
}

/** The plan a statement runs with, to confirm the index finds only the user's matches. */
async function explain(pool: pg.Pool, statement: string, params: unknown[], title: string) {
  const plan = await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${statement}`, params);
  console.log(`\nEXPLAIN (ANALYZE, BUFFERS) ${title}:`);
  for (const line of plan.rows) console.log(`  ${line["QUERY PLAN"]}`);
}

await main();
