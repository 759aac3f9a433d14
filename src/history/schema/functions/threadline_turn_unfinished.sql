-- Whether a turn with this status is unfinished: it holds its thread, so a message sent meanwhile
-- meets the busy policy (src/history/busy.ts). The one predicate of "a turn runs" for the busy
-- policy's statements; a new unfinished status (a turn awaiting a human's approval) is added here.
-- SQL, immutable: the planner inlines it.
CREATE OR REPLACE FUNCTION threadline_turn_unfinished(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_status IN ('running')
$$;
