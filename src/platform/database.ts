import path from "node:path";
import pg from "pg";
import { startEmbeddedPostgres, type EmbeddedPort } from "./embedded-postgres.js";

export { freePort, startEmbeddedPostgres, type EmbeddedServer } from "./embedded-postgres.js";

export type Database = {
  pool: pg.Pool;
  url: string;
  /** Where the URL came from, for the start-up log. */
  source: "DATABASE_URL" | "embedded";
  /** The embedded server's data directory, where the data really is (as root: under /var/lib/threadline). */
  dataDir?: string;
  close: () => Promise<void>;
};

const EMBEDDED_DATABASE = "threadline";

/**
 * The app's PostgreSQL: DATABASE_URL when set, otherwise an embedded server (real PostgreSQL
 * binaries from the npm registry) with its data under `dataDir`, so a fresh machine needs nothing
 * installed.
 */
export async function openDatabase(options: {
  databaseUrl?: string | undefined;
  dataDir: string;
  embeddedPort: EmbeddedPort;
  timeouts?: SessionTimeouts;
}): Promise<Database> {
  if (options.databaseUrl) {
    const pool = createPool(options.databaseUrl, options.timeouts);
    await checkConnection(
      pool,
      `Cannot connect to DATABASE_URL: check that PostgreSQL is running and the URL is right, or unset DATABASE_URL to use the embedded database`,
    );
    return { pool, url: options.databaseUrl, source: "DATABASE_URL", close: () => pool.end() };
  }
  const server = await startEmbeddedPostgres(path.join(options.dataDir, "postgres"), options.embeddedPort);
  try {
    await server.createDatabaseIfMissing(EMBEDDED_DATABASE);
  } catch (error) {
    await server.stop();
    throw error;
  }
  const url = server.urlFor(EMBEDDED_DATABASE);
  const pool = createPool(url, options.timeouts);
  return {
    pool,
    url,
    source: "embedded",
    dataDir: server.dataDir,
    close: async () => {
      await pool.end();
      await server.stop();
    },
  };
}

/**
 * Server-side limits of every pooled session, in milliseconds (0: none). A runaway statement or a
 * transaction left open by a stalled client would otherwise hold one of the pool's few connections
 * (and its locks and snapshot) for everyone else. Migrations use their own connection, without them.
 */
export type SessionTimeouts = { statementTimeoutMs: number; idleInTransactionTimeoutMs: number };

export const DEFAULT_SESSION_TIMEOUTS: SessionTimeouts = {
  statementTimeoutMs: 30_000,
  idleInTransactionTimeoutMs: 60_000,
};

export function createPool(url: string, timeouts: SessionTimeouts = DEFAULT_SESSION_TIMEOUTS): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    connectionTimeoutMillis: 5_000,
    statement_timeout: timeouts.statementTimeoutMs,
    idle_in_transaction_session_timeout: timeouts.idleInTransactionTimeoutMs,
  });
  // An idle client whose server went away emits 'error'; the next checkout reconnects.
  pool.on("error", () => undefined);
  return pool;
}

async function checkConnection(pool: pg.Pool, hint: string): Promise<void> {
  try {
    await pool.query("SELECT 1");
  } catch (error) {
    await pool.end();
    throw new Error(`${hint} (${(error as Error).message})`, { cause: error });
  }
}
