/** What the realtime relay reads (src/history/event-relay.ts runs them). */

/** The database's clock: the relay publishes what is written from then on. */
export const selectNow = `SELECT now() AS now`;
export type SelectNowRow = { now: Date };

/**
 * Thread $1 as the relay follows it: its owner and incarnation (creation time as text, exact to
 * the microsecond), and its events after id $2 written at or after $3, in id order, $4 of them.
 * Always one row at least: a null owner (and no event) when no thread has the id.
 */
export const selectEventsToRelay = `
  SELECT t.user_id, t.created_at::text AS incarnation, e.id, e.event, e.data, e.created_at
  FROM (SELECT 1) one
  LEFT JOIN threads t ON t.id = $1
  LEFT JOIN LATERAL (
    SELECT x.id, x.event, x.data, x.created_at FROM thread_events x
    WHERE x.thread_id = t.id AND x.id > $2 AND x.created_at >= $3
    ORDER BY x.id
    LIMIT $4
  ) e ON true
  ORDER BY e.id`;
export type SelectEventsToRelayRow = {
  user_id: string | null;
  incarnation: string | null;
  id: string | null;
  event: string;
  data: Record<string, unknown>;
  created_at: Date;
};

/** The threads with events written at or after $1 (thread_events_created_idx). */
export const selectThreadsWrittenSince = `
  SELECT DISTINCT thread_id FROM thread_events WHERE created_at >= $1`;
export type SelectThreadsWrittenSinceRow = { thread_id: string };
