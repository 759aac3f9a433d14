-- Up Migration

-- A thread is a tree of turns: a user message follows the user message before it on the path
-- when it was stored (parent_id; NULL for a thread's first message) and that message's answer
-- variant then current (parent_variant; NULL while that message had no answer yet). Edited
-- messages are siblings (the same parent and parent variant); answer variants are siblings under
-- their user message. on_path stays the current path: switching branches rewrites it from these
-- pointers (threadline_switch_branch).
ALTER TABLE messages ADD COLUMN parent_id uuid REFERENCES messages (id) ON DELETE CASCADE;
ALTER TABLE messages ADD COLUMN parent_variant integer;
ALTER TABLE messages ADD CONSTRAINT messages_parent_shape CHECK (kind = 'user' OR (parent_id IS NULL AND parent_variant IS NULL));

-- Siblings and children of a message, and a branch's subtree; a thread's first messages (the
-- first one and its edits) have no parent.
CREATE INDEX messages_parent_idx ON messages (parent_id, parent_variant, seq) WHERE kind = 'user';
CREATE INDEX messages_roots_idx ON messages (thread_id, seq) WHERE kind = 'user' AND parent_id IS NULL;

-- Threads stored before: each user message follows the nearest earlier user message (the nearest
-- earlier one on the path, for one on the path) and the variant of its answer stored last before
-- it. Exact for threads never regenerated mid-way; for older detached turns the best guess.
UPDATE messages m SET parent_id = p.id, parent_variant = (
    SELECT a.variant FROM messages a WHERE a.answers = p.id AND a.seq < m.seq ORDER BY a.seq DESC LIMIT 1)
  FROM messages p
  WHERE m.kind = 'user' AND p.id = (
    SELECT e.id FROM messages e
    WHERE e.thread_id = m.thread_id AND e.kind = 'user' AND e.seq < m.seq AND (e.on_path OR NOT m.on_path)
    ORDER BY e.seq DESC LIMIT 1);
