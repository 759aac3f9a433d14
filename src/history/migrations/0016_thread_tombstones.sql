-- Up Migration

-- Deletion is final. Deleting a thread (the owner's DELETE, retention, a user's erasure, or any
-- other DELETE) leaves a tombstone: the thread id and when it was deleted, no owner and no content
-- (an erased user leaves nothing that names them). While the tombstone exists, no statement can
-- create a thread under that id again, so a queued, retried, re-delivered or replayed event of the
-- deleted thread cannot bring it back. The thread retention function prunes tombstones older than
-- THREAD_TOMBSTONE_DAYS; from then on the id may be used again (docs/data-lifecycle.md).
CREATE TABLE thread_tombstones (
  thread_id uuid PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);

-- Pruning reads the oldest tombstones first.
CREATE INDEX thread_tombstones_deleted_idx ON thread_tombstones (deleted_at);

-- The triggers' functions are created here because the triggers need them; their current bodies
-- are threadline_threads_deleted.sql and threadline_thread_not_deleted.sql in
-- src/history/schema/functions/, applied after the migrations.
--
-- One statement-level trigger sees every deletion path at once (the rows of the statement in
-- `gone`): it writes the tombstones in the deleting transaction and wakes the live streams of each
-- deleted thread (payload "<thread id> deleted": ids only, like threadline_append_events), so an
-- open stream ends with thread.deleted when the deletion commits.
CREATE FUNCTION threadline_threads_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO thread_tombstones (thread_id)
    SELECT g.id FROM gone g
    ON CONFLICT (thread_id) DO UPDATE SET deleted_at = excluded.deleted_at;
  PERFORM pg_notify('threadline_events', g.id::text || ' deleted') FROM gone g;
  RETURN NULL;
END
$$;

CREATE TRIGGER threads_deleted AFTER DELETE ON threads
  REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION threadline_threads_deleted();

-- Refuses to create a thread under a tombstoned id, whichever statement tries (the turn's first
-- statement, threadline_begin_turn, or the thread API's create). Raised, with its own SQLSTATE
-- (TL410), rather than returned: a trigger covers every writer of threads, including functions a
-- later migration replaces. The statement writes nothing. A writer that waited for the deleting
-- transaction's row lock runs this after it committed: its query sees the tombstone (READ COMMITTED
-- takes a snapshot per query in a volatile function).
CREATE FUNCTION threadline_thread_not_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM thread_tombstones d WHERE d.thread_id = NEW.id) THEN
    RAISE EXCEPTION 'thread % was deleted', NEW.id USING ERRCODE = 'TL410';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER threads_not_deleted BEFORE INSERT ON threads
  FOR EACH ROW EXECUTE FUNCTION threadline_thread_not_deleted();
