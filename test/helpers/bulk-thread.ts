import { randomUUID } from "node:crypto";
import type pg from "pg";

/** A version-4 shaped UUID derived from `key` (SQL), so the API's UUID checks accept it. */
const uuidFrom = (key: string) => `overlay(overlay(md5(${key}) placing '4' from 13) placing '8' from 17)::uuid`;

/**
 * A thread of `turns` answered turns (2 × turns messages) written in three bulk statements, as the
 * storage code would have left it: user message i at seq 2i-1, its answer at seq 2i in the same
 * turn, each user message with one completed turn. Statistics are refreshed afterwards, as
 * autovacuum would on a real database.
 */
export async function seedBulkThread(
  db: pg.Pool,
  { turns, userId = "user-1" }: { turns: number; userId?: string },
): Promise<{ threadId: string; userId: string }> {
  const threadId = randomUUID();
  await db.query("INSERT INTO threads (id, user_id, last_seq) VALUES ($1, $2, $3)", [threadId, userId, 2 * turns]);
  await db.query(
    `INSERT INTO messages (id, thread_id, seq, turn_seq, kind, agent_name, content, answers, variant, position, parent_id, parent_variant)
     SELECT ${uuidFrom("$1::text || ':' || i || ':' || kind")}, $1::uuid, CASE kind WHEN 'user' THEN 2 * i - 1 ELSE 2 * i END, 2 * i - 1, kind,
            CASE kind WHEN 'user' THEN 'user' ELSE 'assistant' END,
            CASE kind WHEN 'user' THEN jsonb_build_object('text', 'question ' || i)
              ELSE jsonb_build_object('output', jsonb_build_array(jsonb_build_object('type', 'text', 'role', 'assistant', 'content', 'answer ' || i)), 'toolCalls', '[]'::jsonb) END,
            CASE kind WHEN 'agent' THEN ${uuidFrom("$1::text || ':' || i || ':user'")} END,
            CASE kind WHEN 'agent' THEN 1 END, CASE kind WHEN 'agent' THEN 0 END,
            -- Each question follows the one before and its answer (the conversation tree).
            CASE WHEN kind = 'user' AND i > 1 THEN ${uuidFrom("$1::text || ':' || (i - 1) || ':user'")} END,
            CASE WHEN kind = 'user' AND i > 1 THEN 1 END
     FROM generate_series(1, $2::int) i, (VALUES ('user'), ('agent')) k(kind)
     ORDER BY i, kind DESC`,
    [threadId, turns],
  );
  await db.query(
    `INSERT INTO turns (run_id, thread_id, message_id, kind, variant, status, finished_at)
     SELECT 'bulk-' || $1::text || '-' || i, $1::uuid, ${uuidFrom("$1::text || ':' || i || ':user'")}, 'chat', 1, 'completed', now()
     FROM generate_series(1, $2::int) i`,
    [threadId, turns],
  );
  await db.query("ANALYZE threads, messages, turns");
  return { threadId, userId };
}
