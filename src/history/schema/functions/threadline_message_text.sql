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
BEGIN
  -- An object without output (a user message's content) has nothing but its text (concat_ws of
  -- it and NULL): no query over the output, run for every message stored.
  IF jsonb_typeof(p_content) = 'object' AND NOT p_content ? 'output' THEN
    RETURN left(coalesce(p_content ->> 'text', ''), 100000);
  END IF;
  RETURN left(concat_ws(E'\n',
    p_content ->> 'text',
    (SELECT string_agg(piece, E'\n')
     FROM jsonb_path_query(p_content, '$.output[*] ? (@.type == "text").content') AS output(content),
          LATERAL (SELECT output.content #>> '{}' WHERE jsonb_typeof(output.content) = 'string'
                   UNION ALL
                   SELECT part ->> 'text' FROM jsonb_array_elements(CASE jsonb_typeof(output.content) WHEN 'array' THEN output.content ELSE '[]' END) AS part
                   WHERE part ->> 'type' = 'text') AS pieces(piece))), 100000);
END
$$;
