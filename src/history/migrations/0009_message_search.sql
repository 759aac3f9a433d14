-- Up Migration

-- Full-text search over a user's messages (GET /api/search).
--
-- Text search configuration 'english': stemming ("plans" finds "planning"), English stop words
-- dropped (a query of only stop words finds nothing instead of every message). search-sql.ts
-- queries with the same configuration: change both together.

-- btree_gin lets one GIN index hold the owner next to the lexemes, so a search reads only the
-- caller's matches (a trusted extension: a database owner may create it).
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- The functions are created here because the generated column and the trigger below need them;
-- their current bodies are threadline_message_text.sql and threadline_message_owner.sql in
-- src/history/schema/functions/, applied after the migrations.
--
-- The searchable text of a message: a user message's text, or the text of an answer's AgentKit
-- text messages (content a string or text parts); tool calls and results are not searched.
-- Capped at 100,000 characters: to_tsvector refuses a vector over 1 MB, and an answer must never
-- fail to store because it is long (words past the cap are not found).
CREATE FUNCTION threadline_message_text(p_content jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(concat_ws(E'\n',
    p_content ->> 'text',
    (SELECT string_agg(piece, E'\n')
     FROM jsonb_path_query(p_content, '$.output[*] ? (@.type == "text").content') AS output(content),
          LATERAL (SELECT output.content #>> '{}' WHERE jsonb_typeof(output.content) = 'string'
                   UNION ALL
                   SELECT part ->> 'text' FROM jsonb_array_elements(CASE jsonb_typeof(output.content) WHEN 'array' THEN output.content ELSE '[]' END) AS part
                   WHERE part ->> 'type' = 'text') AS pieces(piece))), 100000)
$$;

-- The owner, copied from the thread so the search index can filter by it. A thread never changes
-- owner, so the copy cannot go stale; the trigger fills it on every insert, whoever the writer.
ALTER TABLE messages ADD COLUMN user_id text;
UPDATE messages m SET user_id = t.user_id FROM threads t WHERE t.id = m.thread_id;
ALTER TABLE messages ALTER COLUMN user_id SET NOT NULL;

CREATE FUNCTION threadline_message_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.user_id := (SELECT t.user_id FROM threads t WHERE t.id = NEW.thread_id);
  RETURN NEW;
END
$$;
CREATE TRIGGER messages_owner BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION threadline_message_owner();

-- System and summary rows are not the user's words: only user messages and answers are searchable.
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
  CASE WHEN kind IN ('user', 'agent') THEN to_tsvector('english'::regconfig, threadline_message_text(content)) END
) STORED;

CREATE INDEX messages_search_idx ON messages USING gin (user_id, search);
