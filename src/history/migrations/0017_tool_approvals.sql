-- Up Migration

-- Human approval of tool calls (docs/approvals.md). One row per tool call that needs approval: the
-- turn records it pending (with tool.approval.requested in the log) and waits durably for its
-- decision. The row is the truth: the decision event only wakes the waiting run, which re-reads
-- the row. The id is derived from the user message and the tool call id (stable across replays,
-- retries and reruns), so a recorded decision, a denial above all, is found again and stays final.
CREATE TABLE tool_approvals (
  id uuid PRIMARY KEY,
  thread_id uuid NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  -- The run that asked first; a rerun of it asks under the same id and finds this row.
  run_id text NOT NULL,
  message_id uuid NOT NULL,
  tool_call_id text NOT NULL,
  tool_name text NOT NULL,
  arguments jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  -- Who decided: the owner, a stop of the turn, or the clock.
  decided_by text CHECK (decided_by IN ('user', 'stop', 'expiry')),
  reason text,
  -- The client's id of the deciding request: the same request sent again answers the same.
  request_id text,
  requested_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  decided_at timestamptz,
  CONSTRAINT tool_approvals_decided CHECK ((status = 'pending') = (decided_at IS NULL))
);

-- The pending approvals of a thread (the approvals list, the messages API, a stop).
CREATE INDEX tool_approvals_thread_idx ON tool_approvals (thread_id, status, requested_at);
