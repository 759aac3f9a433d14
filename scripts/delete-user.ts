// First: the settings of .env, before any module reads the environment.
import "../src/env-file.js";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { verifiedUserId } from "../src/auth/identity.js";
import { eraseUser } from "../src/history/users.js";
import { allMemoryComponents } from "../src/memory/components.js";
import { runDatabaseCommand, UsageError } from "./database-command.js";

const USAGE = `Usage: node dist/scripts/delete-user.js --user <user id>   (npm run delete-user -- --user <user id>)
  erases the user's threads, memories, agent state and API keys, in one transaction`;

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

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDatabaseCommand(USAGE, deleteUserCommand);
