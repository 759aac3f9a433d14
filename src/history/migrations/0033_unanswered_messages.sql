-- Up Migration

-- A run that failed before it began a turn (its first step failed through its retries, or its
-- event was refused) logs message.failed, as a refused run logs message.refused (0032): the
-- streams that follow a message find both by the message (turn-runs-sql.ts selectMessageTurns).
-- This index replaces 0032's and holds both kinds, still only rows of runs without a turn.
CREATE INDEX thread_events_unanswered_idx ON thread_events (thread_id, (data ->> 'messageId'))
  WHERE event = 'message.refused' OR event = 'message.failed';
DROP INDEX thread_events_refused_idx;
