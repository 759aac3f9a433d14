-- Up Migration

-- A per-thread log of what a client shows while a turn runs (AgentKit's streaming chunks, and
-- Threadline's own turn endings), read by GET /api/threads/:threadId/events.
--
-- Ids are per thread and assigned under a per-thread counter row lock, so they commit in id order:
-- the next writer of a thread waits for the counter until the earlier one commits. A reader that
-- has seen id k can never later find a committed row with an id below k (which a global sequence,
-- allocated before commit, would allow), so "everything after k" is a complete resume point.
CREATE TABLE thread_event_counters (
  thread_id uuid PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
  last_id bigint NOT NULL DEFAULT 0
);

-- (run_id, attempt, key) makes writing idempotent: a retried step or a re-entered function writes
-- the same keys again and inserts nothing. key: AgentKit's chunk id (publish-<sequence>:<event>) or
-- the name of a turn's ending; attempt: 0 for everything written so far (per-attempt model deltas
-- come later). run_id is NULL for events outside a run (never deduplicated).
CREATE TABLE thread_events (
  thread_id uuid NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  id bigint NOT NULL,
  run_id text,
  attempt integer NOT NULL DEFAULT 0,
  key text NOT NULL,
  event text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, id),
  UNIQUE (run_id, attempt, key)
);

-- Pruning by age reads the oldest rows first.
CREATE INDEX thread_events_created_idx ON thread_events (created_at);

-- The log's writer, threadline_append_events, and threadline_store_answer, which now also ends the
-- stream (stream.ended) in the transaction that stores the answer: src/history/schema/functions/.
