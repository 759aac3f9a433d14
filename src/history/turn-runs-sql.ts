import { type OwnedEventsAfterRow, ownedEventsAfter } from "./events-sql.js";

/**
 * Which run answers a message, and one run's part of the thread's event log (src/history/turn-runs.ts
 * runs them). Every turn row is written by the run's first step, before any event of the run.
 */

/**
 * The log rows, `x`, of the runs that began no turn for message `message` of thread `thread`:
 * refused (message.refused, busy.ts), failed before beginning one (message.failed, turns.ts
 * failTurn) or cancelled before it (message.cancelled, turns.ts cancelTurn). The predicate is
 * thread_events_unanswered_idx's (migration 0037): read through it.
 */
export const unbegunRunEvents = (thread: string, message: string) => `thread_events x
  WHERE x.thread_id = ${thread}
    AND (x.event = 'message.refused' OR x.event = 'message.failed' OR x.event = 'message.cancelled')
    AND x.data ->> 'messageId' = ${message}::uuid::text`;

/**
 * The turns (runs) of user message $2 in thread $1, oldest first, then the runs that began no turn
 * for it, in log order (thread_events_unanswered_idx; no variant, begun false): refused
 * (message.refused: status refused), failed or cancelled before beginning one (message.failed:
 * status failed; message.cancelled: status cancelled), the reason as error.
 */
export const selectMessageTurns = `
  SELECT run_id, variant, status, error, begun FROM (
    SELECT t.run_id, t.variant, t.status, t.error, true AS begun, t.started_at, 0::bigint AS id FROM turns t
    WHERE t.message_id = $2::uuid AND t.thread_id = $1
    UNION ALL
    SELECT x.run_id, 0, CASE x.event WHEN 'message.refused' THEN 'refused' WHEN 'message.failed' THEN 'failed'
           ELSE 'cancelled' END, x.data ->> 'error',
           false, NULL, x.id FROM ${unbegunRunEvents("$1", "$2")}
  ) runs
  ORDER BY begun DESC, started_at, run_id, id`;
export type SelectMessageTurnsRow = {
  run_id: string;
  variant: number;
  status: string;
  error: string | null;
  begun: boolean;
};

/**
 * The thread's ($1) owner and its running turn: the one answering message $2 when given, else the
 * one the thread is answering now, in the order later turns wait in (current path first, then
 * message order, start time, run id: see turns-sql.ts selectEarlierUnfinishedTurn). No row: the thread does
 * not exist; null run_id: nothing runs. Reads turns_running_idx.
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
export type SelectRunningTurnRow = {
  user_id: string;
  run_id: string | null;
  message_id: string | null;
  variant: number | null;
};

/**
 * Run $2's events in thread $1 after id $3, in id order, $4 of them, while the thread is user
 * $5's (the run's rows are found by its key index); none when the thread is not, or no longer,
 * that user's.
 */
export const selectRunEventsAfter = ownedEventsAfter(
  "t.user_id = $5",
  "x.run_id = $2 AND x.thread_id = t.id AND x.id > $3",
  "$4",
);
export type SelectRunEventsAfterRow = OwnedEventsAfterRow;

/**
 * Whether message $2 is stored, in any thread (message ids are unique across threads), and, when it
 * is a user message of thread $1, the words of the message on the current path in its place: its
 * own, or an edit's that replaced it.
 */
export const selectSentWords = `
  SELECT EXISTS (SELECT 1 FROM messages WHERE id = $2) AS stored,
    (SELECT s.content ->> 'text' FROM messages e
     JOIN messages s ON s.thread_id = e.thread_id AND s.kind = 'user' AND s.on_path
       AND s.parent_id IS NOT DISTINCT FROM e.parent_id AND s.parent_variant IS NOT DISTINCT FROM e.parent_variant
     WHERE e.id = $2 AND e.thread_id = $1 AND e.kind = 'user') AS current_text`;
export type SelectSentWordsRow = { stored: boolean; current_text: string | null };

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
export type SelectAnsweredMessageRow = { message_id: string };
