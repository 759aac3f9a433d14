-- Up Migration

-- A thread's progressive summary: one row per thread, extended in place. It stands for the
-- current path's turns up to and including covers_through_turn_seq; history reads send it in
-- place of those turns. It belongs to the thread (deleted with it), never to the user.
CREATE TABLE thread_summaries (
  thread_id               uuid        PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
  covers_through_turn_seq bigint      NOT NULL,
  text                    text        NOT NULL,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now()
);
