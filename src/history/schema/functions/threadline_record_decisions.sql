-- The one writer of approval decisions: each approval of p_ids still pending is recorded p_status
-- ('approved', 'denied', or 'expired' by the clock) by p_decided_by, with p_reason and the deciding
-- request p_request_id (a pending row holds neither, so a NULL leaves it as it was), and logged
-- under run p_run_id: tool.approval.decided, or tool.approval.expired for an expiry. One UPDATE
-- locks and records them all before the first is logged; they are logged, and returned, in p_ids'
-- order. One no longer pending (decided by another hand meanwhile) is left out.
CREATE OR REPLACE FUNCTION threadline_record_decisions(p_ids uuid[], p_run_id text, p_status text, p_decided_by text,
  p_reason text, p_request_id text)
RETURNS SETOF tool_approvals
LANGUAGE plpgsql AS $$
DECLARE
  v_kind jsonb := CASE WHEN p_status = 'expired' THEN jsonb_build_object('event', 'tool.approval.expired')
    ELSE jsonb_build_object('event', 'tool.approval.decided') END;
  v_row tool_approvals%ROWTYPE;
BEGIN
  FOR v_row IN
    WITH decided AS (
      UPDATE tool_approvals a SET status = p_status, decided_by = p_decided_by, reason = p_reason,
        request_id = p_request_id, decided_at = now()
        WHERE a.id = ANY (p_ids) AND a.status = 'pending'
        RETURNING a.*)
    SELECT d.* FROM decided d JOIN unnest(p_ids) WITH ORDINALITY AS i(id, ord) ON i.id = d.id ORDER BY i.ord
  LOOP
    PERFORM threadline_append_events(v_row.thread_id, p_run_id, 0, jsonb_build_array(v_kind || jsonb_build_object(
      'key', (v_kind ->> 'event') || '.' || v_row.id, 'data', threadline_approval_event(v_row))));
    RETURN NEXT v_row;
  END LOOP;
END
$$;
