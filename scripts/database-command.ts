import type pg from "pg";
import { readEnvironment } from "../src/config.js";
import { openDatabase } from "../src/platform/database.js";
import { migrate } from "../src/history/migrate.js";

/** A mistake in the command line: printed with the command's usage. */
export class UsageError extends Error {}

/** `--help` or `-h`: the usage, exit 0, before any database is opened. */
export function exitOnHelp(usage: string, args: string[]): void {
  if (!args.includes("--help") && !args.includes("-h")) return;
  console.info(usage);
  process.exit(0);
}

/**
 * Runs an operator command against the app's database (DATABASE_URL, or the embedded one),
 * migrated first, prints what it returns, and exits 0, or 1 after printing what went wrong.
 */
export async function runDatabaseCommand(
  usage: string,
  command: (args: string[], db: pg.Pool) => Promise<string>,
): Promise<never> {
  const args = process.argv.slice(2);
  exitOnHelp(usage, args);
  const env = readEnvironment();
  const database = await openDatabase({
    databaseUrl: env.DATABASE_URL,
    dataDir: env.DATA_DIR,
    embeddedPort: env.EMBEDDED_POSTGRES_PORT,
  });
  let exitCode = 0;
  try {
    await migrate(database.url);
    console.info(await command(args, database.pool));
  } catch (error) {
    console.error(error instanceof UsageError ? `${error.message}\n\n${usage}` : (error as Error).message);
    exitCode = 1;
  } finally {
    await database.close();
  }
  // Exit explicitly: a library loaded on the way resets process.exitCode.
  process.exit(exitCode);
}
