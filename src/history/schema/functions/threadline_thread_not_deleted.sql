-- Trigger threads_not_deleted (BEFORE INSERT ON threads, for each row; migration 0016): refuses to
-- create a thread under a tombstoned id, whichever statement tries (the turn's first statement,
-- threadline_begin_turn, or the thread API's create). Raised, with its own SQLSTATE (TL410),
-- rather than returned: a trigger covers every writer of threads, including functions replaced
-- later. The statement writes nothing. A writer that waited for the deleting transaction's row
-- lock runs this after it committed: its query sees the tombstone (READ COMMITTED takes a snapshot
-- per query in a volatile function).
CREATE OR REPLACE FUNCTION threadline_thread_not_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM thread_tombstones d WHERE d.thread_id = NEW.id) THEN
    RAISE EXCEPTION 'thread % was deleted', NEW.id USING ERRCODE = 'TL410';
  END IF;
  RETURN NEW;
END
$$;
