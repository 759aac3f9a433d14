import type pg from "pg";
import { readEnvironment } from "../src/config.js";
import { openDatabase } from "../src/history/database.js";
import { migrate } from "../src/history/migrate.js";

/** A mistake in the command line: printed with the command's usage. */
export class UsageError extends Error {}

/**
 * Runs an operator command against the app's database (DATABASE_URL, or the embedded one),
 * migrated first, prints what it returns, and exits 0, or 1 after printing what went wrong.
 */
export async function runDatabaseCommand(usage: string, command: (args: string[], db: pg.Pool) => Promise<string>): Promise<never> {
  const env = readEnvironment();
  const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR, embeddedPort: env.EMBEDDED_POSTGRES_PORT });
  let exitCode = 0;
  try {
    await migrate(database.url);
    console.info(await command(process.argv.slice(2), database.pool));
  } catch (error) {
    console.error(error instanceof UsageError ? `${error.message}\n\n${usage}` : (error as Error).message);
    exitCode = 1;
  } finally {
    await database.close();
  }
  // Exit explicitly: a library loaded on the way resets process.exitCode.
  process.exit(exitCode);
}
