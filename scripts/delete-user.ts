// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { inngest, threadDeleted, userDeleted } from "../inngest.config.js";
import { verifiedUserId } from "../src/auth/identity.js";
import { eraseUser } from "../src/history/users.js";
import { allMemoryComponents } from "../src/memory/components.js";
import { runDatabaseCommand, UsageError } from "./database-command.js";

const USAGE = `Usage: node dist/scripts/delete-user.js --user <user id>   (npm run delete-user -- --user <user id>)
  erases the user's threads, memories, agent state, API keys, usage records and budget, in one transaction`;

/** Hands events to Inngest (the app's client in the command; a recorder in tests). */
export type SendEvents = (events: { id: string; name: string; data: Record<string, unknown> }[]) => Promise<unknown>;

/** Events one send carries at most (Inngest accepts batches; a user may have many threads). */
const SEND_BATCH = 500;

/**
 * npm run delete-user — erases everything kept about one user (DATABASE_URL, or the embedded
 * database), then announces it: thread/deleted for each thread (memory components forget it,
 * the thread's running and queued turns are cancelled) and user/deleted (every other run of the
 * user is cancelled). Event ids are derived from the thread and the user, so a repeated
 * announcement is one event. The erasure stands when Inngest cannot be reached (the tombstones
 * keep every deleted thread from coming back); the command then fails, saying so. Returns what to
 * print.
 */
export async function deleteUserCommand(
  args: string[],
  db: pg.Pool,
  send: SendEvents = (events) => inngest.send(events),
): Promise<string> {
  const { values } = parseArgs({ args, options: { user: { type: "string" } } });
  const userId = verifiedUserId.safeParse(values.user);
  if (!userId.success) throw new UsageError("needs --user <user id> (1 to 200 characters, no control characters)");
  const hooks = allMemoryComponents().flatMap((component) => (component.userDeleted ? [component.userDeleted] : []));
  const erased = await eraseUser(db, userId.data, hooks);
  const summary = `Erased user ${JSON.stringify(userId.data)}: ${erased.threads} threads (with their messages, turns, summaries and agent state), ${erased.memories} memories, ${erased.apiKeys} API keys, ${erased.usageRecords} usage records and the budget.`;
  const events = [
    ...erased.threadIds.map((threadId) => ({
      id: `thread-deleted-${threadId}`,
      name: threadDeleted.name,
      data: { threadId, userId: userId.data, reason: "user" },
    })),
    { id: `user-deleted-${userId.data}`, name: userDeleted.name, data: { userId: userId.data } },
  ];
  try {
    for (let from = 0; from < events.length; from += SEND_BATCH) await send(events.slice(from, from + SEND_BATCH));
  } catch (error) {
    throw new Error(
      `${summary} But the announcement to Inngest failed (${(error as Error).message}): runs of the user still in flight were not cancelled ` +
        "(none can re-create a deleted thread: each left a tombstone).",
      { cause: error },
    );
  }
  return `${summary} Announced thread/deleted for each thread and user/deleted.`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDatabaseCommand(USAGE, deleteUserCommand);
