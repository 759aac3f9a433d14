/**
 * What the realtime relay reads from the thread event log: a thread's owner, incarnation and
 * events written since the relay started. Imports: pg, events.ts, event-relay-sql.ts.
 */
import type pg from "pg";
import type { ThreadEventRow } from "./events-sql.js";
import { toThreadEvent, type ThreadEvent } from "./events.js";
import * as sql from "./event-relay-sql.js";

/** An event to relay: the log row and when it was written. */
export type RelayedEvent = ThreadEvent & { createdAt: Date };

/** The database's current time: where a relay that starts now begins. */
export async function databaseNow(db: pg.Pool): Promise<Date> {
  return (await db.query<sql.SelectNowRow>(sql.selectNow)).rows[0]!.now;
}

/**
 * The thread's owner and incarnation (which tells it apart from a thread created later under its
 * id), or null when no thread has the id; and its events after `afterId` written since `since`,
 * in id order, at most `limit`.
 */
export async function readEventsToRelay(
  db: pg.Pool,
  input: { threadId: string; afterId: number; since: Date; limit: number },
): Promise<{ thread: { ownerId: string; incarnation: string } | null; events: RelayedEvent[] }> {
  const { rows } = await db.query<sql.SelectEventsToRelayRow>(sql.selectEventsToRelay, [
    input.threadId,
    input.afterId,
    input.since,
    input.limit,
  ]);
  const first = rows[0]!;
  const thread = first.user_id === null ? null : { ownerId: first.user_id, incarnation: first.incarnation! };
  const events = rows.flatMap((row) =>
    row.id === null ? [] : [{ ...toThreadEvent(row as ThreadEventRow), createdAt: row.created_at }],
  );
  return { thread, events };
}

/** The threads with events written at or after `since`: those a relay may have missed while it did not listen. */
export async function threadsWrittenSince(db: pg.Pool, since: Date): Promise<string[]> {
  const { rows } = await db.query<sql.SelectThreadsWrittenSinceRow>(sql.selectThreadsWrittenSince, [since]);
  return rows.map((row) => row.thread_id);
}
