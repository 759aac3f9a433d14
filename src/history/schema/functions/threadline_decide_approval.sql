-- POST /api/threads/:threadId/approvals/:approvalId, in one statement: the owner's decision
-- (p_status 'approved' or 'denied') on a pending approval is recorded with tool.approval.decided in
-- the log, before the route sends the event that wakes the turn. Refusals (nothing written unless
-- said): 'thread_not_found' (missing, or another user's), 'approval_not_found', 'expired' (past its
-- expiry: recorded expired now if still pending, with tool.approval.expired), 'turn_ended' (the turn
-- no longer runs: stopped, cancelled, failed), 'decided' (decided before, by another request). The
-- same request (p_request_id) sent again gets the recorded decision and no refusal. The approval row
-- is locked, so of two decisions at once one wins and the other sees it.
CREATE OR REPLACE FUNCTION threadline_decide_approval(p_thread_id uuid, p_user_id text, p_id uuid, p_status text,
  p_reason text, p_request_id text)
RETURNS TABLE (refusal text, approval tool_approvals)
LANGUAGE plpgsql AS $$
DECLARE
  v_owner text;
  v_row tool_approvals%ROWTYPE;
BEGIN
  SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread_id FOR KEY SHARE;
  IF v_owner IS NULL OR v_owner <> p_user_id THEN
    RETURN QUERY SELECT 'thread_not_found', NULL::tool_approvals; RETURN;
  END IF;
  SELECT * INTO v_row FROM tool_approvals a WHERE a.id = p_id AND a.thread_id = p_thread_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'approval_not_found', NULL::tool_approvals; RETURN;
  END IF;
  IF v_row.status <> 'pending' THEN
    IF p_request_id IS NOT NULL AND v_row.request_id = p_request_id THEN
      RETURN QUERY SELECT NULL::text, v_row; RETURN;
    END IF;
    RETURN QUERY SELECT CASE WHEN v_row.status = 'expired' THEN 'expired' ELSE 'decided' END, v_row; RETURN;
  END IF;
  IF v_row.expires_at <= now() THEN
    SELECT * INTO v_row FROM threadline_record_decisions(ARRAY[p_id], v_row.run_id, 'expired', 'expiry', NULL, NULL);
    RETURN QUERY SELECT 'expired', v_row; RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM turns u WHERE u.message_id = v_row.message_id AND u.status = 'running') THEN
    RETURN QUERY SELECT 'turn_ended', v_row; RETURN;
  END IF;
  SELECT * INTO v_row FROM threadline_record_decisions(ARRAY[p_id], v_row.run_id, p_status, 'user', p_reason, p_request_id);
  RETURN QUERY SELECT NULL::text, v_row;
END
$$;
