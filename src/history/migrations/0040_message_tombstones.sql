-- Up Migration

-- Deleting a branch is final, as deleting a thread is (migration 0016). A user message deleted
-- with its branch (DELETE /api/threads/:id/messages/:id/branch, with every user message below it)
-- leaves a tombstone: its thread and id, no content. While it exists, threadline_begin_turn does not
-- store a message under that id in that thread again, so a replayed or re-delivered event of a
-- deleted message cannot bring it back. Tombstones go with their thread.
CREATE TABLE message_tombstones (
  thread_id uuid NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  message_id uuid NOT NULL,
  deleted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, message_id)
);
