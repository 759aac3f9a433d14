-- A log row's Server-Sent Event as its stream sends it (hono's writeSSE: the `event`, `data` and
-- `id` lines and a blank line; the JSON holds no line break), its data threadline_event_text's:
-- NULL when that is, and readers send the row the old way. Written with the row, by
-- threadline_append_events and by the import (export-sql.ts insertEvent). PL/pgSQL, whose body is
-- resolved when called: the migrator applies the function files in name order, before
-- threadline_event_text's.
CREATE OR REPLACE FUNCTION threadline_event_frame(p_event text, p_id bigint, p_data jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN 'event: ' || p_event || E'\ndata: ' || threadline_event_text(p_data) || E'\nid: ' || p_id || E'\n\n';
END
$$;
