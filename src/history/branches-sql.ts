import { lastRefusal } from "./busy-sql.js";

/**
 * The statements of branches.ts: the conversation tree (migration 0019). A user message's parent
 * is the user message it followed (parent_id) with the answer variant it followed
 * (parent_variant); edited messages are siblings under one parent, answer variants siblings under
 * their user message.
 */

/**
 * Switches the thread's current path to the branch through $3, in one statement under the
 * thread's lock. Source: src/history/schema/functions/threadline_switch_branch.sql.
 */
export const switchBranch = `
  SELECT refusal, running_run_id, running_message_id, changed FROM threadline_switch_branch($1, $2, $3)`;
export type SwitchBranchRow = {
  refusal: string | null;
  running_run_id: string | null;
  running_message_id: string | null;
  changed: number | null;
};

/**
 * The unfinished turn thread t is answering now (busy-sql.ts selectBusyTurn's order and predicate,
 * threadline_turn_unfinished), for a LATERAL join: while it runs, the path is its.
 */
const unfinishedTurn = `
  SELECT u.run_id, u.message_id FROM turns u JOIN messages um ON um.id = u.message_id
  WHERE u.thread_id = t.id AND threadline_turn_unfinished(u.status)
  ORDER BY um.on_path DESC, um.seq, u.started_at, u.run_id
  LIMIT 1`;

/**
 * What an edit is checked against before its event is sent: the thread's owner ($1), the edited
 * message ($2), what the new message id ($3) already names, and the thread's running turn.
 */
export const selectEditable = `
  SELECT t.user_id AS owner,
         e.kind AS edited_kind, e.on_path AS edited_on_path, e.parent_id AS edited_parent_id,
         m.thread_id AS message_thread_id, m.kind AS message_kind, m.content ->> 'text' AS message_text,
         m.parent_id AS message_parent_id,
         busy.run_id AS running_run_id, busy.message_id AS running_message_id,
         ${lastRefusal("t.id", "$3")} AS refused_run_id
  FROM threads t
  LEFT JOIN messages e ON e.id = $2 AND e.thread_id = t.id
  LEFT JOIN messages m ON m.id = $3
  LEFT JOIN LATERAL (${unfinishedTurn}) busy ON true
  WHERE t.id = $1`;
export type SelectEditableRow = {
  owner: string;
  edited_kind: string | null;
  edited_on_path: boolean | null;
  edited_parent_id: string | null;
  message_thread_id: string | null;
  message_kind: string | null;
  message_text: string | null;
  message_parent_id: string | null;
  running_run_id: string | null;
  running_message_id: string | null;
  /** The run that last refused the edit (busy reject, after the route's check), if any. */
  refused_run_id: string | null;
};

/**
 * The thread's owner, its row locked (a branch deletion's first statement). The running turn is
 * read by the next statement: one that waits for the lock re-reads only the locked row, so a turn
 * begun by the transaction it waited for would be missed here.
 */
export const lockThreadForBranchChange = `
  SELECT t.user_id AS owner FROM threads t WHERE t.id = $1 FOR UPDATE`;
export type LockThreadForBranchChangeRow = { owner: string };

/**
 * Deletes the branch at $2 when it is off the current path: a user message (its answers and the
 * turns that follow it go with it: the answers and parent foreign keys cascade), or an answer
 * variant with the turns that follow it. Returns the rows deleted directly (none: not a message
 * of the thread off its path).
 */
export const deleteBranch = `
  DELETE FROM messages m
  USING messages t
  WHERE t.id = $2 AND t.thread_id = $1 AND NOT t.on_path AND t.kind IN ('user', 'agent') AND m.thread_id = $1
    AND ((t.kind = 'user' AND m.id = t.id)
      OR (t.kind = 'agent' AND ((m.answers = t.answers AND m.variant = t.variant)
                                OR (m.kind = 'user' AND m.parent_id = t.answers AND m.parent_variant = t.variant))))
  RETURNING m.id`;

/**
 * Before a branch deletion (deleteBranch's target, $2 of thread $1), in its transaction: a
 * tombstone for each user message it deletes, the first of the branch and every one below it
 * (migration 0040), so no event of theirs stores them again.
 */
export const recordBranchTombstones = `
  WITH RECURSIVE gone AS (
    SELECT m.id FROM messages t
    JOIN messages m ON m.thread_id = t.thread_id AND m.kind = 'user'
      AND ((t.kind = 'user' AND m.id = t.id)
        OR (t.kind = 'agent' AND m.parent_id = t.answers AND m.parent_variant = t.variant))
    WHERE t.id = $2 AND t.thread_id = $1 AND NOT t.on_path
    UNION
    SELECT c.id FROM gone g JOIN messages c ON c.parent_id = g.id AND c.kind = 'user'
  )
  INSERT INTO message_tombstones (thread_id, message_id) SELECT $1, id FROM gone ON CONFLICT DO NOTHING`;

/**
 * After its tombstones, before its messages go (their turns cascade): the event log of the
 * branch's runs, the turns of its tombstoned user messages and, for an answer variant ($2 of
 * thread $1), the variant's own turn. What they streamed (the answer's deltas, a tool call's
 * arguments and the reason given for its decision) goes with the branch.
 */
export const deleteBranchEvents = `
  DELETE FROM thread_events e USING turns u
  WHERE e.thread_id = $1 AND e.run_id = u.run_id AND u.thread_id = $1
    AND (EXISTS (SELECT 1 FROM message_tombstones d WHERE d.thread_id = $1 AND d.message_id = u.message_id)
      OR EXISTS (SELECT 1 FROM messages t
                 WHERE t.id = $2 AND t.thread_id = $1 AND t.kind = 'agent' AND NOT t.on_path
                   AND u.message_id = t.answers AND u.variant = t.variant))`;

/**
 * After a branch deletion, in its transaction: the approvals of thread $1's tool calls whose user
 * message went with the branch (its turns cascade; approvals are keyed by the thread alone).
 */
export const deleteBranchApprovals = `
  DELETE FROM tool_approvals a
  WHERE a.thread_id = $1 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id)`;

/**
 * The thread's running turn, and what message $2 names: whether it is a message of the thread
 * (on_path NULL: not) and on its current path. Read after the thread's lock.
 */
export const selectMessagePlace = `
  SELECT busy.run_id AS running_run_id, busy.message_id AS running_message_id, m.on_path
  FROM threads t
  LEFT JOIN messages m ON m.id = $2 AND m.thread_id = t.id AND m.kind IN ('user', 'agent')
  LEFT JOIN LATERAL (${unfinishedTurn}) busy ON true
  WHERE t.id = $1`;
export type SelectMessagePlaceRow = {
  running_run_id: string | null;
  running_message_id: string | null;
  on_path: boolean | null;
};

/**
 * The user message of thread $1 in the place of message $2 on the current path: $2 itself when it
 * is on the path, else its sibling there (the edit that replaced it); no row: none.
 */
export const selectCurrentSibling = `
  SELECT s.id FROM messages e
  JOIN messages s ON s.thread_id = e.thread_id AND s.kind = 'user' AND s.on_path
    AND s.parent_id IS NOT DISTINCT FROM e.parent_id AND s.parent_variant IS NOT DISTINCT FROM e.parent_variant
  WHERE e.id = $2 AND e.thread_id = $1 AND e.kind = 'user'`;
export type SelectCurrentSiblingRow = { id: string };
