/**
 * The thread surface's queries (src/history/threads.ts runs them): list, create, read, rename,
 * delete, titles and retention. Each query module of src/history keeps its statements in
 * a `<module>-sql.ts` like this one, each with the row type it returns.
 *
 * List order is (last_activity_at DESC, id DESC), served by threads_user_activity_idx
 * (user_id, last_activity_at DESC, id DESC): a page is one index range scan that stops after it.
 */

/**
 * The columns a thread item is built from, for threads aliased `t`, with its latest turn's status
 * (`awaiting_approval`: running, a tool call of it awaits the owner's approval).
 */
const threadColumns = `
  t.id, t.title, t.title_source, t.metadata, t.message_count, t.last_message_at, t.last_activity_at,
  t.created_at, t.updated_at,
  (SELECT CASE WHEN u.status = 'running' AND EXISTS (
            SELECT 1 FROM tool_approvals a WHERE a.thread_id = t.id AND a.status = 'pending' AND a.message_id = u.message_id)
          THEN 'awaiting_approval' ELSE u.status END
   FROM turns u WHERE u.thread_id = t.id AND u.status <> 'skipped'
   ORDER BY u.started_at DESC LIMIT 1) AS latest_turn_status`;

/** A thread item's row (threadColumns): what the list, read, create and update statements return. */
export type ThreadRow = {
  id: string;
  title: string | null;
  title_source: "user" | "model" | null;
  metadata: Record<string, unknown>;
  message_count: number;
  last_message_at: Date | null;
  last_activity_at: Date;
  created_at: Date;
  updated_at: Date;
  latest_turn_status: string | null;
};

/** The user's ($1) most recently active threads, $2 of them. */
export const selectFirstThreadPage = `
  SELECT ${threadColumns} FROM threads t
  WHERE t.user_id = $1
  ORDER BY t.last_activity_at DESC, t.id DESC
  LIMIT $2`;

/** The user's ($1) threads after cursor ($2 activity, $3 id) in list order, $4 of them. */
export const selectThreadPageAfter = `
  SELECT ${threadColumns} FROM threads t
  WHERE t.user_id = $1 AND (t.last_activity_at, t.id) < ($2::timestamptz, $3::uuid)
  ORDER BY t.last_activity_at DESC, t.id DESC
  LIMIT $4`;

/** One of the user's threads: no row when it does not exist or is another user's. */
export const selectOwnedThread = `
  SELECT ${threadColumns} FROM threads t WHERE t.id = $1 AND t.user_id = $2`;

/** Creates the thread with a user title ($3, may be null) and metadata ($4); nothing when the id is taken. */
export const insertThreadWithDetails = `
  WITH inserted AS (
    INSERT INTO threads (id, user_id, title, title_source, metadata)
    VALUES ($1, $2, $3, CASE WHEN $3::text IS NULL THEN NULL ELSE 'user' END, $4)
    ON CONFLICT (id) DO NOTHING
    RETURNING *
  )
  SELECT ${threadColumns} FROM inserted t`;

export const selectThreadOwner = `
  SELECT user_id FROM threads WHERE id = $1`;
export type SelectThreadOwnerRow = { user_id: string };

/** title.changed in the thread event log, for a CTE `changed` (id, title, title_source) of changed threads. */
const titleChangedEvent = `
  threadline_append_events(c.id, NULL, 0, jsonb_build_array(jsonb_build_object('key', 'title.changed', 'event', 'title.changed',
    'data', jsonb_build_object('title', c.title, 'titleSource', c.title_source))))`;

/**
 * Renames and/or replaces the metadata of the user's thread: $3 says whether the title changes
 * (to $4: a user title, or NULL for untitled), $5 is the new metadata or NULL to keep it. A title
 * change is also logged (title.changed) in the thread's event log, in the same statement.
 */
export const updateThreadDetails = `
  WITH updated AS (
    UPDATE threads SET
      title = CASE WHEN $3 THEN $4::text ELSE title END,
      title_source = CASE WHEN $3 THEN CASE WHEN $4::text IS NULL THEN NULL ELSE 'user' END ELSE title_source END,
      metadata = coalesce($5::jsonb, metadata),
      updated_at = now()
    WHERE id = $1 AND user_id = $2
    RETURNING *
  ), changed AS (
    SELECT * FROM updated WHERE $3
  )
  SELECT ${threadColumns}, (SELECT ${titleChangedEvent} FROM changed c) AS title_event_id FROM updated t`;

/**
 * Deletes the user's thread and, through the foreign keys' ON DELETE CASCADE, every row keyed by
 * it (messages, turns, summaries): one statement, so one transaction.
 */
export const deleteOwnedThread = `
  DELETE FROM threads WHERE id = $1 AND user_id = $2 RETURNING id, user_id`;

/* ---- Titles ---- */

/**
 * What a title is written from: whether the thread already has a title, its first current-path
 * user message and that message's current answer (each agent result, in order).
 */
export const selectTitleSource = `
  WITH first_question AS (
    SELECT id, content FROM messages
    WHERE thread_id = $1 AND on_path AND kind = 'user'
    ORDER BY seq LIMIT 1
  )
  SELECT t.title IS NOT NULL AS titled, q.content AS question,
         (SELECT coalesce(jsonb_agg(a.content ORDER BY a.position), '[]'::jsonb)
          FROM messages a WHERE a.answers = q.id AND a.on_path) AS answer
  FROM threads t LEFT JOIN first_question q ON true
  WHERE t.id = $1`;
export type SelectTitleSourceRow = { titled: boolean; question: unknown; answer: unknown[] | null };

/**
 * Stores the model's title only on an untitled thread: a user's title (or an earlier model title)
 * stays. The thread's event log says title.changed in the same statement. One row when stored.
 */
export const storeModelTitle = `
  WITH changed AS (
    UPDATE threads SET title = $2, title_source = 'model', updated_at = now()
    WHERE id = $1 AND title IS NULL AND title_source IS NULL
    RETURNING id, title, title_source)
  SELECT ${titleChangedEvent} FROM changed c`;

/* ---- Retention ---- */

/** The database's clock, $1 days ago: where "inactive for longer than $1 days" begins. */
export const selectRetentionCutoff = `
  SELECT now() - make_interval(days => $1::int) AS cutoff`;
export type SelectRetentionCutoffRow = { cutoff: Date };

/**
 * Deletes up to $2 threads inactive since before $1, oldest first (threads_activity_idx). A thread
 * a writer holds locked is skipped (it is being written to: not inactive), and so is one a turn
 * runs on (a regenerate stores no message until it answers; a turn may wait long on an approval);
 * the cutoff is checked again on the locked row.
 */
export const deleteExpiredThreads = `
  WITH expired AS (
    SELECT id FROM threads t
    WHERE last_activity_at < $1
      AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.thread_id = t.id AND threadline_turn_unfinished(u.status))
    ORDER BY last_activity_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  )
  DELETE FROM threads t USING expired e
  WHERE t.id = e.id AND t.last_activity_at < $1
  RETURNING t.id, t.user_id`;
export type DeleteExpiredThreadsRow = { id: string; user_id: string };

/** Whether thread $1 was deleted: it has a tombstone (and, so, no row). */
export const selectTombstone = `
  SELECT 1 FROM thread_tombstones WHERE thread_id = $1`;

/** Deletes up to $2 tombstones older than $1 days, oldest first (thread_tombstones_deleted_idx). */
export const deleteOldTombstones = `
  WITH old AS (
    SELECT thread_id FROM thread_tombstones
    WHERE deleted_at < now() - make_interval(days => $1::int)
    ORDER BY deleted_at
    LIMIT $2
  )
  DELETE FROM thread_tombstones d USING old WHERE d.thread_id = old.thread_id`;
