import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PG_MIGRATE_LOCK_ID, runner } from "node-pg-migrate";
import pg from "pg";

/**
 * Brings the schema up to date, in two parts, both under one advisory lock:
 *
 * 1. ./migrations: ordered SQL files, each applied once (node-pg-migrate, recorded in
 *    threadline_migrations). Forward only: a migration has no Down section (none was ever run or
 *    tested; a mistake is undone by the next migration).
 * 2. ./schema/functions: one file per database function (trigger functions included), named after
 *    it, holding its current definition as `CREATE OR REPLACE FUNCTION`. After the migrations, each
 *    file whose SHA-256 differs from the one recorded in threadline_function_sources (or whose
 *    function is missing) is applied, all in one transaction. A function is changed by editing its
 *    file, never by a migration.
 *
 * Migrations keep a function body only where a statement of that same migration needs the function
 * to exist at that point: a trigger (0008, 0016), a generated column (0009), or a changed signature
 * (0013: CREATE OR REPLACE cannot rename a result column, so the old function is dropped and the
 * new one created in the migration's transaction, never missing for an instance still running). Those
 * bodies are history; the file is the source. Every other function body (superseded copies, Down
 * copies, functions only called at run time) was taken out of the migrations when the files came:
 * a database migrated before then ran them and ends identical, because the files hold exactly the
 * bodies the last migration left (test/function-sources.test.ts migrates with the old files, all or
 * part of the way, then with these, and compares the whole schema). A future signature change drops
 * the old function in a migration and changes the file in the same commit; a new trigger's
 * migration creates its function too (as above) and adds the file.
 *
 * A database that holds a migration this version does not have was migrated by a newer version:
 * its functions are that version's, written to serve older callers through a rolling deploy or a
 * rollback (docs/operations.md), so an older instance leaves them as they are. Applying its own
 * files would put back what the newer version replaced (0027: a second threadline_begin_turn
 * beside the newer one, which makes every call of it ambiguous).
 *
 * The lock is node-pg-migrate's own id, taken on this session around both parts (node-pg-migrate's
 * runner, given this connection, takes none; its own lock would be released when it returns):
 * several instances starting together, or one of an older version, wait for each other. Ending the
 * session releases it.
 */

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations", import.meta.url));
const FUNCTIONS_DIR = fileURLToPath(new URL("./schema/functions", import.meta.url));
const MIGRATIONS_TABLE = "threadline_migrations";
const FUNCTION_SOURCES_TABLE = "threadline_function_sources";

/** The migrator's bookkeeping: what ran and when, not part of the schema the app uses. */
export const MIGRATOR_TABLES = [MIGRATIONS_TABLE, FUNCTION_SOURCES_TABLE];

/** Returns what it applied: migration names, then `functions/<name>.sql` of each function applied. */
export async function migrate(
  databaseUrl: string,
  log: (message: string) => void = () => undefined,
): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [PG_MIGRATE_LOCK_ID]);
    const migrations = await runner({
      dbClient: client,
      noLock: true,
      dir: MIGRATIONS_DIR,
      direction: "up",
      migrationsTable: MIGRATIONS_TABLE,
      log,
      logger: { debug: () => undefined, info: log, warn: log, error: log },
    });
    const newer = await migrationsNewerThanThese(client);
    if (newer.length > 0)
      log(`> functions left as they are: the database holds migrations newer than this version (${newer.join(", ")})`);
    const functions = newer.length > 0 ? [] : await applyFunctionSources(client, log);
    return [...migrations.map((migration) => migration.name), ...functions.map((name) => `functions/${name}.sql`)];
  } finally {
    await client.end();
  }
}

/** Migrations the database recorded that this version's migrations directory does not hold. */
async function migrationsNewerThanThese(client: pg.Client): Promise<string[]> {
  const known = new Set(
    (await readdir(MIGRATIONS_DIR))
      .filter((file) => file.endsWith(".sql"))
      .map((file) => file.slice(0, -".sql".length)),
  );
  const { rows } = await client.query<{ name: string }>(`SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY run_on, id`);
  return rows.map((row) => row.name).filter((name) => !known.has(name));
}

type FunctionSource = { name: string; sql: string; checksum: string };

async function readFunctionSources(): Promise<FunctionSource[]> {
  const files = (await readdir(FUNCTIONS_DIR)).filter((file) => file.endsWith(".sql")).sort();
  return Promise.all(
    files.map(async (file) => {
      const sql = await readFile(path.join(FUNCTIONS_DIR, file), "utf8");
      return { name: file.slice(0, -".sql".length), sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/** Applies the function files that changed since they were last applied; returns their names. */
async function applyFunctionSources(client: pg.Client, log: (message: string) => void): Promise<string[]> {
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${FUNCTION_SOURCES_TABLE} (
       name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  const { rows } = await client.query<{ name: string; checksum: string }>(
    `SELECT s.name, s.checksum FROM ${FUNCTION_SOURCES_TABLE} s
      WHERE EXISTS (SELECT 1 FROM pg_proc p
                     WHERE p.proname = s.name AND p.pronamespace = current_schema()::regnamespace)`,
  );
  const applied = new Map(rows.map((row) => [row.name, row.checksum]));
  const changed = (await readFunctionSources()).filter((source) => applied.get(source.name) !== source.checksum);
  if (changed.length === 0) return [];
  await client.query("BEGIN");
  try {
    for (const source of changed) {
      log(`> function ${source.name}`);
      await client.query(source.sql).catch((error: Error) => {
        throw new Error(`schema/functions/${source.name}.sql: ${error.message}`, { cause: error });
      });
      // A file named after no function it defines would be applied again at every start.
      const defined = await client.query(
        "SELECT 1 FROM pg_proc p WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace",
        [source.name],
      );
      if (defined.rowCount === 0)
        throw new Error(`schema/functions/${source.name}.sql defines no function of its name`);
      await client.query(
        `INSERT INTO ${FUNCTION_SOURCES_TABLE} (name, checksum) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()`,
        [source.name, source.checksum],
      );
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  }
  return changed.map((source) => source.name);
}
