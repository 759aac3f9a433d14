import { randomUUID } from "node:crypto";
import path from "node:path";
import pg from "pg";
import { createPool, startEmbeddedPostgres } from "../src/history/database.js";
import { migrate } from "../src/history/migrate.js";
import { logger } from "../src/logger.js";

export type BenchDatabase = { pool: pg.Pool; close: () => Promise<void> };

/**
 * A fresh, migrated database of a benchmark's own: on the server DATABASE_URL names, else on an
 * embedded one; dropped (and the embedded server stopped) by close().
 */
export async function openBenchDatabase(): Promise<BenchDatabase> {
  // A benchmark prints its own table: the turns' info lines would bury it.
  logger.level = process.env.LOG_LEVEL ?? "warn";
  const fromEnv = process.env.DATABASE_URL?.trim();
  const embedded = fromEnv
    ? undefined
    : await startEmbeddedPostgres(path.resolve(".data", "bench-postgres"), Number(process.env.BENCH_EMBEDDED_POSTGRES_PORT ?? 54349));
  const serverUrl = fromEnv ?? embedded!.urlFor("postgres");
  const database = `threadline_bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin(serverUrl, `CREATE DATABASE ${database}`);
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  await migrate(url.toString());
  const pool = createPool(url.toString());
  return {
    pool,
    close: async () => {
      await pool.end();
      await admin(serverUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await embedded?.stop();
    },
  };
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
