-- Trigger threads_deleted (AFTER DELETE ON threads, for each statement; migration 0016): one
-- statement-level trigger sees every deletion path at once (the rows of the statement in `gone`):
-- it writes the tombstones in the deleting transaction and wakes the live streams of each deleted
-- thread (payload "<thread id> deleted": ids only, like threadline_append_events), so an open
-- stream ends with thread.deleted when the deletion commits.
CREATE OR REPLACE FUNCTION threadline_threads_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO thread_tombstones (thread_id)
    SELECT g.id FROM gone g
    ON CONFLICT (thread_id) DO UPDATE SET deleted_at = excluded.deleted_at;
  PERFORM pg_notify('threadline_events', g.id::text || ' deleted') FROM gone g;
  RETURN NULL;
END
$$;
