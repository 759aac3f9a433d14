import type pg from "pg";
import { HistoryRefusal, isThreadDeletedError, threadDeleted, threadNotOwned } from "./errors.js";
import * as sql from "./threads-sql.js";

/**
 * A user's threads as a chat app manages them: listed most recently active first, created with
 * a client id, renamed, deleted with everything keyed by them. Every operation is scoped by the
 * verified user; another user's thread is refused exactly like a missing one.
 * Imports: pg, errors.ts and threads-sql.ts.
 */

export type ThreadItem = {
  id: string;
  /** null: untitled (no user title yet, and the titles function has not named it). */
  title: string | null;
  titleSource: "user" | "model" | null;
  metadata: Record<string, unknown>;
  /** Messages on the current path (what GET /api/threads/:id/messages pages through). */
  messageCount: number;
  /** The newest message's time; null while the thread has none. */
  lastMessageAt: string | null;
  /** What the list is ordered by: the newest message's time, or the creation time before any. */
  lastActivityAt: string;
  createdAt: string;
  updatedAt: string;
  /** The status of the thread's latest turn that ran (running, completed, failed, ...), null before any. */
  latestTurnStatus: string | null;
};

/** Where a list page ends: the last item's activity time (millisecond ISO date) and id. */
export type ThreadCursor = { lastActivityAt: string; id: string };

export type ThreadPage = { threads: ThreadItem[]; hasMore: boolean; next: ThreadCursor | null };

const toItem = (row: sql.ThreadRow): ThreadItem => ({
  id: row.id,
  title: row.title,
  titleSource: row.title_source,
  metadata: row.metadata,
  messageCount: row.message_count,
  lastMessageAt: row.last_message_at?.toISOString() ?? null,
  lastActivityAt: row.last_activity_at.toISOString(),
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
  latestTurnStatus: row.latest_turn_status,
});

const notFound = (threadId: string) => new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);

/**
 * One page of the user's threads in list order, after `after` (the previous page's last item).
 * Activity times are stored to the millisecond, so the cursor's ISO date is exact.
 */
export async function listThreads(
  db: pg.Pool | pg.PoolClient,
  input: { userId: string; limit: number; after?: ThreadCursor | undefined },
): Promise<ThreadPage> {
  const { userId, limit, after } = input;
  // One row past the page says whether there is more.
  const { rows } = after
    ? await db.query<sql.ThreadRow>(sql.selectThreadPageAfter, [userId, after.lastActivityAt, after.id, limit + 1])
    : await db.query<sql.ThreadRow>(sql.selectFirstThreadPage, [userId, limit + 1]);
  const threads = rows.slice(0, limit).map(toItem);
  const last = threads.at(-1);
  const hasMore = rows.length > limit;
  return { threads, hasMore, next: hasMore && last ? { lastActivityAt: last.lastActivityAt, id: last.id } : null };
}

export async function readThread(db: pg.Pool, threadId: string, userId: string): Promise<ThreadItem> {
  const row = (await db.query<sql.ThreadRow>(sql.selectOwnedThread, [threadId, userId])).rows[0];
  if (!row) throw notFound(threadId);
  return toItem(row);
}

/**
 * Creates the user's thread under the client's id. An id the user already holds returns that
 * thread unchanged (`created: false`: a client that retries its create gets the same answer);
 * another user's id is refused.
 */
export async function createThread(
  db: pg.Pool,
  input: { threadId: string; userId: string; title: string | null; metadata: Record<string, unknown> },
): Promise<{ thread: ThreadItem; created: boolean }> {
  const { threadId, userId } = input;
  const inserted = (
    await db
      .query<sql.ThreadRow>(sql.insertThreadWithDetails, [threadId, userId, input.title, input.metadata])
      .catch((error: unknown) => {
        throw isThreadDeletedError(error) ? threadDeleted(threadId) : error;
      })
  ).rows[0];
  if (inserted) return { thread: toItem(inserted), created: true };
  const owner = (await db.query<sql.SelectThreadOwnerRow>(sql.selectThreadOwner, [threadId])).rows[0];
  if (owner?.user_id !== userId) throw threadNotOwned(threadId);
  return { thread: await readThread(db, threadId, userId), created: false };
}

/** Sets the user's title (null: untitled again) and/or replaces the metadata; absent fields stay. */
export async function updateThread(
  db: pg.Pool,
  input: {
    threadId: string;
    userId: string;
    title?: string | null | undefined;
    metadata?: Record<string, unknown> | undefined;
  },
): Promise<ThreadItem> {
  const { threadId, userId } = input;
  const row = (
    await db.query<sql.ThreadRow>(sql.updateThreadDetails, [
      threadId,
      userId,
      input.title !== undefined,
      input.title ?? null,
      input.metadata ?? null,
    ])
  ).rows[0];
  if (!row) throw notFound(threadId);
  return toItem(row);
}

/** Deletes the user's thread and every row keyed by it, in one statement; a second delete is refused. */
export async function deleteThread(db: pg.Pool, threadId: string, userId: string): Promise<void> {
  const deleted = await db.query(sql.deleteOwnedThread, [threadId, userId]);
  if (deleted.rowCount === 0) throw notFound(threadId);
}

/* ---- Retention ---- */

/** The moment before which a thread counts as expired: `days` ago by the database's clock. */
export async function retentionCutoff(db: pg.Pool, days: number): Promise<string> {
  const { rows } = await db.query<sql.SelectRetentionCutoffRow>(sql.selectRetentionCutoff, [days]);
  return rows[0]!.cutoff.toISOString();
}

/** Deletes up to `limit` threads inactive since before `cutoff`; returns which (for thread/deleted). */
export async function deleteExpiredThreads(
  db: pg.Pool,
  cutoff: string,
  limit: number,
): Promise<{ threadId: string; userId: string }[]> {
  const { rows } = await db.query<sql.DeleteExpiredThreadsRow>(sql.deleteExpiredThreads, [cutoff, limit]);
  return rows.map((row) => ({ threadId: row.id, userId: row.user_id }));
}

/* ---- Tombstones (migration 0016) ---- */

/**
 * How long a deleted thread's id stays refused unless THREAD_TOMBSTONE_DAYS says otherwise: longer
 * than Inngest keeps a run to replay or an event to re-deliver, so no event of a deleted thread
 * can bring it back.
 */
export const DEFAULT_TOMBSTONE_DAYS = 90;

/** Whether the thread id was deleted (and its tombstone not yet pruned). */
export async function isDeletedThread(db: pg.Pool, threadId: string): Promise<boolean> {
  return (await db.query(sql.selectTombstone, [threadId])).rowCount === 1;
}

/** Deletes up to `limit` tombstones older than `days` days (oldest first); returns how many. */
export async function pruneTombstones(db: pg.Pool, days: number, limit: number): Promise<number> {
  return (await db.query(sql.deleteOldTombstones, [days, limit])).rowCount ?? 0;
}
