/**
 * Every query Threadline runs. Kept apart from the code that sequences them (store.ts) so the
 * storage contract can be read in one place.
 *
 * Thread order is (turn_seq, seq): turn_seq is the seq of the user message a row belongs to.
 */

export const insertThread = `
  INSERT INTO threads (id, user_id) VALUES ($1, $2)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

export const selectThreadOwner = `
  SELECT user_id FROM threads WHERE id = $1`;

/** Takes the thread's row lock: every writer to one thread queues here. */
export const lockThread = `
  SELECT user_id, last_seq FROM threads WHERE id = $1 FOR UPDATE`;

/** Reserves $2 consecutive sequence numbers; returns the last one. */
export const reserveSeq = `
  UPDATE threads SET last_seq = last_seq + $2, updated_at = now()
  WHERE id = $1
  RETURNING last_seq`;

export const selectMessage = `
  SELECT id, thread_id, seq, turn_seq, kind, agent_name, content, on_path
  FROM messages WHERE id = $1`;

export const insertUserMessage = `
  INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, client_timestamp)
  VALUES ($1, $2, $3, $3, 'user', 'user', $4, $5)`;

/**
 * The answer state of one user message: its current variant, the highest stored variant, and the
 * highest variant taken by a turn that is running or completed (a failed turn stored nothing, so
 * its number may be used again).
 */
export const selectAnswerState = `
  SELECT (SELECT max(variant) FROM messages WHERE answers = $1 AND on_path) AS current_variant,
         (SELECT coalesce(max(variant), 0) FROM messages WHERE answers = $1) AS max_variant,
         (SELECT coalesce(max(variant), 0) FROM turns WHERE message_id = $1 AND status IN ('running', 'completed')) AS max_turn_variant`;

export const selectTurnByRun = `
  SELECT run_id, variant, status FROM turns WHERE run_id = $1`;

export const selectTurnByEvent = `
  SELECT variant FROM turns WHERE event_id = $1 AND message_id = $2
  ORDER BY started_at LIMIT 1`;

export const insertTurn = `
  INSERT INTO turns (run_id, thread_id, message_id, kind, event_id, variant, status, context, finished_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $7 = 'running' THEN NULL ELSE now() END)`;

export const completeTurn = `
  UPDATE turns SET status = 'completed', error = NULL, finished_at = now()
  WHERE run_id = $1`;

/** A failed run only updates a turn it started: a refused event leaves no trace. */
export const failTurn = `
  UPDATE turns SET status = 'failed', error = $2, finished_at = now()
  WHERE run_id = $1 AND status = 'running'`;

export const countVariantRows = `
  SELECT count(*)::int AS n FROM messages WHERE answers = $1 AND variant = $2`;

/** Takes the superseded answer to a user message off the current path. */
export const detachCurrentAnswer = `
  UPDATE messages SET on_path = false
  WHERE answers = $1 AND on_path`;

/** Takes every turn after a user message off the current path (regenerating an earlier message). */
export const detachLaterTurns = `
  UPDATE messages SET on_path = false
  WHERE thread_id = $1 AND on_path AND turn_seq > $2`;

export const insertAgentResult = `
  INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position)
  VALUES ($1, $2, $3, $4, 'agent', $5, $6, $7, $8, $9)
  ON CONFLICT (id) DO NOTHING`;

/**
 * The history before the current user message on the current path, limited to the last
 * $3 user messages (and everything after each; NULL: no limit), plus, when $4, the system and
 * summary rows older than that window. Reads only the rows it returns, through
 * messages_path_user_idx, messages_path_idx and messages_path_system_idx, however long the thread.
 * The window start is used as a scalar subquery, not joined: the planner then estimates the
 * turn_seq range as narrow and keeps the index scan; joined, it guessed a third of the thread
 * and, on long threads, chose a sequential scan of every message (40x slower at 100,000).
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
  )
  SELECT id, seq, kind, agent_name, content, created_at FROM (
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE m.thread_id = $1 AND m.on_path AND m.turn_seq < $2 AND m.turn_seq >= (SELECT turn_seq FROM window_start)
    UNION ALL
    SELECT m.id, m.turn_seq, m.seq, m.kind, m.agent_name, m.content, m.created_at
    FROM messages m
    WHERE $4 AND m.thread_id = $1 AND m.on_path AND m.kind IN ('system', 'summary') AND m.turn_seq < (SELECT turn_seq FROM window_start)
  ) window_rows
  ORDER BY turn_seq, seq`;

/** Records on a turn what its history was made of (merged into what is already recorded). */
export const mergeTurnContext = `
  UPDATE turns SET context = coalesce(context, '{}'::jsonb) || $2::jsonb
  WHERE run_id = $1`;

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
  SELECT id, variant, position, agent_name, content, on_path, created_at
  FROM messages WHERE answers = $1
  ORDER BY variant, position`;

/**
 * The thread's summary and how many current-path messages lie after what it covers and before
 * $2, where the history window starts ($3: the oldest row the window returned, if any). Counting
 * stops at $4, so the check costs the same however far behind the summary is.
 */
export const selectSummaryState = `
  WITH window_start AS (
    SELECT coalesce((SELECT turn_seq FROM messages WHERE id = $3 AND thread_id = $1), $2) AS turn_seq
  ), summary AS (
    SELECT covers_through_turn_seq, text, updated_at FROM thread_summaries WHERE thread_id = $1
  )
  SELECT w.turn_seq AS window_start, s.covers_through_turn_seq, s.text, s.updated_at,
    (SELECT count(*)::int FROM (
       SELECT 1 FROM messages m
       WHERE m.thread_id = $1 AND m.on_path
         AND m.turn_seq > coalesce(s.covers_through_turn_seq, 0) AND m.turn_seq < w.turn_seq
       LIMIT $4
     ) unsummarized) AS unsummarized
  FROM window_start w LEFT JOIN summary s ON true`;

/** What the summarizer extends: the current summary, or nothing yet. */
export const selectSummary = `
  SELECT covers_through_turn_seq, text FROM thread_summaries WHERE thread_id = $1`;

/**
 * The oldest $4 current-path messages after what the summary covers ($2) and before the window
 * ($3), whole turns only: a turn is summarized with its answer or not at all.
 */
export const selectMessagesToSummarize = `
  WITH batch AS (
    SELECT turn_seq, seq, kind, agent_name, content FROM messages
    WHERE thread_id = $1 AND on_path AND turn_seq > $2 AND turn_seq < $3
    ORDER BY turn_seq, seq
    LIMIT $4
  )
  SELECT turn_seq, kind, agent_name, content FROM batch
  WHERE turn_seq < (SELECT CASE WHEN count(*) < $4 THEN $3 ELSE max(turn_seq) END FROM batch)
     OR turn_seq = (SELECT min(turn_seq) FROM batch)
  ORDER BY turn_seq, seq`;

/** Extends the summary, unless another summarizer already moved it past $4 (what this one read). */
export const updateSummary = `
  UPDATE thread_summaries SET covers_through_turn_seq = $2, text = $3, updated_at = now()
  WHERE thread_id = $1 AND covers_through_turn_seq = $4`;

/** The thread's first summary; a concurrent first summary wins and this one is dropped. */
export const insertSummary = `
  INSERT INTO thread_summaries (thread_id, covers_through_turn_seq, text) VALUES ($1, $2, $3)
  ON CONFLICT (thread_id) DO NOTHING`;

/**
 * A new answer to a message the summary covers (a regenerate, or a failed turn completed late)
 * changes what the summary stands for: drop it, and the next summarization starts over.
 */
export const deleteSummaryCovering = `
  DELETE FROM thread_summaries WHERE thread_id = $1 AND covers_through_turn_seq >= $2`;

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
  SELECT p.id, p.turn_seq, p.seq, p.kind, p.agent_name, p.content, p.answers, p.variant, p.created_at,
         t.status AS turn_status, t.run_id AS turn_run_id, t.error AS turn_error,
         CASE WHEN p.kind = 'user'
           THEN (SELECT count(DISTINCT a.variant)::int FROM messages a WHERE a.answers = p.id) END AS variant_count
  FROM page p
  LEFT JOIN LATERAL (
    SELECT status, run_id, error FROM turns
    WHERE turns.message_id = p.id AND p.kind = 'user' AND status <> 'skipped'
    ORDER BY started_at DESC LIMIT 1
  ) t ON true`;

/**
 * Up to $4 current-path messages before position ($2, $3) in thread order, the nearest first
 * (a backward range scan of messages_path_idx that stops after $4 rows).
 */
export const selectPageBefore = `
  WITH page AS (
    SELECT id, turn_seq, seq, kind, agent_name, content, answers, variant, created_at FROM messages
    WHERE thread_id = $1 AND on_path AND (turn_seq, seq) < ($2::bigint, $3::bigint)
    ORDER BY turn_seq DESC, seq DESC
    LIMIT $4
  )${pageExtras}
  ORDER BY p.turn_seq DESC, p.seq DESC`;

/** Up to $4 current-path messages after position ($2, $3) in thread order, the nearest first. */
export const selectPageAfter = `
  WITH page AS (
    SELECT id, turn_seq, seq, kind, agent_name, content, answers, variant, created_at FROM messages
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
 * - first records run $2 (when given: the turn waited for past its deadline) as failed with $3;
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
  ), abandoned AS (
    UPDATE turns SET status = 'failed', error = $3, finished_at = now()
    WHERE run_id = $2 AND status = 'running'
    RETURNING run_id
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
         (SELECT count(*)::int FROM abandoned) AS abandoned`;

/** Records a cancelled run's turn (only while it is running); returns what the finished event names. */
export const cancelTurn = `
  UPDATE turns SET status = 'cancelled', error = $2, finished_at = now()
  WHERE run_id = $1 AND status = 'running'
  RETURNING thread_id, message_id`;
