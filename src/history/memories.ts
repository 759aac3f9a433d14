/**
 * User memories (user_memories): remembered and extracted facts, scoped by their owner.
 * Imports: pg, ids.ts, memories-sql.ts, safe-text.ts, transaction.ts, users-sql.ts.
 */
import type pg from "pg";
import { memoryId } from "./ids.js";
import * as sql from "./memories-sql.js";
import { sanitizeText } from "./safe-text.js";
import { transaction } from "./transaction.js";
import { shareUserErasureLock } from "./users-sql.js";

/** Most memories one user holds: remembering more is refused until some are forgotten. */
const MAX_MEMORIES_PER_USER = 1_000;

/** Longest memory, in characters: a fact or a preference, not a document. */
export const MAX_MEMORY_LENGTH = 500;

/** A memory as stored and as the API lists it. */
export type Memory = {
  id: string;
  text: string;
  source: "remembered" | "extracted";
  /** The thread an extracted memory came from (it is deleted with it); null for remembered ones. */
  threadId: string | null;
  createdAt: string;
  updatedAt: string;
};

/**
 * A memory's text as stored: trimmed, and, since the model writes it, with NUL and lone
 * surrogates as U+FFFD (sanitizeText), which PostgreSQL refuses.
 */
const storedMemoryText = (text: string) => sanitizeText(text.trim());

/**
 * The form that decides whether two texts are the same memory: its stored text, Unicode-compatible
 * (NFKC), case-folded, whitespace collapsed. The text stored is the first wording remembered.
 */
const normalizeMemoryText = (text: string) =>
  storedMemoryText(text).normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim();

export const memoryIdFor = (userId: string, text: string) => memoryId(userId, normalizeMemoryText(text));

export type RememberOutcome = { status: "remembered"; id: string } | { status: "full" } | { status: "thread_gone" };

/**
 * Remembers a fact the user stated in one of their threads: once, however often it is called with
 * the same fact. Under the user's erasure lock (shared), and only while the thread is theirs: a
 * turn still running when its thread was deleted or its user erased stores nothing.
 */
export async function remember(
  db: pg.Pool,
  input: { userId: string; threadId: string; text: string },
): Promise<RememberOutcome> {
  const id = memoryIdFor(input.userId, input.text);
  const text = storedMemoryText(input.text);
  return transaction(db, async (client) => {
    await client.query(shareUserErasureLock, [input.userId]);
    // Read after the lock: an erasure that held it has committed, and its thread is gone.
    if ((await client.query(sql.selectThreadOwned, [input.threadId, input.userId])).rowCount !== 1)
      return { status: "thread_gone" };
    const written = await client.query(sql.rememberMemory, [id, input.userId, text, MAX_MEMORIES_PER_USER]);
    if (written.rowCount === 1) return { status: "remembered", id };
    // Nothing written: it was already remembered (kept as is), or the user is at the limit.
    const found = await client.query(sql.selectMemoryOwned, [id, input.userId]);
    return found.rowCount === 1 ? { status: "remembered", id } : { status: "full" };
  });
}

/**
 * A memory proposed from a message of one of the user's threads: deleted with that thread; not
 * stored when the user had memories forgotten since the message was written.
 */
export async function rememberFromThread(
  db: pg.Pool,
  input: { userId: string; threadId: string; messageId: string; text: string },
): Promise<{ id: string; stored: boolean }> {
  const id = memoryIdFor(input.userId, input.text);
  const written = await db.query(sql.insertExtractedMemory, [
    id,
    input.userId,
    storedMemoryText(input.text),
    input.threadId,
    MAX_MEMORIES_PER_USER,
    input.messageId,
  ]);
  return { id, stored: written.rowCount === 1 };
}

/** The words of one answered turn of the user's thread (null: no such user message of theirs on its path). */
export async function turnForExtraction(
  db: pg.Pool,
  input: { userId: string; threadId: string; messageId: string },
): Promise<{ question: string; answers: unknown[] } | null> {
  const { rows } = await db.query<sql.SelectTurnForExtractionRow>(sql.selectTurnForExtraction, [
    input.messageId,
    input.threadId,
    input.userId,
  ]);
  return rows[0] ?? null;
}

export type RelevantMemory = { id: string; text: string; rank: number; updatedAt: string };

/**
 * The user's memories most relevant to `text`, best first (full-text rank, then recency). The
 * text may be the model's (a recall topic): sanitized, as PostgreSQL refuses NUL.
 */
export async function relevantMemories(
  db: pg.Pool,
  input: { userId: string; text: string; limit: number },
): Promise<RelevantMemory[]> {
  const { rows } = await db.query<sql.SelectRelevantMemoriesRow>(sql.selectRelevantMemories, [
    input.userId,
    sanitizeText(input.text),
    input.limit,
  ]);
  return rows.map((row) => ({ id: row.id, text: row.text, rank: row.rank, updatedAt: row.updated_at.toISOString() }));
}

/** Where a page of memories ends: the last memory's exact update time (microseconds) and id. */
export type MemoryCursor = { atMicros: string; id: string };

/** A cursor as clients see it: opaque, passed back, never built. */
export const encodeMemoryCursor = ({ atMicros, id }: MemoryCursor) =>
  Buffer.from(`${atMicros}.${id}`).toString("base64url");

/** The cursor a string stands for, or undefined when it is not one this API returned. */
export function decodeMemoryCursor(cursor: string): MemoryCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,96}$/.test(cursor)) return undefined;
  // The id exactly as PostgreSQL writes a uuid: anything else would fail the statement's cast (a 500).
  const match = /^(\d{1,18})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(
    Buffer.from(cursor, "base64url").toString("latin1"),
  );
  return match ? { atMicros: match[1]!, id: match[2]! } : undefined;
}

/** One page of the user's memories, newest first, and the cursor of the next page. */
export async function listMemories(
  db: pg.Pool,
  input: { userId: string; limit: number; after?: MemoryCursor | undefined },
): Promise<{ memories: Memory[]; next: MemoryCursor | null }> {
  const { rows } = await db.query<sql.SelectMemoryPageRow>(sql.selectMemoryPage, [
    input.userId,
    input.after?.atMicros ?? null,
    input.after?.id ?? null,
    input.limit + 1,
  ]);
  const memories = rows.slice(0, input.limit).map((row) => ({
    id: row.id,
    text: row.text,
    source: row.source,
    threadId: row.thread_id,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }));
  const last = rows[input.limit - 1];
  return { memories, next: rows.length > input.limit && last ? { atMicros: last.at_us, id: last.id } : null };
}

/**
 * Forgets one of the user's memories; false when the user has none with that id. What the user
 * wrote before stays forgotten (insertExtractedMemory).
 */
export async function forget(db: pg.Pool | pg.PoolClient, input: { userId: string; id: string }): Promise<boolean> {
  return (await db.query(sql.deleteMemory, [input.id, input.userId])).rowCount === 1;
}

/**
 * Forgets everything remembered about the user; returns how many memories were erased. Nothing the
 * user wrote before is extracted again (insertExtractedMemory).
 */
export async function forgetAll(db: pg.Pool, userId: string): Promise<number> {
  return (await db.query<sql.DeleteAllMemoriesRow>(sql.deleteAllMemories, [userId])).rows[0]!.deleted;
}

/** Erasing the user: their memories and the record of their forgets; returns how many memories. */
export async function eraseMemories(db: pg.PoolClient, userId: string): Promise<number> {
  return (await db.query(sql.eraseMemories, [userId])).rowCount ?? 0;
}
