import type pg from "pg";
import { listThreads, type ThreadCursor, type ThreadItem } from "./threads.js";
import * as sql from "./threads-sql.js";
import type { ThreadMessage } from "./message-pages.js";

/**
 * A user's data export: every thread and the messages of its current path, read in keyset batches
 * inside one read-only REPEATABLE READ transaction, so the export is one consistent snapshot (a
 * thread that becomes active while the export runs is neither skipped nor repeated) and memory
 * holds one batch at a time, however much the user has.
 */

export const EXPORT_THREAD_BATCH = 100;
export const EXPORT_MESSAGE_BATCH = 500;

/**
 * How long an export may wait on its reader between two batches. A client that stops reading
 * without closing the connection would otherwise pin a pooled connection and its snapshot (which
 * holds back vacuum) for as long as it likes; past this, PostgreSQL ends the session and the
 * export fails.
 */
export const EXPORT_STALL_TIMEOUT = "2min";

/** A current-path message as the messages API shows it, without the per-user-message extras, and its thread. */
export type ExportedMessage = Omit<ThreadMessage, "variantCount" | "turn"> & { threadId: string };

/** The last line: how many threads and messages came before it. Missing: the export was cut short. */
export type ExportEnd = { type: "end"; threads: number; messages: number };

export type ExportRecord = ({ type: "thread" } & ThreadItem) | ({ type: "message" } & ExportedMessage) | ExportEnd;

type MessageRow = {
  id: string;
  turn_seq: string;
  seq: string;
  kind: ExportedMessage["role"] | "agent";
  agent_name: string;
  content: unknown;
  answers: string | null;
  variant: number | null;
  stopped: boolean;
  created_at: Date;
};

/** The user's threads, each followed by its current-path messages in thread order. */
export async function* exportUserData(db: pg.Pool, userId: string): AsyncGenerator<ExportRecord> {
  const client = await db.connect();
  let open = false;
  let failed = false;
  try {
    await client.query(sql.beginSnapshot);
    open = true;
    await client.query(`SET LOCAL idle_in_transaction_session_timeout = '${EXPORT_STALL_TIMEOUT}'`);
    const counts = { threads: 0, messages: 0 };
    let after: ThreadCursor | undefined;
    for (;;) {
      const page = await listThreads(client, { userId, limit: EXPORT_THREAD_BATCH, after });
      for (const thread of page.threads) {
        counts.threads += 1;
        yield { type: "thread", ...thread };
        for await (const message of threadMessages(client, thread.id)) {
          counts.messages += 1;
          yield message;
        }
      }
      if (!page.next) break;
      after = page.next;
    }
    yield { type: "end", ...counts };
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // Read-only: ending it with ROLLBACK loses nothing. Also runs when the export is abandoned
    // mid-way (the HTTP client went away); a connection that failed is discarded, not reused.
    if (open && !failed) await client.query("ROLLBACK");
    client.release(failed);
  }
}

async function* threadMessages(client: pg.PoolClient, threadId: string): AsyncGenerator<{ type: "message" } & ExportedMessage> {
  let from = { turnSeq: "0", seq: "0" };
  for (;;) {
    const { rows } = await client.query<MessageRow>(sql.selectExportMessages, [threadId, from.turnSeq, from.seq, EXPORT_MESSAGE_BATCH]);
    for (const row of rows) {
      yield {
        type: "message",
        threadId,
        id: row.id,
        role: row.kind === "agent" ? "assistant" : row.kind,
        agentName: row.agent_name,
        content: row.content,
        createdAt: row.created_at.toISOString(),
        ...(row.kind === "agent" ? { answers: row.answers!, variant: row.variant!, ...(row.stopped ? { stopped: true as const } : {}) } : {}),
      };
    }
    if (rows.length < EXPORT_MESSAGE_BATCH) return;
    const last = rows.at(-1)!;
    from = { turnSeq: last.turn_seq, seq: last.seq };
  }
}
