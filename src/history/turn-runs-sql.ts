/**
 * Which run answers a message, and one run's part of the thread's event log (src/history/turn-runs.ts
 * runs them). Every turn row is written by the run's first step, before any event of the run.
 */

/** The turns (runs) of user message $2 in thread $1, oldest first. */
export const selectMessageTurns = `
  SELECT run_id, variant, status, error FROM turns
  WHERE message_id = $2 AND thread_id = $1
  ORDER BY started_at, run_id`;

/** The oldest running turn of thread $1: the one whose answer is being generated (later ones wait for it). */
export const selectRunningTurn = `
  SELECT run_id, message_id, variant FROM turns
  WHERE thread_id = $1 AND status = 'running'
  ORDER BY started_at, run_id
  LIMIT 1`;

/** Run $2's events in thread $1 after id $3, in id order, $4 of them (the run's rows are found by its key index). */
export const selectRunEventsAfter = `
  SELECT id, event, data FROM thread_events
  WHERE run_id = $2 AND thread_id = $1 AND id > $3
  ORDER BY id
  LIMIT $4`;

/**
 * The user message that message $2 of thread $1 stands for: itself when it is a user message, the
 * one it answers when it is an answer; with $2 NULL, the last user message on the current path.
 */
export const selectAnsweredMessage = `
  SELECT coalesce(m.answers, m.id) AS message_id FROM messages m
  WHERE m.thread_id = $1 AND m.id = $2
  UNION ALL
  SELECT * FROM (
    SELECT u.id FROM messages u
    WHERE $2::uuid IS NULL AND u.thread_id = $1 AND u.on_path AND u.kind = 'user'
    ORDER BY u.seq DESC
    LIMIT 1
  ) last_user`;
