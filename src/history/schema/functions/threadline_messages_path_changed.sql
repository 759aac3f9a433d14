-- Trigger messages_path_changed (AFTER UPDATE ON messages, for each statement; migration 0008):
-- regenerating takes messages off the current path (and a late answer may come back onto it), so
-- a thread's message_count follows. Why a trigger: threadline_messages_inserted.
CREATE OR REPLACE FUNCTION threadline_messages_path_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
