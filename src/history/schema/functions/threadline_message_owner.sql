-- Trigger messages_owner (BEFORE INSERT ON messages, for each row; migration 0009): the owner,
-- copied from the thread so the search index can filter by it. A thread never changes owner, so
-- the copy cannot go stale; the trigger fills it on every insert, whatever owner the writer names,
-- except an insert of the turn's writers, which fill it from the thread's row they hold locked
-- (threadline.writer_thread, migration 0025: threadline_messages_inserted.sql).
CREATE OR REPLACE FUNCTION threadline_message_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.user_id := (SELECT t.user_id FROM threads t WHERE t.id = NEW.thread_id);
  RETURN NEW;
END
$$;
