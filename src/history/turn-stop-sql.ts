/**
 * The queries of stopping a turn (src/history/turn-stop.ts runs them). The write is
 * threadline_stop_turn (migrations/0012_stopped_turns.sql): one statement under the thread's lock.
 */

/**
 * The thread's ($1) owner and the running turn a stop applies to: the one answering message $2
 * when given, else the one the thread is answering now, in the order later turns wait in (current
 * path first, then message order, start time, run id: see selectEarlierUnfinishedTurn). No row:
 * the thread does not exist; null run_id: nothing runs. Reads turns_running_idx.
 */
export const selectRunningTurn = `
  SELECT t.user_id, r.run_id, r.message_id, r.variant
  FROM threads t
  LEFT JOIN LATERAL (
    SELECT u.run_id, u.message_id, u.variant
    FROM turns u JOIN messages m ON m.id = u.message_id
    WHERE u.thread_id = t.id AND u.status = 'running' AND ($2::uuid IS NULL OR u.message_id = $2::uuid)
    ORDER BY m.on_path DESC, m.seq, u.started_at, u.run_id
    LIMIT 1
  ) r ON true
  WHERE t.id = $1`;

/**
 * Stops run $3's turn on thread $1 of user $2 if it still runs, storing what it streamed as one
 * result (id $4, agent $5). Returns one row: a refusal code, or the message, variant and rows stored.
 */
export const stopTurn = `
  SELECT refusal, message_id, variant, stored
  FROM threadline_stop_turn($1, $2, $3, $4, $5)`;
