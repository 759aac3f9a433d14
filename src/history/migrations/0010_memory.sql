-- Up Migration

-- What an agent remembers about a user, across all of the user's threads. The id is derived from
-- the user and the normalized text (src/history/ids.ts), so remembering the same fact twice, or a
-- retried step remembering it again, stores one row.
-- source 'remembered': the user had the assistant remember it (a tool call); it belongs to the
-- user, outlives the thread it was said in, and is erased by forget, DELETE /api/memories or
-- deleting the user. source 'extracted': proposed from one thread by a component; derived only
-- from that thread, so it is deleted with it (thread_id ON DELETE CASCADE).
CREATE TABLE user_memories (
  id          uuid        PRIMARY KEY,
  user_id     text        NOT NULL,
  text        text        NOT NULL,
  source      text        NOT NULL CHECK (source IN ('remembered', 'extracted')),
  thread_id   uuid        REFERENCES threads (id) ON DELETE CASCADE,
  search      tsvector    GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT user_memories_source_thread CHECK ((source = 'extracted') = (thread_id IS NOT NULL))
);
CREATE INDEX user_memories_user_idx ON user_memories (user_id, updated_at DESC);
CREATE INDEX user_memories_search_idx ON user_memories USING gin (search);
CREATE INDEX user_memories_thread_idx ON user_memories (thread_id) WHERE thread_id IS NOT NULL;

-- State an agent keeps for itself in one thread (the state.data slices it declares), saved at the
-- end of a turn and loaded at the start of the next. Nothing is stored for an agent that declares
-- none. Deleted with the thread.
CREATE TABLE agent_thread_state (
  thread_id   uuid        NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  agent_name  text        NOT NULL,
  data        jsonb       NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, agent_name)
);
