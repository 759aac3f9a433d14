import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { verifiedUserId } from "../src/auth/identity.js";
import { readEnvironment } from "../src/config.js";
import { openDatabase } from "../src/history/database.js";
import { migrate } from "../src/history/migrate.js";
import { eraseUser } from "../src/history/users.js";
import { allMemoryComponents } from "../src/memory/components.js";

const USAGE = "Usage: npm run delete-user -- --user <user id>   erases the user's threads, memories, agent state and API keys";

class UsageError extends Error {}

/**
 * npm run delete-user — erases everything kept about one user (DATABASE_URL, or the embedded
 * database). Returns what to print.
 */
export async function deleteUserCommand(args: string[], db: pg.Pool): Promise<string> {
  const { values } = parseArgs({ args, options: { user: { type: "string" } } });
  const userId = verifiedUserId.safeParse(values.user);
  if (!userId.success) throw new UsageError("needs --user <user id> (1 to 200 characters, no control characters)");
  const hooks = allMemoryComponents().flatMap((component) => (component.userDeleted ? [component.userDeleted] : []));
  const erased = await eraseUser(db, userId.data, hooks);
  return `Erased user ${JSON.stringify(userId.data)}: ${erased.threads} threads (with their messages, turns, summaries and agent state), ${erased.memories} memories, ${erased.apiKeys} API keys.`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const env = readEnvironment();
  const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR, embeddedPort: env.EMBEDDED_POSTGRES_PORT });
  let exitCode = 0;
  try {
    await migrate(database.url);
    console.info(await deleteUserCommand(process.argv.slice(2), database.pool));
  } catch (error) {
    console.error(error instanceof UsageError ? `${error.message}\n\n${USAGE}` : (error as Error).message);
    exitCode = 1;
  } finally {
    await database.close();
  }
  // Exit explicitly: a library loaded on the way resets process.exitCode.
  process.exit(exitCode);
}
