-- Whether the failure (or cancellation) of a run that began no turn is logged on thread
-- p_thread_id for user p_user_id (src/history/turns-sql.ts logUnbegun): when the thread is the user's, or when
-- the run would have created it and did not get that far, after creating it (empty) here, so the
-- streams following its first message end. p_sent is when that chat message was sent (Inngest's
-- event.ts); NULL for a run that creates no thread (a regenerate, an edit), and then nothing is
-- created. Created as threadline_begin_turn would have created it, never otherwise:
-- - not under a deleted thread's id (its tombstone; should the thread be created and deleted
--   after the look, threads_not_deleted refuses the insert and the caller's retry finds it);
-- - not when the message id is another thread's message (the run refused it as message_in_use);
-- - not for a user erased after p_sent: under the user's erasure lock, taken shared as
--   threadline_begin_turn takes it, so the erasure (src/history/users.ts) either deletes the
--   thread once this commits or committed before, and its row is read here after the lock. The
--   thread's id is then tombstoned instead, as the erasure's deletions are.
-- Another user's thread is never the user's: false.
CREATE OR REPLACE FUNCTION threadline_unbegun_failure_thread(
  p_thread_id uuid, p_user_id text, p_message_id uuid, p_sent timestamptz
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id;
  IF v_owner IS NULL AND p_sent IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM thread_tombstones d WHERE d.thread_id = p_thread_id)
      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = p_message_id) THEN
    PERFORM pg_advisory_xact_lock_shared(hashtext('threadline.user_erasure'), hashtext(p_user_id));
    IF threadline_user_erased_after(p_user_id, p_sent) THEN
      -- The erasure deleted the user's threads; this one, never created, is told deleted as they
      -- were (a tombstone, and its live streams woken), so a stream following its first message ends.
      INSERT INTO thread_tombstones (thread_id) VALUES (p_thread_id) ON CONFLICT (thread_id) DO NOTHING;
      PERFORM pg_notify('threadline_events', p_thread_id::text || ' deleted');
      RETURN false;
    END IF;
    INSERT INTO threads (id, user_id) VALUES (p_thread_id, p_user_id) ON CONFLICT (id) DO NOTHING;
    SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id;
  END IF;
  RETURN v_owner IS NOT DISTINCT FROM p_user_id;
END
$$;
