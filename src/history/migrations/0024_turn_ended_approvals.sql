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
  v_approval tool_approvals%ROWTYPE;
  v_event text;
BEGIN
  FOR v_approval IN
    UPDATE tool_approvals a SET
      status = CASE WHEN a.expires_at <= now() THEN 'expired' ELSE 'denied' END,
      decided_by = CASE WHEN a.expires_at <= now() THEN 'expiry' ELSE 'turn-ended' END,
      reason = CASE WHEN a.expires_at <= now() THEN NULL
        ELSE 'the turn ' || CASE NEW.status WHEN 'cancelled' THEN 'was cancelled' ELSE 'failed' END END,
      decided_at = now()
      WHERE a.thread_id = NEW.thread_id AND a.message_id = NEW.message_id AND a.status = 'pending'
        -- Another run answering the same message (a regenerate) still may run the call.
        AND NOT EXISTS (SELECT 1 FROM turns r
          WHERE r.message_id = NEW.message_id AND r.status = 'running' AND r.run_id <> NEW.run_id)
      RETURNING a.*
  LOOP
    v_event := CASE v_approval.status WHEN 'expired' THEN 'tool.approval.expired' ELSE 'tool.approval.decided' END;
    PERFORM threadline_append_events(NEW.thread_id, NEW.run_id, 0, jsonb_build_array(jsonb_build_object(
      'key', v_event || '.' || v_approval.id, 'event', v_event, 'data', threadline_approval_event(v_approval))));
  END LOOP;
  RETURN NEW;
END $$;

CREATE TRIGGER turns_ended_approvals BEFORE UPDATE OF status ON turns
  FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status IN ('failed', 'cancelled'))
  EXECUTE FUNCTION threadline_turn_ended_approvals();
