-- The searchable text of a message: a user message's text, or the text of an answer's AgentKit
-- text messages (content a string or text parts); tool calls and results are not searched.
-- Capped at 100,000 characters: to_tsvector refuses a vector over 1 MB, and an answer must never
-- fail to store because it is long (words past the cap are not found).
--
-- messages.search (a stored generated column, migration 0009) and the search query
-- (src/history/search-sql.ts) use it: a new body applies to rows written from then on, stored rows
-- keep the vector they were written with (a change that must reach them needs a migration that
-- rewrites the column).
CREATE OR REPLACE FUNCTION threadline_message_text(p_content jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  v_contents jsonb;
  v_content jsonb;
  v_part jsonb;
  v_pieces text;
BEGIN
  -- Expressions only, no query: this runs for every message stored (the generated column), and a
  -- query's executor start cost more than all the rest. An object without output (a user
  -- message's content) has nothing but its text (concat_ws of it and NULL).
  IF jsonb_typeof(p_content) = 'object' AND NOT p_content ? 'output' THEN
    RETURN left(coalesce(p_content ->> 'text', ''), 100000);
  END IF;
  -- The output's text contents in order (lax: an output that is one object counts as a list of
  -- it); each is a string, or parts of which those of type text count; their texts joined by
  -- newlines (concat_ws skips a NULL, as string_agg did).
  v_contents := jsonb_path_query_array(p_content, '$.output[*] ? (@.type == "text").content');
  FOR i IN 0 .. jsonb_array_length(v_contents) - 1 LOOP
    v_content := v_contents -> i;
    CASE jsonb_typeof(v_content)
    WHEN 'string' THEN
      v_pieces := concat_ws(E'\n', v_pieces, v_content #>> '{}');
    WHEN 'array' THEN
      FOR j IN 0 .. jsonb_array_length(v_content) - 1 LOOP
        v_part := v_content -> j;
        IF v_part ->> 'type' = 'text' THEN
          v_pieces := concat_ws(E'\n', v_pieces, v_part ->> 'text');
        END IF;
      END LOOP;
    ELSE
      -- Content of another type has no text.
    END CASE;
  END LOOP;
  RETURN left(concat_ws(E'\n', p_content ->> 'text', v_pieces), 100000);
END
$$;
