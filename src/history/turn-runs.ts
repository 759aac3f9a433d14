import type pg from "pg";
import { toThreadEvent, type ThreadEvent } from "./events.js";
import * as sql from "./turn-runs-sql.js";

/**
 * The runs behind a conversation turn, for the streams that follow one run (POST /api/ui/chat and
 * its resume route): which run answers a message, which one is generating now, and that run's
 * events from the thread's log.
 * Imports: pg, events.ts and turn-runs-sql.ts.
 */

/** One run of a turn: the answer variant it writes (or, skipped, the one it found), its status and a failure's cause. */
/** A run of a message: `begun` false for one that began no turn (refused, or failed before it: no answer). */
export type TurnRun = { runId: string; variant: number; status: string; error: string | null; begun: boolean };

/** The runs that answered (or are answering) a user message of the thread, oldest first, then those that began no turn. */
export async function messageTurns(db: pg.Pool, threadId: string, messageId: string): Promise<TurnRun[]> {
  const { rows } = await db.query<sql.SelectMessageTurnsRow>(sql.selectMessageTurns, [threadId, messageId]);
  return rows.map((row) => ({
    runId: row.run_id,
    variant: row.variant,
    status: row.status,
    error: row.error,
    begun: row.begun,
  }));
}

/** A turn whose answer is being generated: its run, the user message it answers, the variant it writes. */
export type RunningTurn = { runId: string; messageId: string; variant: number };

/**
 * The thread's owner and its running turn (the one answering `messageId` when given, else the one
 * the thread is answering now: the first in the order later turns wait in), in one read; null
 * `running` when nothing runs, undefined when the thread does not exist. Callers check the owner.
 */
export async function runningTurn(
  db: pg.Pool,
  threadId: string,
  messageId?: string,
): Promise<{ ownerId: string; running: RunningTurn | null } | undefined> {
  const row = (await db.query<sql.SelectRunningTurnRow>(sql.selectRunningTurn, [threadId, messageId ?? null])).rows[0];
  if (!row) return undefined;
  return {
    ownerId: row.user_id,
    running: row.run_id === null ? null : { runId: row.run_id, messageId: row.message_id!, variant: row.variant! },
  };
}

/**
 * One run's events in the owner's thread's log after `afterId`, in id order, at most `limit`;
 * `present` false when the thread is not (or no longer) the owner's.
 */
export async function readRunEventsAfter(
  db: pg.Pool,
  input: { threadId: string; ownerId: string; runId: string; afterId: number; limit: number },
): Promise<{ present: boolean; events: ThreadEvent[] }> {
  const { rows } = await db.query<sql.SelectRunEventsAfterRow>(sql.selectRunEventsAfter, [
    input.threadId,
    input.runId,
    input.afterId,
    input.limit,
    input.ownerId,
  ]);
  const events = rows.flatMap((row) => (row.id === null ? [] : [toThreadEvent(row)]));
  return { present: rows[0]!.present, events };
}

/**
 * What the thread holds of a user message a client shows with these words under this id: nothing
 * (no message has the id: its run never stored it), an edit of it it never stored (the message
 * in its place on the current path has other words; useChat keeps a message's id through its
 * edits), or the words themselves. A message of another thread, or not a user message, is held.
 */
export async function heldWords(
  db: pg.Pool,
  threadId: string,
  messageId: string,
  text: string,
): Promise<"nothing" | "not-the-edit" | "held"> {
  const { rows } = await db.query<sql.SelectSentWordsRow>(sql.selectSentWords, [threadId, messageId]);
  const { stored, current_text: currentText } = rows[0]!;
  if (!stored) return "nothing";
  return currentText !== null && currentText !== text ? "not-the-edit" : "held";
}

/**
 * The user message a regenerate request names: the message itself when it is a user message, the
 * one it answers when it is an answer, the last user message on the current path when none is
 * named; undefined when the thread holds no such message. Callers check ownership first.
 */
export async function answeredMessage(
  db: pg.Pool,
  threadId: string,
  messageId: string | undefined,
): Promise<string | undefined> {
  const { rows } = await db.query<sql.SelectAnsweredMessageRow>(sql.selectAnsweredMessage, [
    threadId,
    messageId ?? null,
  ]);
  return rows[0]?.message_id;
}
