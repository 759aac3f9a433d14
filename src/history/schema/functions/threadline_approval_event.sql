-- The payload of a tool.approval.* log event: the approval as clients show it.
CREATE OR REPLACE FUNCTION threadline_approval_event(p_row tool_approvals)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('approvalId', p_row.id, 'runId', p_row.run_id, 'messageId', p_row.message_id,
    'toolCallId', p_row.tool_call_id, 'toolName', p_row.tool_name, 'arguments', p_row.arguments,
    'status', p_row.status, 'decidedBy', p_row.decided_by, 'reason', p_row.reason,
    'expiresAt', to_char(p_row.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
$$;
