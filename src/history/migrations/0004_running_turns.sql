-- Up Migration

-- A history read waits for an earlier turn of its thread that is still running: found through this.
CREATE INDEX turns_running_idx ON turns (thread_id, started_at) WHERE status = 'running';
