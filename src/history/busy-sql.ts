import { unbegunRunEvents } from "./turn-runs-sql.js";

/**
 * The statements of busy.ts (a message sent while a turn of its thread is unfinished), each with
 * the row type it returns. "Unfinished" is one predicate, threadline_turn_unfinished (src/history/
 * schema/functions), shared with threadline_begin_turn's refusal; the order is the one later turns
 * wait in (turns-sql.ts selectEarlierUnfinishedTurn).
 */

/**
 * Before POST /api/chat sends a message with policy reject: the thread's ($1) unfinished turn that
 * the thread is answering now, unless message $2 is already stored (a re-send of an accepted message).
 */
export const selectBusyTurn = `
  SELECT t.run_id, t.message_id
  FROM turns t JOIN messages m ON m.id = t.message_id
  WHERE t.thread_id = $1 AND threadline_turn_unfinished(t.status)
    AND NOT EXISTS (SELECT 1 FROM messages s WHERE s.id = $2)
  ORDER BY m.on_path DESC, m.seq, t.started_at, t.run_id
  LIMIT 1`;
export type SelectBusyTurnRow = { run_id: string; message_id: string };

/**
 * The run that last refused message `message` of thread `thread` (message.refused, logged by
 * busy.ts logRefusal), failed before beginning its turn (message.failed, logged by its
 * onFailure: turns.ts failTurn) or was cancelled before it (message.cancelled: turns.ts
 * cancelTurn), or NULL (thread_events_unanswered_idx): a sending route's read
 * names it, so the message sent again is a new event (send-message.ts chatMessageEventId).
 */
export const lastRefusal = (thread: string, message: string) => `(
  SELECT x.run_id FROM ${unbegunRunEvents(thread, message)}
  ORDER BY x.id DESC LIMIT 1)`;

/**
 * history.find-turns-to-interrupt: the unfinished turns ahead of run $1's on its thread's current
 * path (on earlier messages: never another run of its own message), in the order they would run.
 */
export const selectTurnsAhead = `
  SELECT t.run_id, t.message_id, t.variant
  FROM turns me
  JOIN messages mm ON mm.id = me.message_id
  JOIN turns t ON t.thread_id = me.thread_id AND threadline_turn_unfinished(t.status) AND t.run_id <> me.run_id
  JOIN messages m ON m.id = t.message_id AND m.on_path AND m.seq < mm.seq
  WHERE me.run_id = $1
  ORDER BY m.seq, t.started_at, t.run_id`;
export type SelectTurnsAheadRow = { run_id: string; message_id: string; variant: number };

/**
 * history.interrupt-turns: stops (and with $7 rolls back) the turns $5 on thread $1 of user $2 for
 * run $3's message $4, their partial answers attributed to agent $6: threadline_interrupt_turns
 * (src/history/schema/functions), one statement under the thread's lock. One row per turn.
 */
export const interruptTurns = `
  SELECT run_id, message_id, variant, stopped, answer_stored, rolled_back
  FROM threadline_interrupt_turns($1, $2, $3, $4, $5, $6, $7)`;
export type InterruptTurnsRow = {
  run_id: string;
  message_id: string;
  variant: number;
  stopped: boolean;
  answer_stored: boolean;
  rolled_back: boolean;
};

/**
 * busy.ts logRefusal, in one transaction: thread $1's row locked FOR UPDATE (lockRefusingThread),
 * then run $2's refusal ($3: its events, message.refused and stream.ended) appended unless the run
 * already ended its stream (insertRefusal). threadline_begin_turn raised the refusal and kept no
 * lock: a cancellation of the run handled in between logs message.cancelled and stream.ended
 * (turns-sql.ts logUnbegun, under the thread's share lock, which this lock waits for or makes
 * wait), and the run's log then tells that ending alone, not a refusal after it.
 */
export const lockRefusingThread = "SELECT 1 FROM threads WHERE id = $1 FOR UPDATE";
export const insertRefusal = `
  SELECT threadline_append_events($1, $2, 0, $3::jsonb) AS last_id
  WHERE NOT EXISTS (SELECT 1 FROM thread_events x WHERE x.run_id = $2 AND x.attempt = 0 AND x.key = 'stream.ended')`;
