/**
 * The thread event log (thread_events): appended by turns and titles, read by the SSE and UI
 * streams, pruned by retention. Imports: pg and events-sql.ts.
 */
import type pg from "pg";
import * as sql from "./events-sql.js";
import { loggedEvent, type ThreadLogEvent } from "./thread-log.js";

/** The channel threadline_append_events notifies: its payload is `<threadId> <lastId>`, ids only. */
export const EVENTS_CHANNEL = "threadline_events";

/** How long events are kept unless EVENT_LOG_RETENTION_HOURS says otherwise. */
export const DEFAULT_EVENT_RETENTION_HOURS = 24;

/** One row of a thread's event log, as a client receives it (src/history/thread-log.ts: its kinds). */
export type ThreadEvent = { id: number } & ThreadLogEvent;

/** A log row as readers get it: the id as a number. */
export const toThreadEvent = (row: sql.ThreadEventRow): ThreadEvent => ({ id: Number(row.id), ...loggedEvent(row) });

/** An event to append: `key` is unique per run and attempt (a second write of it inserts nothing). */
export type NewEvent = { key: string } & ThreadLogEvent;

/**
 * Appends events to a thread's log, in order, once per (run, attempt, key), in one statement.
 * Returns the last id written, or null when nothing was (all written before, or no such thread).
 */
export async function appendEvents(
  db: pg.Pool,
  input: { threadId: string; runId: string | null; attempt: number; events: NewEvent[] },
): Promise<number | null> {
  const { rows } = await db.query<sql.AppendEventsRow>(sql.appendEvents, [
    input.threadId,
    input.runId,
    input.attempt,
    JSON.stringify(input.events),
  ]);
  return rows[0]!.last_id === null ? null : Number(rows[0]!.last_id);
}

/**
 * Appends what a turn's run logs while it answers (streamed `text.delta` batches, AgentKit's
 * chunks), like appendEvents, unless the run's turn has ended by a recorder's hand (stopped by the
 * user, cancelled, failed). `ended: true`: nothing was written (nothing follows that ending), and a
 * streaming writer should stop calling the model.
 */
export async function appendRunEvents(
  db: pg.Pool,
  input: { threadId: string; runId: string; attempt: number; events: NewEvent[] },
): Promise<{ lastId: number | null; ended: boolean }> {
  const { rows } = await db.query<sql.AppendRunEventsRow>(sql.appendRunEvents, [
    input.threadId,
    input.runId,
    input.attempt,
    JSON.stringify(input.events),
  ]);
  return { lastId: rows[0]!.last_id === null ? null : Number(rows[0]!.last_id), ended: rows[0]!.ended };
}

/** The thread's events after `afterId`, in id order, at most `limit`. */
export async function readEventsAfter(
  db: pg.Pool,
  threadId: string,
  afterId: number,
  limit: number,
): Promise<ThreadEvent[]> {
  const { rows } = await db.query<sql.ThreadEventRow>(sql.selectEventsAfter, [threadId, afterId, limit]);
  return rows.map(toThreadEvent);
}

/**
 * One thread as a live stream follows it: its id, its owner, and its incarnation (which tells it
 * apart from a thread created under the same id after it was deleted).
 */
export type OwnedThread = { threadId: string; ownerId: string; incarnation: string };

/**
 * The user's thread as a stream follows it, with its events after `afterId` (in id order, at most
 * `limit`), in one read; undefined for another user's thread and for none at all.
 */
export async function readThreadEventsAfter(
  db: pg.Pool,
  input: { threadId: string; userId: string; afterId: number; limit: number },
): Promise<{ thread: OwnedThread; events: ThreadEvent[] } | undefined> {
  const { rows } = await db.query<sql.SelectThreadEventsAfterRow>(sql.selectThreadEventsAfter, [
    input.threadId,
    input.userId,
    input.afterId,
    input.limit,
  ]);
  if (rows.length === 0) return undefined;
  const thread = { threadId: input.threadId, ownerId: input.userId, incarnation: rows[0]!.incarnation };
  return { thread, events: rows.flatMap((row) => (row.id === null ? [] : [toThreadEvent(row)])) };
}

/**
 * The thread's events after `afterId`, in id order, at most `limit`, read only while it is still
 * the same owner's same thread: `present` false once it was deleted (whatever now has its id).
 */
export async function readOwnedEventsAfter(
  db: pg.Pool,
  thread: OwnedThread,
  afterId: number,
  limit: number,
): Promise<{ present: boolean; events: ThreadEvent[] }> {
  const { rows } = await db.query<sql.SelectOwnedEventsAfterRow>(sql.selectOwnedEventsAfter, [
    thread.threadId,
    thread.ownerId,
    thread.incarnation,
    afterId,
    limit,
  ]);
  const events = rows.flatMap((row) => (row.id === null ? [] : [toThreadEvent(row)]));
  return { present: rows[0]!.present, events };
}

/** The time before which events are pruned, fixed once per pruning run. */
export async function eventCutoff(db: pg.Pool, hours: number): Promise<string> {
  const { rows } = await db.query<sql.SelectEventCutoffRow>(sql.selectEventCutoff, [hours]);
  return rows[0]!.cutoff.toISOString();
}

/** Deletes up to `limit` events written before `cutoff`, oldest first; returns how many. */
export async function deleteEventsBefore(db: pg.Pool, cutoff: string, limit: number): Promise<number> {
  return (await db.query(sql.deleteEventsBefore, [cutoff, limit])).rowCount ?? 0;
}
