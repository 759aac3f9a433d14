/** The statement of lost-turns.ts: the turns the reconciler asks the engine about. */

/**
 * Turns whose run may have been lost by the engine: running for longer than `checkAfterSeconds`,
 * oldest first. `overdue`: the turn is the one its thread is answering now (no unfinished turn
 * ahead of it, in the order later turns wait in) and has been for longer than `deadlineMinutes` —
 * counted from the later of its start and the last finish of another turn of its thread, so a
 * turn that queued behind a slow one gets the whole deadline once its own turn comes. A turn
 * waiting for the user's approval of a tool call is not overdue before its expiry, and gets the
 * whole deadline again once the approval is decided.
 */
export const selectLongRunningTurns = `
  WITH candidates AS (
    SELECT t.run_id, t.thread_id, t.message_id, t.started_at, m.seq
    FROM turns t JOIN messages m ON m.id = t.message_id
    WHERE t.status = 'running' AND t.started_at < $1::timestamptz - make_interval(secs => $2)
    ORDER BY t.started_at, t.run_id
    LIMIT $4
  )
  SELECT c.run_id, c.thread_id, c.message_id,
    NOT EXISTS (
      SELECT 1 FROM turns e JOIN messages em ON em.id = e.message_id AND em.on_path
      WHERE e.thread_id = c.thread_id AND e.status = 'running' AND e.run_id <> c.run_id
        AND (em.seq < c.seq OR (em.seq = c.seq AND (e.started_at, e.run_id) < (c.started_at, c.run_id)))
    ) AND NOT EXISTS (
      SELECT 1 FROM tool_approvals a WHERE a.message_id = c.message_id AND a.status = 'pending' AND a.expires_at > $1::timestamptz
    ) AND greatest(c.started_at, (SELECT max(f.finished_at) FROM turns f WHERE f.thread_id = c.thread_id AND f.run_id <> c.run_id),
                   (SELECT max(a.decided_at) FROM tool_approvals a WHERE a.message_id = c.message_id))
      < $1::timestamptz - make_interval(mins => $3) AS overdue
  FROM candidates c
  ORDER BY c.started_at, c.run_id`;
export type SelectLongRunningTurnsRow = { run_id: string; thread_id: string; message_id: string; overdue: boolean };
