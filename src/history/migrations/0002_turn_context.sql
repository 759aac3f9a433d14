-- Up Migration

-- What a turn's history was made of: the policy in force, where each setting came from, and how
-- many messages were read and sent. Shown by the thread debug view.
ALTER TABLE turns ADD COLUMN context jsonb;

-- preserveSystemMessages reads the system and summary rows older than the window without
-- walking the thread's other rows.
CREATE INDEX messages_path_system_idx ON messages (thread_id, turn_seq, seq) WHERE on_path AND kind IN ('system', 'summary');
