/**
 * Every query Threadline runs. Kept apart from the code that sequences them (store.ts) so the
 * storage contract can be read in one place.
 *
 * Thread order is (turn_seq, seq): turn_seq is the seq of the user message a row belongs to.
 * Each history step of a turn is one statement (one round trip, atomic on its own); the two that
 * write call PL/pgSQL functions (src/history/schema/functions, one file each), which take
 * the thread's row lock first and then read what committed before it.
 */

export const insertThread = `
  INSERT INTO threads (id, user_id) VALUES ($1, $2)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

export const selectThreadOwner = `
  SELECT user_id FROM threads WHERE id = $1`;

/**
 * history.append-user-message in one statement: the thread's owner checked (a new thread created,
 * named after its first message, only when nothing refuses), the user message stored once, the
 * run recorded as a turn. Source: src/history/schema/functions/threadline_begin_turn.sql.
 * Returns one row: a refusal code, or the message's seq, stored text, and the turn's variant and status.
 */
export const beginTurn = `
  SELECT refusal, message_seq, stored_text, variant, status, skip_reason
  FROM threadline_begin_turn($1, $2, $3, $4, $5, $6, $7, $8, $9)`;

/**
 * history.append-results in one statement: the answer stored (off the current path, the turn
 * superseded, when its user message left the path meanwhile) and the turn completed; nothing for
 * a turn the user stopped. Source: src/history/schema/functions/threadline_store_answer.sql.
 * Returns one row: a refusal code, or rows inserted and the turn's status.
 */
export const storeAnswer = `
  SELECT refusal, inserted, status
  FROM threadline_store_answer($1, $2, $3, $4, $5, $6, $7, $8, $9)`;

/**
 * The thread event log entries that end a turn which stored no answer: `turn.<status>` with the
 * cause, then stream.ended (threadline_append_events in src/history/schema/functions).
 * Reads the CTE `ended` (thread_id, run_id, message_id, error).
 */
const endStream = (status: "failed" | "cancelled") => `
  SELECT e.thread_id, e.message_id, threadline_append_events(e.thread_id, e.run_id, 0, jsonb_build_array(
    jsonb_build_object('key', 'turn.${status}', 'event', 'turn.${status}',
      'data', jsonb_build_object('runId', e.run_id, 'messageId', e.message_id, 'error', e.error)),
    jsonb_build_object('key', 'stream.ended', 'event', 'stream.ended',
      'data', jsonb_build_object('scope', 'network', 'status', '${status}', 'runId', e.run_id, 'messageId', e.message_id))))
  FROM ended e`;

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
 * A failed run only updates a turn it started: a refused event leaves no trace. The thread's
 * event log says so in the same statement (so "stream ended" always means "recorded").
 */
export const failTurn = `
  WITH ${lockRunThread("$1")}, ended AS (
    UPDATE turns SET status = 'failed', error = $2, finished_at = now()
    WHERE run_id = $1 AND status = 'running' AND thread_id IN (SELECT id FROM locked)
    RETURNING thread_id, run_id, message_id, error)
  ${endStream("failed")}`;

/**
 * What POST /api/chat checks before sending the event: the owner of the thread the message goes
 * to ($1, or the message's own id for a new thread) and what the message id already names.
 */
export const selectSendable = `
  SELECT t.user_id AS owner, m.thread_id AS message_thread_id, m.kind AS message_kind, m.content ->> 'text' AS message_text
  FROM (SELECT coalesce($1::uuid, $2::uuid) AS id) target
  LEFT JOIN threads t ON t.id = target.id
  LEFT JOIN messages m ON m.id = $2::uuid`;

/**
 * history.get in one statement: the thread's owner, the current path before the user message at
 * $2 limited to the last $3 user messages (and everything after each; NULL: no limit), plus, when
 * $4, the system and summary rows older than that window; and the thread's summary with how many
 * current-path messages lie after what it covers and before where the window's turns begin
 * (counting stops at $5, so the check costs the same however far behind the summary is).
 * No row: the thread does not exist.
 *
 * Reads only the rows it returns, through messages_path_user_idx, messages_path_idx and
 * messages_path_system_idx, however long the thread. The window start is used as a scalar
 * subquery, not joined: the planner then estimates the turn_seq range as narrow and keeps the
 * index scan; joined, it guessed a third of the thread and, on long threads, chose a sequential
 * scan of every message (40x slower at 100,000). Rows come back as one JSON array, dates as ISO
 * strings, in thread order.
 */
export const selectHistoryWindow = `
  WITH window_start AS (
    -- No limit: the window is the whole thread, including rows before its first user message.
    SELECT CASE WHEN $3::bigint IS NULL THEN 0 ELSE coalesce(min(seq), $2) END AS turn_seq FROM (
      SELECT seq FROM messages
      WHERE thread_id = $1 AND on_path AND kind = 'user' AND seq < $2
      ORDER BY seq DESC
      LIMIT $3
    ) last_users
  ), window_rows AS (
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE m.thread_id = $1 AND m.on_path AND m.turn_seq < $2 AND m.turn_seq >= (SELECT turn_seq FROM window_start)
    UNION ALL
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE $4 AND m.thread_id = $1 AND m.on_path AND m.kind IN ('system', 'summary') AND m.turn_seq < (SELECT turn_seq FROM window_start)
  ), turns_start AS (
    -- Where the window's turns begin: its oldest user message or answer, else the current message.
    SELECT coalesce((SELECT min(turn_seq) FROM window_rows WHERE kind IN ('user', 'agent')), $2) AS turn_seq
  )
  SELECT t.user_id,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', r.id, 'kind', r.kind, 'agentName', r.agent_name, 'content', r.content,
        'createdAt', to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
      ) ORDER BY r.turn_seq, r.seq), '[]'::jsonb) FROM window_rows r) AS rows,
    w.turn_seq AS window_start, s.covers_through_turn_seq, s.text AS summary_text, s.updated_at AS summary_updated_at,
    (SELECT count(*)::int FROM (
       SELECT 1 FROM messages m
       WHERE m.thread_id = $1 AND m.on_path
         AND m.turn_seq > coalesce(s.covers_through_turn_seq, 0) AND m.turn_seq < w.turn_seq
       LIMIT $5
     ) unsummarized) AS unsummarized
  FROM threads t
  CROSS JOIN turns_start w
  LEFT JOIN thread_summaries s ON s.thread_id = t.id
  WHERE t.id = $1`;

/** The thread's latest turn that ran (not a skipped re-run), for the debug view. */
export const selectLatestTurn = `
  SELECT run_id, message_id, kind, variant, status, error, context, started_at, finished_at
  FROM turns WHERE thread_id = $1 AND status <> 'skipped'
  ORDER BY started_at DESC LIMIT 1`;

/** How many messages of each kind the thread holds, on and off its current path. */
export const countThreadMessages = `
  SELECT kind, count(*) FILTER (WHERE on_path)::int AS on_path, count(*)::int AS stored
  FROM messages WHERE thread_id = $1 GROUP BY kind`;

/** A message of a thread, with the thread's owner: what a regenerate request is checked against. */
export const selectThreadMessage = `
  SELECT t.user_id, m.id, m.kind, m.content, m.on_path
  FROM threads t
  LEFT JOIN messages m ON m.id = $2 AND m.thread_id = t.id
  WHERE t.id = $1`;

/** Every answer variant of a user message, oldest variant first, each in its stored order. */
export const selectAnswerVariants = `
  SELECT id, variant, position, agent_name, content, on_path, stopped, created_at
  FROM messages WHERE answers = $1
  ORDER BY variant, position`;

/**
 * What a summarizer reads, in one statement: the thread's owner and path version, the current
 * summary, and the oldest $3 current-path messages after what the summary covers and before the
 * window ($2), whole turns only: a turn is summarized with its answer or not at all.
 * No row: the thread does not exist.
 */
export const selectSummarySource = `
  WITH summary AS (
    SELECT covers_through_turn_seq, text FROM thread_summaries WHERE thread_id = $1
  ), batch AS (
    SELECT turn_seq, seq, kind, agent_name, content FROM messages
    WHERE thread_id = $1 AND on_path AND turn_seq > coalesce((SELECT covers_through_turn_seq FROM summary), 0) AND turn_seq < $2
    ORDER BY turn_seq, seq
    LIMIT $3
  ), whole_turns AS (
    SELECT turn_seq, seq, kind, agent_name, content FROM batch
    WHERE turn_seq < (SELECT CASE WHEN count(*) < $3 THEN $2 ELSE max(turn_seq) END FROM batch)
       OR turn_seq = (SELECT min(turn_seq) FROM batch)
  )
  SELECT t.user_id, t.path_version, s.covers_through_turn_seq, s.text,
    (SELECT coalesce(jsonb_agg(jsonb_build_object('turnSeq', b.turn_seq, 'kind', b.kind, 'agentName', b.agent_name, 'content', b.content)
       ORDER BY b.turn_seq, b.seq), '[]'::jsonb) FROM whole_turns b) AS messages
  FROM threads t LEFT JOIN summary s ON true
  WHERE t.id = $1`;

/**
 * Stores a summary built on the previous one's extent ($4; NULL: the thread's first summary),
 * only if the thread's path version is still the one the summarizer read ($5): a detach since
 * then (a regenerate) may have taken turns it covers off the path. The thread row is share-locked,
 * so a detach waits for this statement or this statement sees the detach. Another summarizer that
 * extended (or created) the summary first wins. Returns how many summaries were stored (0 or 1).
 */
export const storeSummary = `
  WITH thread AS (
    SELECT id FROM threads WHERE id = $1 AND path_version = $5::bigint FOR SHARE
  ), updated AS (
    UPDATE thread_summaries SET covers_through_turn_seq = $2, text = $3, updated_at = now()
    WHERE thread_id = (SELECT id FROM thread) AND covers_through_turn_seq = $4::bigint
    RETURNING 1
  ), inserted AS (
    INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text)
    SELECT id, $2, $3 FROM thread WHERE $4::bigint IS NULL
    ON CONFLICT (thread_id) DO NOTHING
    RETURNING 1
  )
  SELECT ((SELECT count(*) FROM updated) + (SELECT count(*) FROM inserted))::int AS stored`;

// ---- API keys (authentication) ----

export const insertApiKey = `
  INSERT INTO api_keys (id, user_id, name, secret_hash) VALUES ($1, $2, $3, $4)
  RETURNING id, user_id, name, created_at, revoked_at`;

/** A key that may still be used: revoked keys are never returned. */
export const selectActiveApiKey = `
  SELECT user_id, secret_hash FROM api_keys WHERE id = $1 AND revoked_at IS NULL`;

export const selectApiKeys = `
  SELECT id, user_id, name, created_at, revoked_at FROM api_keys
  WHERE $1::text IS NULL OR user_id = $1
  ORDER BY created_at, id`;

/** Revoking twice keeps the first revocation time. */
export const revokeApiKey = `
  UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
  RETURNING id, user_id, name, created_at, revoked_at`;

/* ---- Message pages: GET /api/threads/:threadId/messages, keyset-paged on the thread order ---- */

/**
 * The user messages' extras a client shows, for one page: each user message's latest turn and its
 * number of answer variants. Read per row through turns_message_idx and messages_answers_idx, so a
 * page costs the same however long the thread is.
 */
const pageExtras = `
  SELECT p.id, p.turn_seq, p.seq, p.kind, p.agent_name, p.content, p.answers, p.variant, p.stopped, p.created_at,
         -- A running turn between attempts of a failed step shows as retrying, with the cause.
         CASE WHEN t.status = 'running' AND t.retrying IS NOT NULL THEN 'retrying' ELSE t.status END AS turn_status,
         t.run_id AS turn_run_id,
         CASE WHEN t.status = 'running' AND t.retrying IS NOT NULL THEN t.retrying ->> 'cause' ELSE t.error END AS turn_error,
         CASE WHEN p.kind = 'user'
           THEN (SELECT count(DISTINCT a.variant)::int FROM messages a WHERE a.answers = p.id) END AS variant_count
  FROM page p
  LEFT JOIN LATERAL (
    SELECT status, run_id, error, retrying FROM turns
    WHERE turns.message_id = p.id AND p.kind = 'user' AND status <> 'skipped'
    ORDER BY started_at DESC LIMIT 1
  ) t ON true`;

/**
 * Up to $4 current-path messages before position ($2, $3) in thread order, the nearest first
 * (a backward range scan of messages_path_idx that stops after $4 rows).
 */
export const selectPageBefore = `
  WITH page AS (
    SELECT id, turn_seq, seq, kind, agent_name, content, answers, variant, stopped, created_at FROM messages
    WHERE thread_id = $1 AND on_path AND (turn_seq, seq) < ($2::bigint, $3::bigint)
    ORDER BY turn_seq DESC, seq DESC
    LIMIT $4
  )${pageExtras}
  ORDER BY p.turn_seq DESC, p.seq DESC`;

/** Up to $4 current-path messages after position ($2, $3) in thread order, the nearest first. */
export const selectPageAfter = `
  WITH page AS (
    SELECT id, turn_seq, seq, kind, agent_name, content, answers, variant, stopped, created_at FROM messages
    WHERE thread_id = $1 AND on_path AND (turn_seq, seq) > ($2::bigint, $3::bigint)
    ORDER BY turn_seq, seq
    LIMIT $4
  )${pageExtras}
  ORDER BY p.turn_seq, p.seq`;

// ---------------------------------------------------------------------------------------------
// Turn waits (src/history/turn-waits.ts): a turn waits for the earlier unfinished turn of its thread.
// ---------------------------------------------------------------------------------------------

/**
 * One round of a turn's wait, in one statement, for the turn of run $1:
 * - first records run $2 (when given: the turn waited for past its deadline) as failed with $3,
 *   ending its event stream (turn.failed, stream.ended);
 * - then finds the oldest other unfinished turn ahead of it on the thread's current path: a turn
 *   on an earlier message, or an earlier run on the same message (a duplicate delivery). Order is
 *   (message seq, started_at, run_id), a total order, so two runs never wait for each other;
 * - with none left, a chat turn whose message meanwhile got its answer (from the run it waited
 *   for) is recorded as skipped instead of answering the message twice.
 * The statement's snapshot predates its own update, so the abandoned run is excluded by id.
 */
export const selectEarlierUnfinishedTurn = `
  WITH me AS (
    SELECT t.run_id, t.thread_id, t.kind, t.message_id, t.started_at, m.seq
    FROM turns t JOIN messages m ON m.id = t.message_id
    WHERE t.run_id = $1
  ), ${lockRunThread("$2")}, abandoned AS (
    UPDATE turns SET status = 'failed', error = $3, finished_at = now()
    WHERE run_id = $2 AND status = 'running' AND thread_id IN (SELECT id FROM locked)
    RETURNING thread_id, run_id, message_id, error
  ), ended AS (
    SELECT * FROM abandoned
  ), earlier AS (
    SELECT t.run_id, t.message_id FROM me
    JOIN turns t ON t.thread_id = me.thread_id AND t.status = 'running' AND t.run_id <> me.run_id
    JOIN messages m ON m.id = t.message_id AND m.on_path
    WHERE t.run_id IS DISTINCT FROM $2
      AND (m.seq < me.seq OR (m.seq = me.seq AND (t.started_at, t.run_id) < (me.started_at, me.run_id)))
    ORDER BY m.seq, t.started_at, t.run_id
    LIMIT 1
  ), skipped AS (
    UPDATE turns SET status = 'skipped', finished_at = now()
    FROM me
    WHERE turns.run_id = me.run_id AND turns.status = 'running' AND me.kind = 'chat'
      AND NOT EXISTS (SELECT 1 FROM earlier)
      AND EXISTS (SELECT 1 FROM messages a WHERE a.answers = me.message_id AND a.on_path)
    RETURNING turns.run_id
  )
  SELECT (SELECT run_id FROM earlier) AS earlier_run_id,
         (SELECT message_id FROM earlier) AS earlier_message_id,
         EXISTS (SELECT 1 FROM skipped) AS skipped,
         (SELECT count(*)::int FROM (${endStream("failed")}) logged) AS abandoned`;

/**
 * Records a cancelled run's turn (only while it is running), ending its event stream in the same
 * statement; returns what the finished event names.
 */
export const cancelTurn = `
  WITH ${lockRunThread("$1")}, ended AS (
    UPDATE turns SET status = 'cancelled', error = $2, finished_at = now()
    WHERE run_id = $1 AND status = 'running' AND thread_id IN (SELECT id FROM locked)
    RETURNING thread_id, run_id, message_id, error)
  ${endStream("cancelled")}`;
