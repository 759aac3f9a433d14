-- Up Migration

-- A run that began no turn logs why, for its message: message.refused (busy reject refused it
-- after the sending route's check: src/history/busy.ts) or message.failed (its first step failed
-- through its retries, or its event was refused: turns-sql.ts logUnbegunFailure). The streams
-- that follow a message find its runs by the message (turn-runs-sql.ts selectMessageTurns): this
-- index finds those rows the same way, without reading the thread's other rows. It holds only
-- rows of runs without a turn, so it stays small.
CREATE INDEX thread_events_unanswered_idx ON thread_events (thread_id, (data ->> 'messageId'))
  WHERE event = 'message.refused' OR event = 'message.failed';
