/**
 * The statements of turns.ts: every status change of a turn written in TypeScript's SQL (failed,
 * cancelled, skipped) and the stop (threadline_stop_turn), each with the row type it returns.
 * A turn that ends here also ends its event stream in the same statement (turn.<status>,
 * stream.ended). The statuses written inside PL/pgSQL (running, skipped, completed, superseded,
 * stopped) are set by the database functions that beginTurn, storeAnswer and stopTurn call.
 */

/**
 * The thread event log entries that end a turn which stored no answer: `detail` (`turn.<status>`,
 * or message.<status> for a run that began no turn) with the cause, then stream.ended
 * (threadline_append_events in src/history/schema/functions).
 * Reads the CTE `ended` (thread_id, run_id, message_id, error).
 */
const endStream = (status: "failed" | "cancelled", detail = `turn.${status}`) => `
  SELECT e.thread_id, e.message_id, threadline_append_events(e.thread_id, e.run_id, 0, jsonb_build_array(
    jsonb_build_object('key', '${detail}', 'event', '${detail}',
      'data', jsonb_build_object('runId', e.run_id, 'messageId', e.message_id, 'error', e.error)),
    jsonb_build_object('key', 'stream.ended', 'event', 'stream.ended',
      'data', jsonb_build_object('scope', 'network', 'status', '${status}', 'runId', e.run_id, 'messageId', e.message_id))))
  FROM ended e`;

/**
 * The thread event log entries that end a turn skipped while it waited (its message answered by
 * another run): turn.skipped with `reason`, then stream.ended, under the keys the run's own
 * writer uses (src/stream/publish.ts), so either writing them again adds nothing.
 * Reads the CTE `skipped` (thread_id, run_id, message_id).
 */
const skippedStream = (reason: string) => `
  SELECT s.run_id, threadline_append_events(s.thread_id, s.run_id, 0, jsonb_build_array(
    jsonb_build_object('key', 'turn.skipped', 'event', 'turn.skipped',
      'data', jsonb_build_object('runId', s.run_id, 'reason', ${reason})),
    jsonb_build_object('key', 'stream.ended', 'event', 'stream.ended',
      'data', jsonb_build_object('scope', 'network', 'status', 'skipped', 'runId', s.run_id, 'messageId', s.message_id))))
  FROM skipped s`;

/**
 * The CTE `locked`: the thread of run `runParam`, share-locked before the statement updates that
 * run's turn. A stop (threadline_stop_turn) and storing an answer lock the thread first and the
 * turn row second; taking them in the other order, a failure or cancellation recorded while the
 * user stops the turn deadlocked with the stop. Now one waits for the other.
 */
const lockRunThread = (runParam: string) => `
  locked AS (
    SELECT t.id FROM threads t WHERE t.id = (SELECT u.thread_id FROM turns u WHERE u.run_id = ${runParam}) FOR KEY SHARE
  )`;

/**
 * Records run $1's turn as `status` with cause $2, only while it is running, ending its event
 * stream in the same statement (so "stream ended" always means "recorded").
 */
const endTurn = (status: "failed" | "cancelled") => `
  WITH ${lockRunThread("$1")}, ended AS (
    UPDATE turns SET status = '${status}', error = $2, finished_at = now()
    WHERE run_id = $1 AND status = 'running' AND thread_id IN (SELECT id FROM locked)
    RETURNING thread_id, run_id, message_id, error)
  ${endStream(status)}`;

/** A failed run only updates a turn it started (logUnbegunFailure tells of one that began none). */
export const failTurn = endTurn("failed");

/**
 * The log's transaction, first: whether thread $1 is user $2's to log on, creating it for message
 * $3 sent at $4 when the run would have (threadline_unbegun_failure_thread says when; a first step
 * creating it meanwhile is waited for), then its row share-locked (lockUnbegunThread). A first
 * step of the run executing now holds the row (threadline_begin_turn locks it FOR UPDATE) until it
 * commits: logUnbegun then reads, in a snapshot taken after, the turn that step began, and logs
 * nothing. Taken by logUnbegun alone, the lock came after its snapshot, which missed that turn.
 */
export const selectUnbegunThread = "SELECT threadline_unbegun_failure_thread($1, $2, $3, $4) AS owned";
export type SelectUnbegunThreadRow = { owned: boolean };
export const lockUnbegunThread = "SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE";

/**
 * Then: run $2 ended `status` (failed, or cancelled) before it began a turn for message $3 (no turn
 * row: its first step failed through its retries or its event was refused; or it was cancelled
 * while queued or before its first step stored anything): on thread $1, the user's (checked and
 * locked above, in the same transaction), logs message.<status> (cause $4) then stream.ended
 * (<status>), under the run's own keys: what a stream following the message waits for. Not for a
 * run that already ended its stream (a busy refusal logged message.refused and stream.ended; a
 * failure or cancellation logged before). The log entries are endStream's, as for a turn that
 * ended so.
 */
const logUnbegun = (status: "failed" | "cancelled", error = "$4::text") => `
  WITH ended AS (
    SELECT $1::uuid AS thread_id, $2::text AS run_id, $3::uuid AS message_id, ${error} AS error
    WHERE NOT EXISTS (SELECT 1 FROM turns u WHERE u.run_id = $2)
      AND NOT EXISTS (SELECT 1 FROM thread_events x WHERE x.run_id = $2 AND x.attempt = 0 AND x.key = 'stream.ended'))
  ${endStream(status, `message.${status}`)}`;

/** A run that failed before it began a turn (its onFailure: turns.ts failTurn). */
export const logUnbegunFailure = logUnbegun("failed");

/**
 * A run cancelled before it began a turn (turn-cancelled: turns.ts cancelTurn). Its cause is $4
 * (send the message again) unless message $3 is stored in the thread (a regenerate, or a rerun of a
 * run that stored it): then $5, which asks for no second copy of the words. Read in the log's
 * snapshot, after the thread's lock, as the turn is.
 */
export const logUnbegunCancellation = logUnbegun(
  "cancelled",
  "CASE WHEN EXISTS (SELECT 1 FROM messages m WHERE m.id = $3 AND m.thread_id = $1) THEN $5::text ELSE $4::text END",
);

/**
 * One round of a turn's wait, in one statement, for the turn of run $1:
 * - first records run $2 (when given: the turn waited for past its deadline) as failed with $3,
 *   ending its event stream (turn.failed, stream.ended);
 * - then finds the oldest other unfinished turn ahead of it on the thread's current path: a turn
 *   on an earlier message, or an earlier run on the same message (a duplicate delivery). Order is
 *   (message seq, started_at, run_id), a total order, so two runs never wait for each other;
 * - with none left, a chat turn whose message meanwhile got its answer (from the run it waited
 *   for) is recorded as skipped instead of answering the message twice, ending its event stream
 *   (turn.skipped with the reason $4, stream.ended): a run cancelled or failing right after this
 *   step finds its turn no longer running, and nothing else would end the stream a client follows.
 * The thread is locked (`locked`, the thread of run $1, which run $2's turn is on too) before
 * either turn is updated. The statement's snapshot predates its own update, so the abandoned run
 * is excluded by id. A turn awaiting the user's approval of a tool call (until its expiry) is
 * never abandoned: it stays ahead.
 */
export const selectEarlierUnfinishedTurn = `
  WITH me AS (
    SELECT t.run_id, t.thread_id, t.kind, t.message_id, t.started_at, m.seq
    FROM turns t JOIN messages m ON m.id = t.message_id
    WHERE t.run_id = $1
  ), ${lockRunThread("$1")}, abandoned AS (
    UPDATE turns SET status = 'failed', error = $3, finished_at = now()
    WHERE run_id = $2 AND status = 'running' AND thread_id IN (SELECT id FROM locked)
      -- A turn waiting for the user's approval of a tool call is alive, not lost.
      AND NOT EXISTS (SELECT 1 FROM tool_approvals a
        WHERE a.message_id = turns.message_id AND a.status = 'pending' AND a.expires_at > now())
    RETURNING thread_id, run_id, message_id, error
  ), ended AS (
    SELECT * FROM abandoned
  ), earlier AS (
    SELECT t.run_id, t.message_id FROM me
    JOIN turns t ON t.thread_id = me.thread_id AND t.status = 'running' AND t.run_id <> me.run_id
    JOIN messages m ON m.id = t.message_id AND m.on_path
    WHERE NOT EXISTS (SELECT 1 FROM abandoned x WHERE x.run_id = t.run_id)
      AND (m.seq < me.seq OR (m.seq = me.seq AND (t.started_at, t.run_id) < (me.started_at, me.run_id)))
    ORDER BY m.seq, t.started_at, t.run_id
    LIMIT 1
  ), skipped AS (
    UPDATE turns SET status = 'skipped', finished_at = now()
    FROM me
    WHERE turns.run_id = me.run_id AND turns.status = 'running' AND me.kind = 'chat'
      AND turns.thread_id IN (SELECT id FROM locked)
      AND NOT EXISTS (SELECT 1 FROM earlier)
      AND EXISTS (SELECT 1 FROM messages a WHERE a.answers = me.message_id AND a.on_path)
    RETURNING turns.run_id, turns.thread_id, turns.message_id
  )
  SELECT (SELECT run_id FROM earlier) AS earlier_run_id,
         (SELECT message_id FROM earlier) AS earlier_message_id,
         (SELECT count(*) FROM (${skippedStream("$4::text")}) logged) > 0 AS skipped,
         (SELECT count(*)::int FROM (${endStream("failed")}) logged) AS abandoned`;
/** The prepared name of selectEarlierUnfinishedTurn (history.find-earlier-turn), as in store-sql.ts. */
export const selectEarlierUnfinishedTurnName = "history.find-earlier-turn";
export type SelectEarlierUnfinishedTurnRow = {
  earlier_run_id: string | null;
  earlier_message_id: string | null;
  skipped: boolean;
  abandoned: number;
};

/** Records a cancelled run's turn; returns what the finished event names (logUnbegunCancellation tells of a run that began none). */
export const cancelTurn = endTurn("cancelled");
export type CancelTurnRow = { thread_id: string; message_id: string };

/**
 * Stops run $3's turn on thread $1 of user $2 if it still runs, storing what it streamed as one
 * result (id $4, agent $5): threadline_stop_turn (src/history/schema/functions), one statement
 * under the thread's lock. Returns one row: a refusal code, or the message, variant and rows stored.
 */
export const stopTurn = `
  SELECT refusal, message_id, variant, stored
  FROM threadline_stop_turn($1, $2, $3, $4, $5)`;
export type StopTurnRow = { refusal: string | null; message_id: string; variant: number; stored: number };
