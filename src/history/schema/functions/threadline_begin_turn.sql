-- history.append-user-message, one statement: checks the thread's owner (creating a new thread,
-- named after its first message, only once nothing refuses), stores the user message once under
-- the client's id, and records the run as a turn on it. Returns the stored text (the words the
-- model answers), whether an unfinished turn is ahead of this one (turn_ahead, below) and, for a
-- turn with none ahead, its history window when asked (window_rows and the rest, at the end).
--
-- A new user message follows the last user message on the path (parent_id, with the variant of
-- its answer then current: parent_variant). An edit (a chat turn whose context names the message
-- it edits, p_context.edits) stores the new message as that message's sibling instead: the edited
-- message and everything after it leave the current path (kept whole, a branch to switch back
-- to), so the new message is answered with the history before the edited one; the log says
-- thread.path.changed in the same transaction.
--
-- p_busy is the chat message's busy policy (src/history/busy.ts): 'reject' refuses a new message
-- while another turn of the thread is unfinished, before anything is written, raising SQLSTATE
-- TL409 with the unfinished turn's run and message ids as JSON in the DETAIL (the refusal names
-- the turn, which the result row has no columns for). A message already stored (a retried step, a
-- re-delivered event) is never refused: it was accepted; a run refused once is refused again (the
-- row src/history/busy.ts logs for its refusal). The other policies change nothing here.
--
-- p_event_time is when the run's event was sent (Inngest's event.ts): a chat message sent before
-- its user's erasure (user_erasures, migration 0034) is not stored, refused as 'user_erased'
-- before anything is written, so a run that began after the erasure brings no erased words back.
-- The erasure (src/history/users.ts) holds the user's erasure lock exclusively; this takes it
-- shared only to create a thread, so a new thread is either committed before the erasure deletes
-- the user's threads or created after it, seeing its row. An existing thread needs no lock: the
-- erasure deletes it under its row lock (then its tombstone refuses it), or it was created after
-- the erasure committed (a client-made thread id used again), whose row this then reads.
--
-- The history steps that write (this one, threadline_store_answer, threadline_stop_turn) are one
-- statement each: a PL/pgSQL function is one round trip and one atomic statement, and, unlike a
-- data-modifying CTE, each of its queries sees what committed before the thread's row lock was
-- granted (READ COMMITTED takes a snapshot per query in a volatile function). Refusals are
-- returned, not raised, and are decided before any write.
CREATE OR REPLACE FUNCTION threadline_begin_turn(
  p_thread_id uuid, p_user_id text, p_message_id uuid, p_text text, p_client_timestamp timestamptz,
  p_run_id text, p_kind text, p_event_id text, p_context jsonb, p_busy text DEFAULT 'enqueue',
  p_read_window boolean DEFAULT false, p_earlier_users bigint DEFAULT NULL, p_preserve_system boolean DEFAULT false,
  p_count_unsummarized integer DEFAULT 0, p_event_time timestamptz DEFAULT NULL
) RETURNS TABLE (
  refusal text, message_seq bigint, stored_text text, variant integer, status text, skip_reason text, turn_ahead boolean,
  window_rows json, window_start bigint, summary_through bigint, summary_text text, summary_updated_at timestamptz,
  unsummarized integer
)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_message messages%ROWTYPE;
  v_turn turns%ROWTYPE;
  v_current integer;
  v_max integer;
  v_max_turn integer;
  v_earlier integer;
  v_edits uuid := (p_context ->> 'edits')::uuid;
  v_edited messages%ROWTYPE;
  v_parent_id uuid;
  v_parent_variant integer;
  v_detached integer;
  v_version bigint;
  v_busy record;
  v_refused jsonb;
  v_stored_now boolean := false;
  v_ends_stream boolean := false;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
  SELECT * INTO v_message FROM messages m WHERE m.id = p_message_id;

  IF v_owner IS NULL THEN
    -- A chat message creates an unknown thread (AgentKit's createThread upserts: clients such as
    -- useAgent make thread ids themselves); a new thread without a given id is named after its
    -- first message, so a re-run of the event finds the same thread. A regenerate needs a thread.
    IF p_kind <> 'chat' OR v_edits IS NOT NULL THEN
      refusal := 'thread_not_found'; RETURN NEXT; RETURN;
    END IF;
    -- A concurrent first run of the same message may create the thread and the message first,
    -- committing before the insert below or between the two reads above (each statement reads
    -- what is committed when it starts): then lock what it created and read the message again.
    IF v_message.id IS NULL THEN
      -- A message sent before its user's erasure creates no thread (see above).
      PERFORM pg_advisory_xact_lock_shared(hashtext('threadline.user_erasure'), hashtext(p_user_id));
      IF threadline_user_erased_after(p_user_id, p_event_time) THEN
        refusal := 'user_erased'; RETURN NEXT; RETURN;
      END IF;
      INSERT INTO threads (id, user_id) VALUES (p_thread_id, p_user_id) ON CONFLICT (id) DO NOTHING;
    END IF;
    SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR UPDATE;
    IF v_owner IS NULL THEN
      -- The id names a message of another thread: this one is not created.
      refusal := 'message_in_use'; RETURN NEXT; RETURN;
    END IF;
    SELECT * INTO v_message FROM messages m WHERE m.id = p_message_id;
  END IF;
  IF v_owner <> p_user_id THEN
    refusal := 'thread_not_owned'; RETURN NEXT; RETURN;
  END IF;
  -- A run whose cancellation was logged before it began (message.cancelled: turns-sql.ts
  -- logUnbegun, under this thread's share lock, so seen here once it committed) never begins: its
  -- first step, executing when the cancellation came, stores nothing after the streams that
  -- followed the message were told it was cancelled. A replay of the run is a new run.
  IF EXISTS (SELECT 1 FROM thread_events x WHERE x.run_id = p_run_id AND x.attempt = 0 AND x.key = 'message.cancelled') THEN
    refusal := 'run_cancelled'; RETURN NEXT; RETURN;
  END IF;

  IF v_message.id IS NOT NULL AND (v_message.thread_id <> p_thread_id OR v_message.kind <> 'user') THEN
    refusal := 'message_in_use'; RETURN NEXT; RETURN;
  END IF;
  -- A chat message re-sent under its id must carry the same words; a regenerate answers the stored ones.
  IF v_message.id IS NOT NULL AND p_kind = 'chat' AND v_message.content ->> 'text' IS DISTINCT FROM p_text THEN
    refusal := 'message_text_differs'; RETURN NEXT; RETURN;
  END IF;
  IF v_message.id IS NULL THEN
    IF p_kind = 'regenerate' THEN
      refusal := 'message_not_found'; RETURN NEXT; RETURN;
    END IF;
    -- Nor a message deleted with its branch (message_tombstones, migration 0040): its event run
    -- again (a replay, a re-delivery) does not bring it back.
    IF EXISTS (SELECT 1 FROM message_tombstones d WHERE d.thread_id = p_thread_id AND d.message_id = p_message_id) THEN
      refusal := 'message_deleted'; RETURN NEXT; RETURN;
    END IF;
    -- Nor is it stored in a thread created after the erasure (see above; a thread created just
    -- now was checked under the lock, and is checked again here, at the price of one lookup).
    IF threadline_user_erased_after(p_user_id, p_event_time) THEN
      refusal := 'user_erased'; RETURN NEXT; RETURN;
    END IF;
    IF p_busy = 'reject' THEN
      -- A run that refused its message once (its message.refused row, logged by busy.ts after this
      -- raised) refuses it again, naming the same turn: asking again (a step executed again) never
      -- turns a logged refusal into a turn.
      SELECT x.data -> 'runningTurn' INTO v_refused FROM thread_events x
        WHERE x.run_id = p_run_id AND x.attempt = 0 AND x.key = 'message.refused';
      IF v_refused IS NOT NULL THEN
        RAISE EXCEPTION 'thread % was answering message %', p_thread_id, v_refused ->> 'messageId' USING ERRCODE = 'TL409',
          DETAIL = v_refused::text;
      END IF;
      SELECT t.run_id, t.message_id INTO v_busy FROM turns t JOIN messages m ON m.id = t.message_id
        WHERE t.thread_id = p_thread_id AND threadline_turn_unfinished(t.status)
        ORDER BY m.on_path DESC, m.seq, t.started_at, t.run_id LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'thread % is answering message %', p_thread_id, v_busy.message_id USING ERRCODE = 'TL409',
          DETAIL = jsonb_build_object('runId', v_busy.run_id, 'messageId', v_busy.message_id)::text;
      END IF;
    END IF;
    IF v_edits IS NOT NULL THEN
      -- By its key alone (threadline_store_answer says why), its thread and kind checked after.
      SELECT * INTO v_edited FROM messages m WHERE m.id = v_edits;
      IF v_edited.id IS NULL OR v_edited.thread_id <> p_thread_id OR v_edited.kind <> 'user' THEN
        refusal := 'edited_not_found'; RETURN NEXT; RETURN;
      END IF;
      IF NOT v_edited.on_path THEN
        refusal := 'edited_not_on_path'; RETURN NEXT; RETURN;
      END IF;
      v_parent_id := v_edited.parent_id;
      v_parent_variant := v_edited.parent_variant;
      UPDATE messages m SET on_path = false WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq >= v_edited.seq;
      GET DIAGNOSTICS v_detached = ROW_COUNT;
      -- No summary covers a detached turn: one that reaches the edited message goes.
      DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= v_edited.seq;
    ELSE
      SELECT m.id, (SELECT max(a.variant) FROM messages a WHERE a.answers = m.id AND a.on_path) INTO v_parent_id, v_parent_variant
        FROM messages m WHERE m.thread_id = p_thread_id AND m.on_path AND m.kind = 'user' ORDER BY m.seq DESC LIMIT 1;
      v_detached := 0;
    END IF;
    -- With the list values of the message inserted below (one on-path row, created now()): the
    -- thread's one update here (threadline_messages_inserted.sql says why and skips it).
    UPDATE threads t SET last_seq = t.last_seq + 1, path_version = t.path_version + CASE WHEN v_detached > 0 THEN 1 ELSE 0 END,
        updated_at = now(), message_count = t.message_count + 1, last_message_at = greatest(t.last_message_at, now()),
        last_activity_at = greatest(t.last_activity_at, date_trunc('milliseconds', now()))
      WHERE t.id = p_thread_id
      RETURNING t.last_seq, t.path_version INTO v_message.seq, v_version;
    IF v_detached > 0 THEN
      PERFORM threadline_append_events(p_thread_id, NULL, 0, jsonb_build_array(jsonb_build_object(
        'key', 'thread.path.changed', 'event', 'thread.path.changed',
        'data', jsonb_build_object('messageId', p_message_id, 'pathVersion', v_version))));
    END IF;
    PERFORM set_config('threadline.writer_thread', p_thread_id::text, true);
    INSERT INTO messages (id, thread_id, user_id, seq, turn_seq, kind, agent_name, content, client_timestamp, parent_id, parent_variant)
      VALUES (p_message_id, p_thread_id, v_owner, v_message.seq, v_message.seq, 'user', 'user', jsonb_build_object('text', p_text), p_client_timestamp,
              v_parent_id, v_parent_variant)
      RETURNING * INTO v_message;
    PERFORM set_config('threadline.writer_thread', '', true);
    v_stored_now := true;
  END IF;

  -- The same run asking again (a retried step) gets the same answer back. A message stored just
  -- now has neither: a turn's row names its message (a run answers one message), as does an answer.
  IF NOT v_stored_now THEN
    SELECT * INTO v_turn FROM turns t WHERE t.run_id = p_run_id;
  END IF;
  IF v_turn.run_id IS NOT NULL THEN
    variant := v_turn.variant;
    status := CASE WHEN v_turn.status = 'skipped' THEN 'skipped' ELSE 'running' END;
    skip_reason := CASE WHEN v_turn.status = 'skipped' THEN 'already recorded as skipped' END;
  ELSE
    -- Which variant the run writes, or why it writes nothing:
    -- - a chat turn answers a message once; running its event again (a re-run) is a recorded no-op,
    --   and two chat runs on an unanswered message share the first variant (the first to store wins);
    -- - a regenerate writes a new variant, past any variant a running or completed turn holds, so two
    --   regenerates started together each keep their answer; running the same regenerate event again
    --   reuses its variant (a failed turn stored nothing, so its number may be used again).
    IF v_stored_now THEN
      v_current := NULL; v_max := 0;
    ELSE
      SELECT max(m.variant) FILTER (WHERE m.on_path), coalesce(max(m.variant), 0) INTO v_current, v_max
        FROM messages m WHERE m.answers = p_message_id;
    END IF;
    variant := NULL;
    skip_reason := NULL;
    IF NOT v_message.on_path THEN
      variant := v_max; status := 'skipped'; skip_reason := 'the message is no longer on the thread''s current path';
      -- A regenerate's first run (no turn of its event yet) whose message left the path after
      -- its run loaded it (history.load-message refuses one already off it): the client that asked
      -- follows this run, so its stream ends here, once. A rerun of the event logs nothing (the
      -- re-run rule: its stream was the first run's).
      v_ends_stream := p_kind = 'regenerate' AND NOT EXISTS (SELECT 1 FROM turns t
        WHERE p_event_id IS NOT NULL AND t.event_id = p_event_id AND t.message_id = p_message_id);
    ELSIF p_kind = 'chat' THEN
      IF v_current IS NOT NULL THEN
        variant := v_current; status := 'skipped'; skip_reason := 'the message already has an answer: regenerate it for a new one';
      ELSE
        variant := v_max + 1; status := 'running';
      END IF;
    ELSE
      SELECT t.variant INTO v_earlier FROM turns t
        WHERE p_event_id IS NOT NULL AND t.event_id = p_event_id AND t.message_id = p_message_id
        ORDER BY t.started_at LIMIT 1;
      IF v_earlier IS NULL THEN
        SELECT coalesce(max(t.variant), 0) INTO v_max_turn FROM turns t
          WHERE t.message_id = p_message_id AND t.status IN ('running', 'completed');
        variant := greatest(v_max, v_max_turn) + 1; status := 'running';
      ELSIF EXISTS (SELECT 1 FROM messages m WHERE m.answers = p_message_id AND m.variant = v_earlier) THEN
        variant := v_earlier; status := 'skipped'; skip_reason := 'this regenerate event already produced its answer';
      ELSE
        variant := v_earlier; status := 'running';
      END IF;
    END IF;

    -- A regenerate records how far the thread went when it began (regeneratedThroughSeq): its
    -- answer replaces the turns after its message up to there, not the messages sent while it ran
    -- (threadline_store_answer).
    INSERT INTO turns (run_id, thread_id, message_id, kind, event_id, variant, status, context, finished_at)
      VALUES (p_run_id, p_thread_id, p_message_id, p_kind, p_event_id, variant, status,
              CASE WHEN p_kind = 'regenerate' THEN coalesce(p_context, '{}'::jsonb) || jsonb_build_object(
                'regeneratedThroughSeq', (SELECT t.last_seq FROM threads t WHERE t.id = p_thread_id))
              ELSE p_context END,
              CASE WHEN status = 'running' THEN NULL ELSE now() END)
      RETURNING * INTO v_turn;
    IF v_ends_stream THEN
      PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(
        jsonb_build_object('key', 'turn.skipped', 'event', 'turn.skipped',
          'data', jsonb_build_object('runId', p_run_id, 'reason', skip_reason)),
        jsonb_build_object('key', 'stream.ended', 'event', 'stream.ended',
          'data', jsonb_build_object('scope', 'network', 'status', 'skipped', 'runId', p_run_id, 'messageId', p_message_id))));
    END IF;
  END IF;

  -- turn_ahead: whether an unfinished turn is ahead of this one, by the order of
  -- history.find-earlier-turn (src/history/turns-sql.ts: message seq, then started_at, run_id).
  -- False lets a turn on an idle thread skip that lookup and go straight to its history. Made
  -- here it is race-free: under the thread's row lock, which every turn takes to begin and to
  -- store its answer (threadline_store_answer), it sees every turn begun before this one as of
  -- now. A turn begun later is behind this one (a later seq, or a later run of the same message),
  -- except a regenerate of an earlier message, which the separate lookup, made a moment earlier,
  -- would miss just the same. A turn that does not run (skipped) waits for nothing.
  turn_ahead := status = 'running' AND EXISTS (
    SELECT 1 FROM turns t JOIN messages m ON m.id = t.message_id AND m.on_path
    WHERE t.thread_id = p_thread_id AND t.status = 'running' AND t.run_id <> p_run_id
      AND (m.seq < v_message.seq
        OR (m.seq = v_message.seq AND (t.started_at, t.run_id) < (v_turn.started_at, v_turn.run_id))));
  -- The history window (threadline_history_window; p_earlier_users, p_preserve_system and
  -- p_count_unsummarized are its arguments), when the caller asks (p_read_window: its policy reads
  -- one) and the turn runs with no turn ahead: what history.get would read next, read here after
  -- the thread's lock, so the answer of an earlier turn, stored under that lock, is in it. The turn
  -- then takes no history.get step. A turn with a turn ahead reads after waiting for it, as before.
  IF p_read_window AND status = 'running' AND NOT turn_ahead THEN
    SELECT w.rows, w.window_start, w.covers_through_turn_seq, w.summary_text, w.summary_updated_at, w.unsummarized
      INTO window_rows, window_start, summary_through, summary_text, summary_updated_at, unsummarized
      FROM threadline_history_window(p_thread_id, v_message.seq, p_earlier_users, p_preserve_system, p_count_unsummarized) w;
  END IF;
  refusal := NULL;
  message_seq := v_message.seq;
  stored_text := v_message.content ->> 'text';
  RETURN NEXT;
END
$$;
