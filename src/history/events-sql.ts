/**
 * The thread event log's queries (src/history/events.ts runs them). Writes go through
 * threadline_append_events (migrations/0011_thread_events.sql), which assigns per-thread ids
 * under the thread's counter lock and notifies `threadline_events` with the thread and last id.
 */

/** Appends events ($4: [{key, event, data}]) for thread $1, run $2, attempt $3; returns the last id written. */
export const appendEvents = `
  SELECT threadline_append_events($1, $2, $3, $4) AS last_id`;

/**
 * Appends what run $2 logs while it answers ($4: deltas, chunks) for attempt $3 unless its turn
 * was stopped, cancelled or failed (threadline_append_run_events, migrations/0013_ended_run_events.sql);
 * returns the last id written and whether the turn has so ended.
 */
export const appendRunEvents = `
  SELECT last_id, ended FROM threadline_append_run_events($1, $2, $3, $4)`;

/** The thread's ($1) events after id $2, in id order, $3 of them. */
export const selectEventsAfter = `
  SELECT id, event, data FROM thread_events
  WHERE thread_id = $1 AND id > $2
  ORDER BY id
  LIMIT $3`;

/** Whether the user ($2) owns the thread ($1). */
export const selectOwnedThread = `
  SELECT 1 FROM threads WHERE id = $1 AND user_id = $2`;

/** Deletes up to $2 events written before $1 (oldest first); returns how many. */
export const deleteEventsBefore = `
  WITH old AS (
    SELECT thread_id, id FROM thread_events WHERE created_at < $1 ORDER BY created_at LIMIT $2
  )
  DELETE FROM thread_events e USING old WHERE e.thread_id = old.thread_id AND e.id = old.id`;

/** The pruning cutoff, $1 hours before the database's now. */
export const selectEventCutoff = `
  SELECT now() - make_interval(hours => $1) AS cutoff`;
