-- Up Migration

-- A thread belongs to one user. last_seq is the per-thread sequence counter: bumping it takes the
-- thread's row lock, so concurrent writers to one thread get a gapless, duplicate-free order.
CREATE TABLE threads (
  id          uuid PRIMARY KEY,
  user_id     text        NOT NULL,
  last_seq    bigint      NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX threads_user_idx ON threads (user_id, updated_at DESC);

-- Every stored message of a thread: user messages (id = the client's id) and agent results
-- (id derived from the user message they answer, their variant and position).
-- seq is the insertion order; turn_seq is the seq of the user message a row belongs to (its own
-- seq for a user message), so an answer stored late (a failed turn re-run after later turns)
-- still reads right after its question: the thread order is (turn_seq, seq).
-- on_path marks the thread's current path: regenerating takes superseded answers and the turns
-- after them off the path without deleting them.
CREATE TABLE messages (
  id               uuid PRIMARY KEY,
  thread_id        uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  seq              bigint      NOT NULL,
  turn_seq         bigint      NOT NULL,
  kind             text        NOT NULL CHECK (kind IN ('user', 'agent', 'system', 'summary')),
  agent_name       text        NOT NULL,
  content          jsonb       NOT NULL,
  answers          uuid        REFERENCES messages (id) ON DELETE CASCADE,
  variant          integer,
  position         integer,
  on_path          boolean     NOT NULL DEFAULT true,
  client_timestamp timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT messages_thread_seq_key UNIQUE (thread_id, seq),
  CONSTRAINT messages_answer_shape CHECK ((kind = 'agent') = (answers IS NOT NULL AND variant IS NOT NULL AND position IS NOT NULL))
);
-- History reads walk the current path backwards from the current message.
CREATE INDEX messages_path_idx ON messages (thread_id, turn_seq, seq) WHERE on_path;
CREATE INDEX messages_path_user_idx ON messages (thread_id, seq) WHERE on_path AND kind = 'user';
-- Variant listing and the "one current answer" guard.
CREATE INDEX messages_answers_idx ON messages (answers, variant, position);
CREATE UNIQUE INDEX messages_one_current_answer_idx ON messages (answers, position) WHERE on_path AND answers IS NOT NULL;

-- One row per function run that works on a user message: what a client shows as turn status.
CREATE TABLE turns (
  run_id      text        PRIMARY KEY,
  thread_id   uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  message_id  uuid        NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
  kind        text        NOT NULL CHECK (kind IN ('chat', 'regenerate')),
  event_id    text,
  variant     integer     NOT NULL,
  status      text        NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'skipped')),
  error       text,
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX turns_message_idx ON turns (message_id, started_at);
CREATE INDEX turns_event_idx ON turns (event_id) WHERE event_id IS NOT NULL;
