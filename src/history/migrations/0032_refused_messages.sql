-- Up Migration

-- A run refused by busy reject after the sending route's check (a turn began in between) begins
-- no turn: its refusal is a message.refused row of the thread's log (src/history/busy.ts). The
-- streams that follow a message find its runs by the message (turn-runs-sql.ts
-- selectMessageTurns): this index finds its refusals the same way, without reading the thread's
-- other rows. It holds only refusals, so it stays small.
CREATE INDEX thread_events_refused_idx ON thread_events (thread_id, (data ->> 'messageId')) WHERE event = 'message.refused';
