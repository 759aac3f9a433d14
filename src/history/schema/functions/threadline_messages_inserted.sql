-- Trigger messages_inserted (AFTER INSERT ON messages, for each statement; migration 0008): keeps
-- a thread's list values (message_count, last_message_at, last_activity_at) current.
--
-- Why triggers on messages, not code in the turn path: every writer of messages (the chat turn's
-- begin-turn and store-answer steps, regenerate, bulk seeding, whatever rewrites them later) keeps
-- the list current without knowing about it, in the same transaction as its write. Deriving the
-- values in the list query instead would read every listed thread's messages (max(created_at) and
-- count per thread, a cost that grows with the threads' length) and could not be served by one
-- index in list order. Statement-level triggers with transition tables: a bulk insert updates each
-- thread once, not once per row. Messages are never deleted on their own (only with their thread),
-- so no delete trigger is needed.
CREATE OR REPLACE FUNCTION threadline_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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
