/**
 * npm run bench:search — what GET /api/search costs for a user with 100,000 messages among
 * 1,000,000 (1,000 users), for a common word, a rare word, a phrase, two words and no match.
 *
 * Seeds a database created for the run (on DATABASE_URL's server, or the embedded PostgreSQL) in
 * bulk SQL and drops it at the end. Messages are interleaved across users' threads as they would
 * arrive, so one user's messages are spread over the whole table, not packed together. Their text
 * draws words with Zipf-like frequencies (a few common words, a long tail of rare ones) among
 * English stop words, and 1% of messages carry a stock phrase.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import pg from "pg";
import { createPool, startEmbeddedPostgres, type EmbeddedServer } from "../src/history/database.js";
import { migrate } from "../src/history/migrate.js";
import { searchMessages } from "../src/history/search.js";
import * as sql from "../src/history/search-sql.js";

const USERS = 1_000;
const MESSAGES = 1_000_000;
const MESSAGES_PER_THREAD = 100;
const THREADS = MESSAGES / MESSAGES_PER_THREAD;
/** The measured user's threads: the first tenth, so 100,000 of the messages are theirs. */
const BIG_USER_THREADS = THREADS / 10;
const BIG_USER = "bench-user-0";
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
const STOP_WORDS = "the a an of to and in is it that for on with as was at by this be or are from but not have".split(" ");
const PHRASE = "the connection pool ran out during the nightly batch";

type Query = { name: string; q: string };
const QUERIES: Query[] = [
  { name: "common word", q: COMMON_WORDS[0]! },
  { name: "rare word", q: "" },
  { name: "phrase", q: '"connection pool"' },
  { name: "two words", q: `${COMMON_WORDS[1]} ${COMMON_WORDS[2]}` },
  { name: "no match", q: "xylophonic" },
];

async function main() {
  const { serverUrl, embedded } = await chooseServer();
  const database = `threadline_bench_search_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin(serverUrl, `CREATE DATABASE ${database}`);
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  const pool = createPool(url.toString());
  try {
    await migrate(url.toString());
    const started = performance.now();
    await seed(pool);
    console.log(`seeded ${MESSAGES.toLocaleString("en")} messages of ${USERS} users in ${seconds(started)} s`);

    QUERIES[1]!.q = await rareWord(pool);
    const rows: Measured[] = [];
    for (const { name, q } of QUERIES) {
      const matches = await countMatches(pool, q);
      const times = await measure(() => searchMessages(pool, { userId: BIG_USER, query: q, limit: PAGE_SIZE, includeOffPath: false }));
      rows.push({ name, q, matches, times });
    }
    // The second page of the common word: the cursor costs nothing over the first page.
    const first = await searchMessages(pool, { userId: BIG_USER, query: QUERIES[0]!.q, limit: PAGE_SIZE, includeOffPath: false });
    const [rank, id] = Buffer.from(first.nextCursor!, "base64url").toString().split("~");
    const second = await measure(() => searchMessages(pool, { userId: BIG_USER, query: QUERIES[0]!.q, limit: PAGE_SIZE, includeOffPath: false, after: { rank: rank!, id: id! } }));
    rows.push({ name: "common word, page 2", q: QUERIES[0]!.q, matches: rows[0]!.matches, times: second });
    printTable(rows);
    await explain(pool, QUERIES[0]!);
    await explain(pool, QUERIES[1]!);
  } finally {
    await pool.end();
    await admin(serverUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await embedded?.stop();
  }
}

async function chooseServer(): Promise<{ serverUrl: string; embedded?: EmbeddedServer }> {
  const fromEnv = process.env.DATABASE_URL?.trim();
  if (fromEnv) return { serverUrl: fromEnv };
  const embedded = await startEmbeddedPostgres(path.resolve(".data", "bench-postgres"), Number(process.env.BENCH_EMBEDDED_POSTGRES_PORT ?? 54349));
  return { serverUrl: embedded.urlFor("postgres"), embedded };
}

async function admin(serverUrl: string, statement: string) {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

/**
 * Threads, then messages in CHUNKS statements (two at a time: the machine has two cores), then
 * the search index, built once over the loaded table as CREATE INDEX does fastest (the same
 * definition the migration created).
 */
async function seed(pool: pg.Pool) {
  const { rows } = await pool.query<{ definition: string }>("SELECT pg_get_indexdef('messages_search_idx'::regclass) AS definition");
  await pool.query("DROP INDEX messages_search_idx");
  // Stop words first (ids 1..S), then content words by rank: the common words, then made-up words
  // of three to five syllables, distinct by construction (their number in base 40).
  await pool.query("CREATE TABLE bench_words (id int PRIMARY KEY, word text NOT NULL)");
  await pool.query("INSERT INTO bench_words SELECT id, word FROM unnest($1::text[]) WITH ORDINALITY AS w(word, id)", [[...STOP_WORDS, ...COMMON_WORDS]]);
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
    for (let i = queue.shift(); i !== undefined; i = queue.shift()) await pool.query(insertMessages, [i * chunk, (i + 1) * chunk - 1, THREADS, PHRASE]);
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

async function countMatches(pool: pg.Pool, q: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM messages WHERE user_id = $1 AND on_path AND search @@ websearch_to_tsquery('english', $2)",
    [BIG_USER, q],
  );
  return rows[0]!.n;
}

async function measure(search: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await search();
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    await search();
    times.push(performance.now() - started);
  }
  return times;
}

function percentiles(times: number[]) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  return { p50: at(0.5), p95: at(0.95) };
}

type Measured = { name: string; q: string; matches: number; times: number[] };

function printTable(rows: Measured[]) {
  const header = ["query", "q", "user's matches", "p50 ms", "p95 ms", `p50 / ${TARGET_P50_MS} ms target`];
  const lines = rows.map((r) => {
    const { p50, p95 } = percentiles(r.times);
    return [r.name, r.q, r.matches.toLocaleString("en"), p50.toFixed(2), p95.toFixed(2), `${(p50 / TARGET_P50_MS).toFixed(2)}x`];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const row = (cells: string[]) => "| " + cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ") + " |";
  console.log(`\nsearch for ${BIG_USER} (100,000 of ${MESSAGES.toLocaleString("en")} messages), first page of ${PAGE_SIZE}, ${CALLS} calls each:\n`);
  console.log(row(header));
  console.log("|" + widths.map((w, i) => (i < 2 ? "-".repeat(w + 2) : "-".repeat(w + 1) + ":")).join("|") + "|");
  for (const line of lines) console.log(row(line));
  const all = percentiles(rows.flatMap((r) => r.times));
  const worst = Math.max(...rows.map((r) => percentiles(r.times).p50));
  console.log(`\nall queries together: p50 ${all.p50.toFixed(2)} ms, p95 ${all.p95.toFixed(2)} ms; ` +
    `slowest query's p50 ${worst.toFixed(2)} ms (target p50 < ${TARGET_P50_MS} ms: ${worst < TARGET_P50_MS ? "met" : "MISSED"})`);
}

/** The plan the search runs with for the user, to confirm the index finds only their matches. */
async function explain(pool: pg.Pool, { name, q }: Query) {
  const plan = await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql.searchMessages}`, [BIG_USER, q, false, null, null, PAGE_SIZE + 1]);
  console.log(`\nEXPLAIN (ANALYZE, BUFFERS) searchMessages, ${name} (${q}):`);
  for (const line of plan.rows) console.log("  " + line["QUERY PLAN"]);
}

await main();
