/**
 * The statements of user memory and per-agent thread state (tables of migration 0010). Every one
 * is scoped by the user: a memory is read or erased only through its owner's id, and a thread's
 * agent state only through the thread's owner.
 */
import { userKey } from "./users-sql.js";

/**
 * Remembers a fact (idempotent by its derived id). A fact remembered explicitly that had been
 * extracted from a thread becomes the user's own: it no longer goes with that thread. Refuses
 * (no row) once the user holds $5 memories.
 */
export const rememberMemory = `
  INSERT INTO user_memories (id, user_id, text, source)
  SELECT $1, $2, $3, 'remembered'
  WHERE EXISTS (SELECT 1 FROM user_memories WHERE id = $1)
     OR (SELECT count(*) FROM user_memories WHERE user_id = $2) < $4
  ON CONFLICT (id) DO UPDATE SET source = 'remembered', thread_id = NULL, updated_at = now()
    WHERE user_memories.source <> 'remembered'
  RETURNING id`;

/** Whether the thread is still the user's (a remember in it, after the user's erasure lock). */
export const selectThreadOwned = `
  SELECT 1 FROM threads WHERE id = $1 AND user_id = $2`;

/** Whether the memory exists (a remember that inserted or promoted nothing may still have found it). */
export const selectMemoryOwned = `
  SELECT id FROM user_memories WHERE id = $1 AND user_id = $2`;

/**
 * A memory proposed from message $6 of one thread: it goes with that thread (the thread must be
 * the user's). Already known (remembered, or extracted before): left as it is. Nothing once the
 * user holds $5, nor when the user had memories forgotten after the message was written: what
 * they deleted never comes back from an extraction that ran late.
 */
export const insertExtractedMemory = `
  INSERT INTO user_memories (id, user_id, text, source, thread_id)
  SELECT $1, $2, $3, 'extracted', t.id FROM threads t
  WHERE t.id = $4 AND t.user_id = $2
    AND (SELECT count(*) FROM user_memories WHERE user_id = $2) < $5
    AND NOT EXISTS (SELECT 1 FROM memory_forgets f JOIN messages m ON m.id = $6 AND m.thread_id = t.id
                    WHERE f.user_key = ${userKey("$2")} AND f.forgotten_at > m.created_at)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

/**
 * A user message of the user's thread and the texts of its current answer, for memory extraction;
 * no row once the message left the path (the user edited it away: its words are not theirs now).
 */
export const selectTurnForExtraction = `
  SELECT u.content ->> 'text' AS question,
         coalesce((SELECT jsonb_agg(a.content ORDER BY a.position) FROM messages a WHERE a.answers = u.id AND a.on_path), '[]'::jsonb) AS answers
  FROM messages u JOIN threads t ON t.id = u.thread_id
  WHERE u.id = $1 AND u.thread_id = $2 AND t.user_id = $3 AND u.kind = 'user' AND u.on_path`;
export type SelectTurnForExtractionRow = { question: string; answers: unknown[] };

/**
 * The user's memories most relevant to a text, best first: full-text rank against any of the
 * text's words (the 'simple' configuration: no stemming, so it serves every language alike),
 * then the most recently remembered. Memories matching no word still come, after those that do.
 */
export const selectRelevantMemories = `
  WITH query AS (
    SELECT CASE WHEN count(*) = 0 THEN NULL
                ELSE to_tsquery('simple', string_agg(quote_literal(word), ' | ')) END AS q
    FROM unnest(tsvector_to_array(to_tsvector('simple', $2))) AS word
  )
  SELECT m.id, m.text, m.source, m.created_at, m.updated_at,
         coalesce(ts_rank(m.search, query.q), 0)::float8 AS rank
  FROM user_memories m, query
  WHERE m.user_id = $1
  ORDER BY rank DESC, m.updated_at DESC, m.id
  LIMIT $3`;
export type SelectRelevantMemoriesRow = { id: string; text: string; rank: number; updated_at: Date };

/**
 * The user's memories, newest first, a page after an optional cursor: (updated_at in microseconds
 * since the epoch, id), exact where a JavaScript date would round to milliseconds.
 */
export const selectMemoryPage = `
  SELECT id, text, source, thread_id, created_at, updated_at,
         (extract(epoch FROM updated_at) * 1000000)::bigint::text AS at_us
  FROM user_memories
  WHERE user_id = $1
    AND ($2::bigint IS NULL OR (updated_at, id) < ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
  ORDER BY updated_at DESC, id DESC
  LIMIT $4`;
/** A user_memories row as the page and the export read it. */
export type UserMemoryRow = {
  id: string;
  text: string;
  source: "remembered" | "extracted";
  thread_id: string | null;
  created_at: Date;
  updated_at: Date;
};
export type SelectMemoryPageRow = UserMemoryRow & { at_us: string };

/** A forget's record, after `INSERT INTO memory_forgets (user_key, forgotten_at) …`: the latest one stays. */
const latestForget = "ON CONFLICT (user_key) DO UPDATE SET forgotten_at = excluded.forgotten_at";

/** Forgets one memory of the user's (one row: it was there), and records when. */
export const deleteMemory = `
  WITH deleted AS (DELETE FROM user_memories WHERE id = $1 AND user_id = $2 RETURNING id),
  recorded AS (
    INSERT INTO memory_forgets (user_key, forgotten_at) SELECT ${userKey("$2")}, clock_timestamp() FROM deleted
    ${latestForget})
  SELECT id FROM deleted`;

/** Forgets every memory of the user's, and records when (also when there was none yet). */
export const deleteAllMemories = `
  WITH deleted AS (DELETE FROM user_memories WHERE user_id = $1 RETURNING 1),
  recorded AS (
    INSERT INTO memory_forgets (user_key, forgotten_at) VALUES (${userKey("$1")}, clock_timestamp())
    ${latestForget})
  SELECT count(*)::int AS deleted FROM deleted`;
export type DeleteAllMemoriesRow = { deleted: number };

/** Erasing the user: their memories and their forget record (users.ts keeps its own erasure record). */
export const eraseMemories = `
  WITH forgets AS (DELETE FROM memory_forgets WHERE user_key = ${userKey("$1")})
  DELETE FROM user_memories WHERE user_id = $1`;

/** The state slices of the named agents in a thread, when the thread is the user's. */
export const selectAgentState = `
  SELECT s.agent_name, s.data
  FROM agent_thread_state s JOIN threads t ON t.id = s.thread_id
  WHERE s.thread_id = $1 AND t.user_id = $2 AND s.agent_name = ANY($3::text[])`;
export type SelectAgentStateRow = { agent_name: string; data: Record<string, unknown> };

/** Saves each agent's slices ($3: [{agent, data}]) in a thread of the user's, in one statement. */
export const upsertAgentState = `
  INSERT INTO agent_thread_state (thread_id, agent_name, data)
  SELECT t.id, slice.agent, slice.data
  FROM threads t, jsonb_to_recordset($3::jsonb) AS slice(agent text, data jsonb)
  WHERE t.id = $1 AND t.user_id = $2
  ON CONFLICT (thread_id, agent_name) DO UPDATE SET data = excluded.data, updated_at = now()
    WHERE agent_thread_state.data IS DISTINCT FROM excluded.data`;
