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
--
-- The turn's own writers (threadline_begin_turn, threadline_insert_answer) set these values in the
-- UPDATE of the thread they make anyway (last_seq), and the trigger skips their insert (WHEN,
-- migration 0025): a second update of the row would write a second version of it and enter it in
-- the thread list's indexes again, every turn. The contract, kept by both: a writer sets
-- threadline.writer_thread (transaction-local) to its thread's id right before an INSERT of rows
-- of that thread only and clears it right after (an error in between aborts the (sub)transaction,
-- which undoes the setting); holding the thread's row lock, it gives each row the thread's owner
-- and adds exactly what this function would: the inserted on-path rows to message_count, and
-- now() (their created_at) to last_message_at and last_activity_at when it inserted any.
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
