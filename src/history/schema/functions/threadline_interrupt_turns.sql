-- history.interrupt-turns (busy policy interrupt or rollback, src/history/busy.ts), in one statement
-- under the thread's lock: run p_run_id's new message stops the thread's turns ahead of it, given
-- as p_turns [{runId, resultId}] (found by the step before; resultId: the id the stopped run
-- would have given its answer). Each still unfinished is stopped as POST …/stop stops it
-- (threadline_stop_turn: what it streamed is stored as its answer, marked stopped; turn.stopped
-- and stream.ended in its log). With p_rollback, the turn's user message and every answer to it
-- (the partial one too) then leave the current path, as a regenerate detaches rows
-- (threadline_insert_answer): the thread's path_version moves on and a summary covering them is
-- dropped, so no later read (nor the new turn's history.get) sees them. A turn that finished
-- meanwhile is not stopped, but is still rolled back: the sender asked for the thread without it.
-- (A stopped regenerate is the one exception to "as the stop does": see below.)
-- Each turn gets turn.interrupted in the log, under the interrupting run (keyed per turn): a
-- retried step finds it and returns what it recorded, changing nothing. Returns one row per turn given.
CREATE OR REPLACE FUNCTION threadline_interrupt_turns(
  p_thread_id uuid, p_user_id text, p_run_id text, p_message_id uuid, p_turns jsonb, p_agent_name text, p_rollback boolean
) RETURNS TABLE (run_id text, message_id uuid, variant integer, stopped boolean, answer_stored boolean, rolled_back boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_item jsonb;
  v_stop record;
  v_turn turns%ROWTYPE;
  v_seq bigint;
  v_detached integer;
  v_logged jsonb;
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = p_thread_id AND t.user_id = p_user_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOR v_item IN SELECT x.item FROM jsonb_array_elements(p_turns) AS x(item) LOOP
    SELECT * INTO v_turn FROM turns t WHERE t.run_id = v_item ->> 'runId' AND t.thread_id = p_thread_id;
    CONTINUE WHEN NOT FOUND;
    run_id := v_turn.run_id;
    message_id := v_turn.message_id;
    variant := v_turn.variant;
    -- A retried step whose earlier attempt committed: the same answer again, from its log entry
    -- (else a turn it stopped would now read as finished, and its stop never be announced).
    SELECT x.data INTO v_logged FROM thread_events x
      WHERE x.run_id = p_run_id AND x.attempt = 0 AND x.key = 'turn.interrupted:' || v_turn.run_id;
    IF FOUND THEN
      stopped := (v_logged ->> 'stopped')::boolean;
      rolled_back := (v_logged ->> 'rolledBack')::boolean;
      answer_stored := EXISTS (SELECT 1 FROM messages m
        WHERE m.answers = v_turn.message_id AND m.variant = v_turn.variant AND m.stopped);
      RETURN NEXT;
      CONTINUE;
    END IF;
    SELECT * INTO v_stop FROM threadline_stop_turn(p_thread_id, p_user_id, v_turn.run_id, (v_item ->> 'resultId')::uuid, p_agent_name);
    -- A stopped regenerate's partial answer takes the turns after its message off the path, as its
    -- answer would: those it was to replace. One begun before it recorded regeneratedThroughSeq
    -- (threadline_insert_answer) also takes this message, sent after it began and asking to be
    -- answered next: it is put back.
    IF v_turn.kind = 'regenerate' AND v_stop.refusal IS NULL THEN
      UPDATE messages m SET on_path = true WHERE m.id = p_message_id AND NOT m.on_path;
      IF FOUND THEN
        UPDATE threads t SET path_version = t.path_version + 1 WHERE t.id = p_thread_id;
      END IF;
    END IF;
    v_detached := 0;
    IF p_rollback THEN
      SELECT m.seq INTO v_seq FROM messages m WHERE m.id = v_turn.message_id;
      UPDATE messages m SET on_path = false WHERE m.thread_id = p_thread_id AND m.on_path AND m.turn_seq = v_seq;
      GET DIAGNOSTICS v_detached = ROW_COUNT;
      IF v_detached > 0 THEN
        UPDATE threads t SET path_version = t.path_version + 1, updated_at = now() WHERE t.id = p_thread_id;
        DELETE FROM thread_summaries s WHERE s.thread_id = p_thread_id AND s.covers_through_turn_seq >= v_seq;
      END IF;
    END IF;
    stopped := v_stop.refusal IS NULL;
    answer_stored := coalesce(v_stop.stored, 0) > 0;
    rolled_back := p_rollback AND NOT EXISTS (
      SELECT 1 FROM messages m WHERE m.id = v_turn.message_id AND m.on_path);
    PERFORM threadline_append_events(p_thread_id, p_run_id, 0, jsonb_build_array(jsonb_build_object(
      'key', 'turn.interrupted:' || v_turn.run_id, 'event', 'turn.interrupted',
      'data', jsonb_build_object('runId', v_turn.run_id, 'messageId', v_turn.message_id, 'byMessageId', p_message_id,
        'stopped', stopped, 'rolledBack', rolled_back))));
    RETURN NEXT;
  END LOOP;
END
$$;
