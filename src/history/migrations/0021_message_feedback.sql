-- Up Migration

-- A user's rating of an answer (issue 21): one row per answer (an agent message), the thread
-- owner's, replaced by a later rating and deleted on request or with the answer (and so with its
-- thread: deletion, retention, erasure).
--
-- `version` names one state of the row: a new rating, or a changed comment, takes the next value
-- of a sequence, never reused (a deleted and given-again rating does not repeat an old version);
-- the same rating sent again keeps it. message/feedback.given's event id is derived from it, so a
-- retried request announces once (Inngest drops an event id it has seen, within 24 hours).
CREATE SEQUENCE message_feedback_version_seq;

CREATE TABLE message_feedback (
  message_id uuid PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
  thread_id uuid NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  user_id text NOT NULL,
  rating text NOT NULL CHECK (rating IN ('up', 'down')),
  comment text,
  version bigint NOT NULL DEFAULT nextval('message_feedback_version_seq'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

ALTER SEQUENCE message_feedback_version_seq OWNED BY message_feedback.version;

-- The export reads a thread's feedback in keyset batches.
CREATE INDEX message_feedback_thread_idx ON message_feedback (thread_id, message_id);
