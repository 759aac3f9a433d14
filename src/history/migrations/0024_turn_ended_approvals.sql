-- Up Migration

-- A tool call's approval ends with its turn: a turn that fails or is cancelled while awaiting a
-- decision records the approval denied by `turn-ended` (threadline_turn_ended_approvals: its file
-- says why and how). Approvals left pending by turns that ended before this migration are settled
-- here the same way, without log entries (those turns' streams have ended).
ALTER TABLE tool_approvals DROP CONSTRAINT tool_approvals_decided_by_check,
  ADD CONSTRAINT tool_approvals_decided_by_check CHECK (decided_by IN ('user', 'stop', 'expiry', 'turn-ended'));

UPDATE tool_approvals a SET
  status = CASE WHEN a.expires_at <= now() THEN 'expired' ELSE 'denied' END,
  decided_by = CASE WHEN a.expires_at <= now() THEN 'expiry' ELSE 'turn-ended' END,
  reason = CASE WHEN a.expires_at <= now() THEN NULL
    ELSE 'the turn ' || CASE u.status WHEN 'cancelled' THEN 'was cancelled' ELSE 'failed' END END,
  decided_at = now()
  FROM turns u
  WHERE a.status = 'pending' AND u.thread_id = a.thread_id AND u.message_id = a.message_id
    AND u.status IN ('failed', 'cancelled')
    AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.message_id = a.message_id AND r.status = 'running');

CREATE FUNCTION threadline_turn_ended_approvals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_expired uuid;
  v_approval tool_approvals%ROWTYPE;
BEGIN
  -- Another run answering the same message (a regenerate) still may run the calls.
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
  FOR v_approval IN
    UPDATE tool_approvals a SET status = 'denied', decided_by = 'turn-ended',
      reason = 'the turn ' || CASE NEW.status WHEN 'cancelled' THEN 'was cancelled' ELSE 'failed' END, decided_at = now()
      WHERE a.thread_id = NEW.thread_id AND a.message_id = NEW.message_id AND a.status = 'pending'
      RETURNING a.*
  LOOP
    PERFORM threadline_append_events(NEW.thread_id, NEW.run_id, 0, jsonb_build_array(jsonb_build_object(
      'key', 'tool.approval.decided.' || v_approval.id, 'event', 'tool.approval.decided',
      'data', threadline_approval_event(v_approval))));
  END LOOP;
  RETURN NEW;
END $$;

CREATE TRIGGER turns_ended_approvals BEFORE UPDATE OF status ON turns
  FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status IN ('failed', 'cancelled'))
  EXECUTE FUNCTION threadline_turn_ended_approvals();
