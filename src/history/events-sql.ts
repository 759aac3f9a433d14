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

/** Deletes up to $2 events written before $1 (oldest first); returns how many. */
export const deleteEventsBefore = `
  WITH old AS (
    SELECT thread_id, id FROM thread_events WHERE created_at < $1 ORDER BY created_at LIMIT $2
  )
  DELETE FROM thread_events e USING old WHERE e.thread_id = old.thread_id AND e.id = old.id`;

/** The pruning cutoff, $1 hours before the database's now. */
export const selectEventCutoff = `
  SELECT now() - make_interval(hours => $1) AS cutoff`;
export type SelectEventCutoffRow = { cutoff: Date };
