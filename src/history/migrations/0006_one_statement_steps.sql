-- Up Migration

-- Bumped on every change that takes rows off a thread's current path (a detach), and when a stored
-- summary is dropped because a new answer changed what it stands for. A summarizer stores its
-- summary only if the version it read is still current, so no summary covers a detached turn.
ALTER TABLE threads ADD COLUMN path_version bigint NOT NULL DEFAULT 0;

-- 'superseded': the turn's answer was stored off the path because its user message left the
-- current path (a regenerate of an earlier message) while the turn was running.
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'superseded'));

-- The latest turn of a thread (debug view) and deleting a thread's turns read by thread, not by
-- scanning every turn.
CREATE INDEX turns_thread_idx ON turns (thread_id, started_at);

-- The two history steps that write run as one statement each: threadline_begin_turn
-- (history.append-user-message) and threadline_store_answer (history.append-results), created by
-- their sources in src/history/schema/functions/, which the migrator applies after the migrations.
