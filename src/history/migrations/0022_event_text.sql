-- Up Migration

-- A log row's payload as the exact JSON text a stream sends for it (issue 19: a reconnect's
-- replay as fast as a read): PostgreSQL builds a page of Server-Sent Events from it in the read,
-- and the app writes that one value, instead of parsing each row's jsonb and printing it again.
-- Written by threadline_append_events (src/history/schema/functions/threadline_event_text.sql
-- says when it is NULL); rows written before this migration have none and are sent as before.
-- `data` stays the payload every SQL reader and the export use.
ALTER TABLE thread_events ADD COLUMN data_text text;
