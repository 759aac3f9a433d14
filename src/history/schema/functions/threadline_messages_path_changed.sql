-- Trigger messages_path_changed (AFTER UPDATE ON messages, for each statement; migration 0008):
-- regenerating, editing and switching branches take messages off the current path (and bring them
-- back onto it), so a thread's message_count follows. Why a trigger: threadline_messages_inserted.
CREATE OR REPLACE FUNCTION threadline_messages_path_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Each row counts +1 on the path after and -1 before: sums, no join of the transition tables
  -- (they have no index: joining them by id was quadratic, 10 s for a 10,000-row detach).
  UPDATE threads t SET message_count = t.message_count + d.delta
  FROM (
    SELECT c.thread_id, sum(c.change)::int AS delta FROM (
      SELECT n.thread_id, CASE WHEN n.on_path THEN 1 ELSE 0 END AS change FROM updated_new n
      UNION ALL
      SELECT o.thread_id, CASE WHEN o.on_path THEN -1 ELSE 0 END FROM updated_old o
    ) c
    GROUP BY c.thread_id
  ) d
  WHERE t.id = d.thread_id AND d.delta <> 0;
  RETURN NULL;
END $$;
