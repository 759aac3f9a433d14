/** What the realtime relay reads (src/history/event-relay.ts runs them). */

/** The database's clock: the relay publishes what is written from then on. */
export const selectNow = `SELECT now() AS now`;

/**
 * Thread $1's events after id $2 written at or after $3, in id order, $4 of them, each with the
 * thread's owner (whose channel it is published to).
 */
export const selectEventsToRelay = `
  SELECT e.id, e.event, e.data, e.created_at, t.user_id
  FROM thread_events e JOIN threads t ON t.id = e.thread_id
  WHERE e.thread_id = $1 AND e.id > $2 AND e.created_at >= $3
  ORDER BY e.id
  LIMIT $4`;
