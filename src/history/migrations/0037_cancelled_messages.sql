-- Up Migration

-- A run cancelled before it began a turn logs message.cancelled for its message, as one that failed
-- before it logs message.failed (turns-sql.ts logUnbegunCancellation): the streams that follow the
-- message find it by the message (turn-runs-sql.ts unbegunRunEvents), and so does the read that
-- names the run in the message's next event id (busy-sql.ts lastRefusal). The index of migration
-- 0032 takes it in; it holds only rows of runs without a turn, so it stays small and is rebuilt at once.
DROP INDEX thread_events_unanswered_idx;
CREATE INDEX thread_events_unanswered_idx ON thread_events (thread_id, (data ->> 'messageId'))
  WHERE event = 'message.refused' OR event = 'message.failed' OR event = 'message.cancelled';
