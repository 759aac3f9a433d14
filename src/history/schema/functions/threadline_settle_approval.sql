-- What a waiting turn reads after each round of its wait, in one statement: the approval p_id as
-- recorded; a pending one past its expiry (by the database's clock, or p_expire: the turn's wait,
-- timed by the engine, has reached it) is recorded expired first, with tool.approval.expired in the
-- log. Thread share-locked, then the row locked, as the decision takes them.
CREATE OR REPLACE FUNCTION threadline_settle_approval(p_id uuid, p_expire boolean)
RETURNS SETOF tool_approvals
LANGUAGE plpgsql AS $$
DECLARE
  v_row tool_approvals%ROWTYPE;
BEGIN
  PERFORM 1 FROM threads t WHERE t.id = (SELECT a.thread_id FROM tool_approvals a WHERE a.id = p_id) FOR KEY SHARE;
  SELECT * INTO v_row FROM tool_approvals a WHERE a.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_row.status = 'pending' AND (p_expire OR v_row.expires_at <= now()) THEN
    SELECT * INTO v_row FROM threadline_record_decisions(ARRAY[p_id], v_row.run_id, 'expired', 'expiry', NULL, NULL);
  END IF;
  RETURN NEXT v_row;
END
$$;
