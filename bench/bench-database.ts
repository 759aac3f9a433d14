import { randomUUID } from "node:crypto";
import path from "node:path";
import pg from "pg";
import { createPool, startEmbeddedPostgres } from "../src/platform/database.js";
import { migrate } from "../src/history/migrate.js";
import { logger } from "../src/platform/logger.js";

export type BenchDatabase = { pool: pg.Pool; name: string; fresh: boolean; close: () => Promise<void> };

/**
 * A fresh, migrated database of a benchmark's own: on the server DATABASE_URL names, else on an
 * embedded one; dropped (and the embedded server stopped) by close(). `reuse` names a database a
 * run kept (measured again, neither created nor dropped); `keep` leaves the fresh one for that.
 */
export async function openBenchDatabase(
  options: { reuse?: string | undefined; keep?: boolean } = {},
): Promise<BenchDatabase> {
  // A benchmark prints its own table: the turns' info lines would bury it.
  logger.level = process.env.LOG_LEVEL ?? "warn";
  const fromEnv = process.env.DATABASE_URL?.trim();
  const embedded = fromEnv
    ? undefined
    : await startEmbeddedPostgres(
        path.resolve(".data", "bench-postgres"),
        Number(process.env.BENCH_EMBEDDED_POSTGRES_PORT ?? 54349),
      );
  const serverUrl = fromEnv ?? embedded!.urlFor("postgres");
  const fresh = !options.reuse;
  const database = options.reuse ?? `threadline_bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  if (fresh) await admin(serverUrl, `CREATE DATABASE ${database}`);
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  if (fresh) await migrate(url.toString());
  // No session timeouts: seeding a million rows is one long statement.
  const pool = createPool(url.toString(), { statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0 });
  return {
    pool,
    name: database,
    fresh,
    close: async () => {
      await pool.end();
      if (fresh && !options.keep) await admin(serverUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
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
