-- Up Migration

-- What a thread list shows and is ordered by.
-- - title / title_source: 'user' (POST or PATCH) or 'model' (the titles function); a model title is
--   stored only while title_source is not 'user', checked in the storing statement itself.
-- - metadata: a small JSON object the client owns (size capped by the API).
-- - last_activity_at: when the thread last got a message (its creation time until then), kept to
--   the millisecond so that a cursor written as an ISO date (JavaScript precision) is exact.
-- - last_message_at / message_count: the newest message's time and the number of current-path
--   messages (what GET /api/threads/:id/messages pages through).
ALTER TABLE threads
  ADD COLUMN title            text,
  ADD COLUMN title_source     text CHECK (title_source IN ('user', 'model')),
  ADD COLUMN metadata         jsonb       NOT NULL DEFAULT '{}'::jsonb,
  ADD COLUMN last_activity_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  ADD COLUMN last_message_at  timestamptz,
  ADD COLUMN message_count    integer     NOT NULL DEFAULT 0,
  ADD CONSTRAINT threads_title_pair_check CHECK ((title IS NULL) = (title_source IS NULL)),
  -- A list cursor carries the activity time as a millisecond ISO date: a finer stored time would make
  -- the cursor fall before its own row, and paging would skip the threads in between.
  ADD CONSTRAINT threads_activity_millis_check CHECK (last_activity_at = date_trunc('milliseconds', last_activity_at));

-- Existing threads: active when created, or when their newest message came.
UPDATE threads SET last_activity_at = date_trunc('milliseconds', created_at);
UPDATE threads t SET
  message_count = s.on_path,
  last_message_at = s.newest,
  last_activity_at = date_trunc('milliseconds', greatest(t.created_at, s.newest))
FROM (
  SELECT thread_id, count(*) FILTER (WHERE on_path)::int AS on_path, max(created_at) AS newest
  FROM messages GROUP BY thread_id
) s
WHERE s.thread_id = t.id;

-- The triggers' functions are created here because the triggers need them; their current bodies
-- are threadline_messages_inserted.sql and threadline_messages_path_changed.sql in
-- src/history/schema/functions/, applied after the migrations.
--
-- Why triggers on messages, not code in the turn path: every writer of messages (the chat turn's
-- begin-turn and store-answer steps, regenerate, bulk seeding, whatever rewrites them later) keeps
-- the list current without knowing about it, in the same transaction as its write. Deriving the
-- values in the list query instead would read every listed thread's messages (max(created_at) and
-- count per thread, a cost that grows with the threads' length) and could not be served by one
-- index in list order. Statement-level triggers with transition tables: a bulk insert updates each
-- thread once, not once per row. Messages are never deleted on their own (only with their thread),
-- so no delete trigger is needed.
CREATE FUNCTION threadline_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE threads t SET
    message_count = t.message_count + n.on_path,
    last_message_at = greatest(t.last_message_at, n.newest),
    last_activity_at = greatest(t.last_activity_at, date_trunc('milliseconds', n.newest))
  FROM (
    SELECT thread_id, count(*) FILTER (WHERE on_path)::int AS on_path, max(created_at) AS newest
    FROM inserted GROUP BY thread_id
  ) n
  WHERE t.id = n.thread_id;
  RETURN NULL;
END $$;

CREATE TRIGGER messages_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION threadline_messages_inserted();

-- Regenerating takes messages off the current path (and a late answer may come back onto it).
CREATE FUNCTION threadline_messages_path_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE threads t SET message_count = t.message_count + d.delta
  FROM (
    SELECT n.thread_id, sum(CASE WHEN n.on_path THEN 1 ELSE 0 END - CASE WHEN o.on_path THEN 1 ELSE 0 END)::int AS delta
    FROM updated_new n JOIN updated_old o ON o.id = n.id
    WHERE n.on_path IS DISTINCT FROM o.on_path
    GROUP BY n.thread_id
  ) d
  WHERE t.id = d.thread_id AND d.delta <> 0;
  RETURN NULL;
END $$;

CREATE TRIGGER messages_path_changed AFTER UPDATE ON messages
  REFERENCING OLD TABLE AS updated_old NEW TABLE AS updated_new
  FOR EACH STATEMENT EXECUTE FUNCTION threadline_messages_path_changed();

-- The list order of one user's threads: GET /api/threads is a range scan of this index that stops
-- after one page, whatever the number of threads.
CREATE INDEX threads_user_activity_idx ON threads (user_id, last_activity_at DESC, id DESC);
-- Retention finds the threads inactive since a cutoff, across users, oldest first.
CREATE INDEX threads_activity_idx ON threads (last_activity_at, id);
-- The list's latest turn status per thread is one backward probe per listed thread of
-- turns_thread_idx (thread_id, started_at), created by migration 0006.
