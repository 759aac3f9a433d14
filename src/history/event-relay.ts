import type pg from "pg";
import { toThreadEvent, type ThreadEvent, type ThreadEventRow } from "./events.js";
import * as sql from "./event-relay-sql.js";

/** An event to relay: the log row, when it was written, and the thread's owner. */
export type RelayedEvent = ThreadEvent & { createdAt: Date; ownerId: string };

/** The database's current time: where a relay that starts now begins. */
export async function databaseNow(db: pg.Pool): Promise<Date> {
  return (await db.query<{ now: Date }>(sql.selectNow)).rows[0]!.now;
}

/** The thread's events after `afterId` written since `since`, in id order, at most `limit`, with the owner of each. */
export async function readEventsToRelay(db: pg.Pool, input: { threadId: string; afterId: number; since: Date; limit: number }): Promise<RelayedEvent[]> {
  const { rows } = await db.query<ThreadEventRow & { created_at: Date; user_id: string }>(sql.selectEventsToRelay, [
    input.threadId, input.afterId, input.since, input.limit,
  ]);
  return rows.map((row) => ({ ...toThreadEvent(row), createdAt: row.created_at, ownerId: row.user_id }));
}
