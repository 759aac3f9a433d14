-- Up Migration

-- The turn's writers of messages (threadline_begin_turn, threadline_insert_answer) hold their
-- thread's row lock, fill each row's owner from that row, and bring the thread's list values
-- current in their own UPDATE of it: one row version and one set of index entries of the thread
-- per statement, not two (threads' list and activity indexes make every update of it non-HOT).
-- They name the thread in the transaction-local setting threadline.writer_thread around their
-- INSERT only, and both triggers on inserted messages skip such an insert; any other writer meets
-- them as before. The contract: threadline_messages_inserted.sql.
DROP TRIGGER messages_owner ON messages;
CREATE TRIGGER messages_owner BEFORE INSERT ON messages FOR EACH ROW
  WHEN (NEW.thread_id::text IS DISTINCT FROM current_setting('threadline.writer_thread', true))
  EXECUTE FUNCTION threadline_message_owner();

DROP TRIGGER messages_inserted ON messages;
CREATE TRIGGER messages_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT WHEN (coalesce(current_setting('threadline.writer_thread', true), '') = '')
  EXECUTE FUNCTION threadline_messages_inserted();

-- Indexes no query reads, entered on every write of their rows: threads by (user_id, updated_at)
-- (a user's threads are listed and deleted through threads_user_activity_idx; nothing orders by
-- updated_at, and without it an update of a thread's title or path is HOT), and turns by event_id
-- (its one lookup, a regenerate re-run in threadline_begin_turn, names the message too:
-- turns_message_idx).
DROP INDEX threads_user_idx;
DROP INDEX turns_event_idx;
