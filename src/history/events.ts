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
async function readThreadEventsAfter(
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
async function readOwnedEventsAfter(
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

/**
 * A page of a thread's log as its event stream sends it: `frames` holds one Server-Sent Event per
 * row (`event`, `data`, `id` lines, as hono's writeSSE writes them), in pieces to write one after
 * the other (as the database sent them: see framesOf), `count` rows from `firstId` to `lastId`,
 * in id order.
 */
export type EventFrames = { frames: string[]; count: number; firstId: number; lastId: number };

/** How much one page holds at most: rows, and bytes of frames (the first row whatever its size). */
export type PageLimit = { rows: number; bytes: number };

/** A page read: null when nothing came after the resume point; `full` when more may follow it. */
type FramesRead = { page: EventFrames | null; full: boolean };

/**
 * Rows as a page of frames, built here: rows without a frame (written before migration 0022, or
 * see threadline_event_text).
 */
const framesOfRows = (rows: readonly ThreadEvent[]): EventFrames | null =>
  rows.length === 0
    ? null
    : {
        frames: [
          rows.map((row) => `event: ${row.event}\ndata: ${JSON.stringify(row.data)}\nid: ${row.id}\n\n`).join(""),
        ],
        count: rows.length,
        firstId: rows[0]!.id,
        lastId: rows.at(-1)!.id,
      };

/**
 * Reads a page of frames with `statement` (framesOf in events-sql.ts, its parameters `values`
 * then rows and bytes); a page with a row without its frame is read again as rows by `readRows`
 * (as many as the page held). incarnation null: the thread is not the owner's.
 */
async function readFrames(
  db: pg.Pool,
  statement: { name: string; text: string; values: unknown[] },
  limit: PageLimit,
  readRows: (rows: number) => Promise<{ incarnation: string | null; events: ThreadEvent[] }>,
): Promise<{ incarnation: string | null } & FramesRead> {
  const { rows } = await db.query<sql.EventFramesRow>({
    name: statement.name,
    text: statement.text,
    values: [...statement.values, limit.rows, limit.bytes],
  });
  const row = rows[0]!;
  if (row.incarnation === null || row.count === 0) return { incarnation: row.incarnation, page: null, full: false };
  if (row.framed < row.read) {
    const { incarnation, events } = await readRows(row.count);
    return { incarnation, page: framesOfRows(events), full: events.length === row.count };
  }
  const frames = row.more_frames === null ? [row.frames!] : [row.frames!, row.more_frames];
  const page = {
    frames,
    count: row.count,
    firstId: idOfFrameEndingAt(frames[0]!, frames[0]!.indexOf("\n\n")),
    lastId: idOfFrameEndingAt(frames.at(-1)!, frames.at(-1)!.length - 2),
  };
  return { incarnation: row.incarnation, page, full: row.count < row.read || row.read === limit.rows };
}

/**
 * readThreadEventsAfter as a page of frames, which the database builds in the read: the app
 * writes the database's strings instead of parsing and printing each row.
 */
export async function readThreadEventFrames(
  db: pg.Pool,
  input: { threadId: string; userId: string; afterId: number; limit: PageLimit },
): Promise<({ thread: OwnedThread } & FramesRead) | undefined> {
  const { threadId, userId, afterId, limit } = input;
  const { incarnation, ...read } = await readFrames(
    db,
    {
      name: sql.selectThreadEventFramesAfterName,
      text: sql.selectThreadEventFramesAfter,
      values: [threadId, userId, afterId],
    },
    limit,
    async (rows) => {
      const found = await readThreadEventsAfter(db, { threadId, userId, afterId, limit: rows });
      return { incarnation: found?.thread.incarnation ?? null, events: found?.events ?? [] };
    },
  );
  return incarnation === null ? undefined : { thread: { threadId, ownerId: userId, incarnation }, ...read };
}

/** readOwnedEventsAfter as a page of frames, as readThreadEventFrames. */
export async function readOwnedEventFrames(
  db: pg.Pool,
  thread: OwnedThread,
  afterId: number,
  limit: PageLimit,
): Promise<{ present: boolean } & FramesRead> {
  const { incarnation, ...read } = await readFrames(
    db,
    {
      name: sql.selectOwnedEventFramesAfterName,
      text: sql.selectOwnedEventFramesAfter,
      values: [thread.threadId, thread.ownerId, thread.incarnation, afterId],
    },
    limit,
    async (rows) => {
      const found = await readOwnedEventsAfter(db, thread, afterId, rows);
      return { incarnation: found.present ? thread.incarnation : null, events: found.events };
    },
  );
  return { present: incarnation !== null, ...read };
}

/**
 * The id of the frame of `frames` whose blank line starts at `end`. Each frame ends with its id line
 * and a blank line; no other line break is in a frame.
 */
function idOfFrameEndingAt(frames: string, end: number): number {
  return Number(frames.slice(frames.lastIndexOf("\nid: ", end) + "\nid: ".length, end));
}

/** The frames of `page` after id `afterId` (null: none), for a reader that already has the rows up to it. */
export function framesAfter(page: EventFrames, afterId: number): EventFrames | null {
  if (afterId >= page.lastId) return null;
  if (afterId < page.firstId) return page;
  const frames = page.frames.join("");
  let start = 0;
  let count = page.count;
  for (;;) {
    const end = frames.indexOf("\n\n", start);
    const id = idOfFrameEndingAt(frames, end);
    if (id > afterId) return { frames: [frames.slice(start)], count, firstId: id, lastId: page.lastId };
    start = end + 2;
    count -= 1;
  }
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
