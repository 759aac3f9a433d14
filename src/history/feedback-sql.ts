/**
 * The statements of feedback.ts: a user's rating of an answer (message_feedback, migration 0021),
 * given, replaced, removed and read, each with the row type it returns.
 */

/**
 * The CTE `target`: thread $1 with its owner and message $2 of it (NULL columns when the thread
 * holds no such message), and the turn that wrote the message when it is an answer: the run that
 * stored its variant (a completed, superseded or stopped turn before any other).
 */
const target = `
  target AS (
    SELECT t.user_id AS owner, m.id, m.kind, w.run_id, w.context -> 'model' AS model
    FROM threads t
    LEFT JOIN messages m ON m.id = $2 AND m.thread_id = t.id
    LEFT JOIN LATERAL (
      SELECT u.run_id, u.context FROM turns u
      WHERE m.kind = 'agent' AND u.message_id = m.answers AND u.variant = m.variant
      ORDER BY u.status IN ('completed', 'superseded', 'stopped') DESC, u.started_at DESC
      LIMIT 1
    ) w ON true
    WHERE t.id = $1
  )`;

/** What the target CTE tells of the thread and the message, for the refusals. */
type TargetRow = { owner: string; id: string | null; kind: "user" | "agent" | "system" | "summary" | null };

/**
 * Gives user $3's rating $4 with comment $5 to answer $2 of thread $1, in one statement: only the
 * thread's owner's, only an agent message's. A rating already there is replaced; the same rating
 * and comment again keep the row's version and time (a retried request), anything else takes a
 * new version (the proposed row's, from the sequence). Returns the target, and the stored row's
 * columns when one was written (NULL otherwise).
 */
export const putFeedback = `
  WITH ${target},
  stored AS (
    INSERT INTO message_feedback (message_id, thread_id, user_id, rating, comment)
    SELECT id, $1, $3, $4, $5 FROM target WHERE owner = $3 AND kind = 'agent'
    ON CONFLICT (message_id) DO UPDATE SET
      rating = excluded.rating,
      comment = excluded.comment,
      version = CASE WHEN (message_feedback.rating, message_feedback.comment) IS DISTINCT FROM (excluded.rating, excluded.comment)
        THEN excluded.version ELSE message_feedback.version END,
      updated_at = CASE WHEN (message_feedback.rating, message_feedback.comment) IS DISTINCT FROM (excluded.rating, excluded.comment)
        THEN now() ELSE message_feedback.updated_at END
    RETURNING rating, comment, version, created_at, updated_at
  )
  SELECT target.owner, target.id, target.kind, target.run_id, target.model,
         s.rating, s.comment, s.version::text AS version, s.created_at, s.updated_at
  FROM target LEFT JOIN stored s ON true`;
export type PutFeedbackRow = TargetRow & {
  run_id: string | null;
  /** As the turn's context recorded it (adapter.ts): {provider, name}; NULL for a turn that did not. */
  model: { provider?: string; name?: string } | null;
  rating: "up" | "down" | null;
  comment: string | null;
  version: string | null;
  created_at: Date | null;
  updated_at: Date | null;
};

/** Removes user $3's rating of answer $2 of thread $1, in one statement; `deleted`: there was one. */
export const deleteFeedback = `
  WITH ${target},
  gone AS (
    DELETE FROM message_feedback f USING target
    WHERE f.message_id = target.id AND target.owner = $3 AND target.kind = 'agent'
    RETURNING f.message_id
  )
  SELECT target.owner, target.id, target.kind, EXISTS (SELECT 1 FROM gone) AS deleted FROM target`;
export type DeleteFeedbackRow = TargetRow & { deleted: boolean };

/** The ratings of the answers $1 (ids) of thread $2 (message_feedback_pkey). */
export const selectFeedbackOf = `
  SELECT message_id, rating, comment, updated_at FROM message_feedback WHERE message_id = ANY($1::uuid[]) AND thread_id = $2`;
export type FeedbackRow = { message_id: string; rating: "up" | "down"; comment: string | null; updated_at: Date };
