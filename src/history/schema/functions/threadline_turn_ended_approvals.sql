-- Trigger turns_ended_approvals (BEFORE UPDATE OF status ON turns, for each row; migration 0024): a
-- turn that fails or is cancelled while a tool call awaits the owner's decision can no longer run
-- it, so the approval is recorded denied (decidedBy turn-ended; once past its expiry, expired by
-- threadline_settle_approval) with tool.approval.decided (or .expired) in the log, in the
-- statement that ends the turn. Without it the approval stayed pending, offered to the owner, and
-- every decision was refused (turn_ended). A trigger because a turn fails or is cancelled from four
-- statements (onFailure, cancellation, abandoned by a later turn's wait, the lost-run reconciler);
-- a stop denies in threadline_stop_turn (decidedBy stop). BEFORE, so these log entries precede the
-- turn.failed / turn.cancelled and stream.ended that the same statement appends after the update.
CREATE OR REPLACE FUNCTION threadline_turn_ended_approvals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_expired uuid;
BEGIN
  -- Another run answering the same message (a regenerate) still may run the calls. Two runs of a
  -- message ending at once would each see the other still running and both spare the calls: the
  -- message's row is locked first, so the second waits and then sees the first one's end.
  PERFORM 1 FROM messages m WHERE m.id = NEW.message_id FOR NO KEY UPDATE;
  IF EXISTS (SELECT 1 FROM turns r WHERE r.message_id = NEW.message_id AND r.status = 'running' AND r.run_id <> NEW.run_id) THEN
    RETURN NEW;
  END IF;
  -- Past its expiry: recorded expired, as the turn's own check records it.
  FOR v_expired IN
    SELECT a.id FROM tool_approvals a
    WHERE a.thread_id = NEW.thread_id AND a.message_id = NEW.message_id AND a.status = 'pending' AND a.expires_at <= now()
  LOOP
    PERFORM threadline_settle_approval(v_expired, false);
  END LOOP;
  PERFORM threadline_record_decisions(ARRAY(
      SELECT a.id FROM tool_approvals a
      WHERE a.thread_id = NEW.thread_id AND a.message_id = NEW.message_id AND a.status = 'pending'),
    NEW.run_id, 'denied', 'turn-ended', 'the turn ' || CASE NEW.status WHEN 'cancelled' THEN 'was cancelled' ELSE 'failed' END,
    NULL);
  RETURN NEW;
END $$;
