-- Up Migration

-- A log row keeps the whole Server-Sent Event its stream sends (`frame`: the event, data and id
-- lines and the blank line, its data the payload's exact JSON text as data_text held it; NULL
-- where data_text was, and readers send that row the old way) and where that frame starts among
-- its thread's (`frame_offset`: the bytes of the thread's frames before it, counted since its first
-- event; thread_event_counters.frame_bytes holds the next row's). A page of the log is then its
-- rows' frames strung together, cut at byte offsets read off the rows: no frame is printed and no
-- running sum computed per read, which was most of a reconnect's read (issue 19).
-- threadline_append_events writes both; data_text is no longer written (an instance of the
-- previous version sends rows without it the old way) and can go in a later migration.
ALTER TABLE thread_events ADD COLUMN frame text, ADD COLUMN frame_offset bigint NOT NULL DEFAULT 0;
ALTER TABLE thread_event_counters ADD COLUMN frame_bytes bigint NOT NULL DEFAULT 0;

UPDATE thread_events x
SET frame = 'event: ' || x.event || E'\ndata: ' || x.data_text || E'\nid: ' || x.id || E'\n\n';

UPDATE thread_events x SET frame_offset = o.before
FROM (
  SELECT e.thread_id, e.id,
    coalesce(sum(coalesce(octet_length(e.frame), 0)) OVER (PARTITION BY e.thread_id ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
  FROM thread_events e
) o
WHERE x.thread_id = o.thread_id AND x.id = o.id;

UPDATE thread_event_counters c
SET frame_bytes = coalesce((SELECT sum(coalesce(octet_length(x.frame), 0)) FROM thread_events x WHERE x.thread_id = c.thread_id), 0);
