/**
 * The thread event log's queries (src/history/events.ts runs them). Writes go through
 * threadline_append_events (src/history/schema/functions), which assigns per-thread ids
 * under the thread's counter lock and notifies `threadline_events` with the thread and last id.
 */

/** Appends events ($4: [{key, event, data}]) for thread $1, run $2, attempt $3; returns the last id written. */
export const appendEvents = `
  SELECT threadline_append_events($1, $2, $3, $4) AS last_id`;
export type AppendEventsRow = { last_id: string | null };

/**
 * Appends what run $2 logs while it answers ($4: deltas, chunks) for attempt $3 unless its turn
 * was stopped, cancelled or failed (threadline_append_run_events in src/history/schema/functions);
 * returns the last id written and whether the turn has so ended.
 */
export const appendRunEvents = `
  SELECT last_id, ended FROM threadline_append_run_events($1, $2, $3, $4)`;
export type AppendRunEventsRow = { last_id: string | null; ended: boolean };

/** The thread's ($1) events after id $2, in id order, $3 of them. */
export const selectEventsAfter = `
  SELECT id, event, data FROM thread_events
  WHERE thread_id = $1 AND id > $2
  ORDER BY id
  LIMIT $3`;
/** A thread_events row as pg reads it (bigint ids arrive as text). */
export type ThreadEventRow = { id: string; event: string; data: Record<string, unknown> };

/**
 * The user's ($2) thread ($1) with its events after id $3, in id order, $4 of them, in one read:
 * each row carries the thread's incarnation (its creation time as text, exact to the microsecond,
 * unlike a JavaScript date), which tells it apart from a thread created later under the same id.
 * No row: not the user's thread, or none at all; one row without an event: nothing after $3.
 */
export const selectThreadEventsAfter = `
  SELECT t.created_at::text AS incarnation, e.id, e.event, e.data
  FROM threads t
  LEFT JOIN LATERAL (
    SELECT x.id, x.event, x.data FROM thread_events x
    WHERE x.thread_id = t.id AND x.id > $3
    ORDER BY x.id
    LIMIT $4
  ) e ON true
  WHERE t.id = $1 AND t.user_id = $2
  ORDER BY e.id`;
export type SelectThreadEventsAfterRow = { incarnation: string } & (ThreadEventRow | { id: null });

/**
 * Events of thread $1 (`events`: which of its rows `x`), in id order, `limit` of them, read only
 * while the thread `t` is its owner's (`owner`: the condition on `t`). Always one row at least:
 * present is false (and no event) when the thread is not, or no longer, that owner's.
 */
export const ownedEventsAfter = (owner: string, events: string, limit: string) => `
  SELECT t.id IS NOT NULL AS present, e.id, e.event, e.data
  FROM (SELECT 1) one
  LEFT JOIN threads t ON t.id = $1 AND ${owner}
  LEFT JOIN LATERAL (
    SELECT x.id, x.event, x.data FROM thread_events x
    WHERE ${events}
    ORDER BY x.id
    LIMIT ${limit}
  ) e ON true
  ORDER BY e.id`;
export type OwnedEventsAfterRow = { present: boolean } & (ThreadEventRow | { id: null });

/**
 * The events after id $4 of thread $1 as long as it is still user $2's thread of incarnation $3,
 * in id order, $5 of them; none once that thread is gone (deleted, or deleted and created again
 * under its id).
 */
export const selectOwnedEventsAfter = ownedEventsAfter(
  "t.user_id = $2 AND t.created_at = $3::timestamptz",
  "x.thread_id = t.id AND x.id > $4",
  "$5",
);
export type SelectOwnedEventsAfterRow = OwnedEventsAfterRow;

/**
 * How many bytes of frames a page's first piece holds at most (framesOf): a page of small rows
 * arrives as strings below V8's large-object size (128 KiB), which node-pg decodes for a tenth of
 * what one longer string costs (~0.1 ms of a 1,000-row replay, issue 19).
 */
const FIRST_PIECE_BYTES = 64 * 1024;

/**
 * A page of thread $1's log after id `after`, `rows` rows at most, as one row: the Server-Sent
 * Events a stream sends for them (each row's `frame`, written with it: migration 0028), read only
 * while the thread is its owner's (`owner`: the condition on `t`). The page ends before the row
 * that would start past `bytes` bytes of frames (the first row is always in it), so a page of
 * large rows stays bounded; where each row starts is its frame_offset less the first row's (one
 * lookup, an InitPlan), so no running sum is computed per read. One row always: the thread's
 * incarnation (NULL: not, or no longer, that owner's thread, and no rows), how many rows were
 * read, how many the page holds (fewer: the page is full) and how many of those read have their
 * frame (fewer than read: the page is read again as rows, see readThreadEventFrames), and the
 * frames in two pieces: `frames`, the rows starting in the page's first FIRST_PIECE_BYTES, and
 * `more_frames`, the rest (NULL: none). The first and last id are read from the frames: each
 * aggregate costs ~0.05 ms a 1,000-row page. string_agg takes the rows in the order of the sorted
 * subquery, as PostgreSQL's documentation allows with no join or grouping between them; an ORDER
 * BY in the aggregate would sort the page again, frames and all (half the read's time at 5,000
 * rows). Offsets grow with ids, so each piece's rows are consecutive.
 */
const framesOf = (owner: string, after: string, rows: string, bytes: string) => `
  SELECT (SELECT t.created_at::text FROM threads t WHERE t.id = $1 AND ${owner}) AS incarnation,
    count(*)::int AS read, count(*) FILTER (WHERE r.before < ${bytes})::int AS count,
    count(r.frame)::int AS framed,
    string_agg(r.frame, '') FILTER (WHERE r.before < least(${FIRST_PIECE_BYTES}, ${bytes})) AS frames,
    string_agg(r.frame, '') FILTER (WHERE r.before >= ${FIRST_PIECE_BYTES} AND r.before < ${bytes}) AS more_frames
  FROM (
    SELECT x.frame,
      x.frame_offset - (
        SELECT f.frame_offset FROM thread_events f WHERE f.thread_id = $1 AND f.id > ${after} ORDER BY f.id LIMIT 1
      ) AS before
    FROM thread_events x
    WHERE x.thread_id = $1 AND x.id > ${after} AND EXISTS (SELECT 1 FROM threads t WHERE t.id = $1 AND ${owner})
    ORDER BY x.id
    LIMIT ${rows}
  ) r`;
/** A page as framesOf reads it (bigint ids arrive as text). */
export type EventFramesRow = {
  incarnation: string | null;
  read: number;
  count: number;
  framed: number;
  frames: string | null;
  more_frames: string | null;
};

/**
 * selectThreadEventsAfter as a page of frames (framesOf): the user's ($2) thread ($1) and its
 * events after id $3, $4 rows and $5 bytes at most; incarnation NULL: not the user's thread, or none.
 */
export const selectThreadEventFramesAfter = framesOf("t.user_id = $2", "$3", "$4", "$5");
/** The prepared name of selectThreadEventFramesAfter: a reconnect's read, planned once per connection. */
export const selectThreadEventFramesAfterName = "events.thread-frames";

/**
 * selectOwnedEventsAfter as a page of frames (framesOf): the events after id $4 of thread $1 as
 * long as it is still user $2's thread of incarnation $3, $5 rows and $6 bytes at most.
 */
export const selectOwnedEventFramesAfter = framesOf(
  "t.user_id = $2 AND t.created_at = $3::timestamptz",
  "$4",
  "$5",
  "$6",
);
/** The prepared name of selectOwnedEventFramesAfter: a live stream's read. */
export const selectOwnedEventFramesAfterName = "events.owned-frames";

/**
 * Deletes up to $2 events written before $1 (oldest first); returns how many. A turn still running
 * keeps its run's events (a turn may wait on an approval for days): a stream resumed from the
 * turn's start, as useChat's is, needs them all.
 */
export const deleteEventsBefore = `
  WITH old AS (
    SELECT e.thread_id, e.id FROM thread_events e
    WHERE e.created_at < $1
      AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.run_id = e.run_id AND threadline_turn_unfinished(u.status))
    ORDER BY e.created_at LIMIT $2
  )
  DELETE FROM thread_events e USING old WHERE e.thread_id = old.thread_id AND e.id = old.id`;

/** The pruning cutoff, $1 hours before the database's now. */
export const selectEventCutoff = `
  SELECT now() - make_interval(hours => $1) AS cutoff`;
export type SelectEventCutoffRow = { cutoff: Date };
