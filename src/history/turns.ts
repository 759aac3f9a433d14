import type pg from "pg";
import { logger } from "../platform/logger.js";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import { resultId } from "./ids.js";
import { transaction } from "./transaction.js";
import { runningTurn } from "./turn-runs.js";
import * as sql from "./turns-sql.js";

/**
 * Every status change of a started turn made from TypeScript, each one statement: failed (by its
 * run's onFailure, as lost, or abandoned by a later turn's wait), cancelled and skipped (a
 * duplicate run whose message got its answer meanwhile) written here, and stopped by the user
 * (threadline_stop_turn); each also ends the turn's event stream in it.
 * Set inside PL/pgSQL instead: running or skipped by threadline_begin_turn, completed or superseded
 * by threadline_store_answer (store.ts runs both). Imports: pg, storage modules, ids, the logger.
 */

/**
 * Records run `runId`'s turn as failed with `error` (only while it is still running), ending its
 * event stream in the same statement; false when it had finished meanwhile. A run that was not
 * lost after all still completes the turn if it stores an answer (storing does not depend on the
 * turn's status); a streaming one stops at its next batch of text, which finds the turn ended.
 */
export async function failLostTurn(db: pg.Pool, runId: string, error: string): Promise<boolean> {
  const { rowCount } = await db.query(sql.failTurn, [runId, error]);
  return (rowCount ?? 0) > 0;
}

/**
 * The message a run was sent for, as its event names it: its thread, message and user, and, for a
 * chat message that would create its thread when new, when it was sent (`sentAt`, ms since the
 * epoch).
 */
export type SentMessage = {
  threadId: string;
  messageId: string;
  userId?: string | undefined;
  sentAt?: number | undefined;
};

/**
 * The onFailure handler's write: failLostTurn without the answer, so its step result stays empty.
 * A run that began no turn for the message it was `sent` logs its failure on that thread instead
 * (logUnbegun): a stream waiting for the message's run ends with it. Either write happens once
 * however often it is made.
 */
export async function failTurn(db: pg.Pool, runId: string, error: string, sent?: SentMessage): Promise<void> {
  if ((await failLostTurn(db, runId, error)) || !sent) return;
  await logUnbegun(db, sql.logUnbegunFailure, runId, error, sent);
}

/** The cause a run cancelled before it began a turn logs: it stored nothing. */
export const CANCELLED_BEFORE_BEGIN = "The run was cancelled before it stored the message: send it again.";

/**
 * The cause a run cancelled before it began a turn logs when its message is stored all the same
 * (a regenerate, a rerun of a run that stored it): sent again as new words, it would be held twice.
 */
export const CANCELLED_BEFORE_ANSWERING =
  "The run was cancelled before it began answering; the message is stored: regenerate it for an answer.";

/**
 * Records a cancelled run's turn as cancelled: its thread and message, or null when it had no
 * running turn (nothing to release). A run that began no turn for the message it was `sent`
 * (cancelled while queued, or before its first step stored the message) logs its cancellation
 * on that thread instead (logUnbegun), once: `unbegun` says it did. A run whose turn had finished,
 * or whose thread was deleted (its deletion or its user's erasure cancelled it), logs nothing.
 */
export async function cancelTurn(
  db: pg.Pool,
  runId: string,
  sent?: SentMessage,
): Promise<{ threadId: string; messageId: string; unbegun?: true } | null> {
  const running = await cancelRunningTurn(db, runId);
  if (running || !sent) return running;
  const logged = await logUnbegun(db, sql.logUnbegunCancellation, runId, CANCELLED_BEFORE_BEGIN, sent, [
    CANCELLED_BEFORE_ANSWERING,
  ]);
  // The run's first step, executing when it was cancelled, may have begun its turn since the look
  // above: then nothing was logged (logUnbegun waits for that step's lock on the thread, then sees
  // its turn), and that turn is cancelled now. Logged first, the cancellation refuses the turn
  // instead (threadline_begin_turn).
  const begun = await cancelRunningTurn(db, runId);
  if (begun) return begun;
  return logged ? { threadId: sent.threadId, messageId: sent.messageId, unbegun: true } : null;
}

async function cancelRunningTurn(db: pg.Pool, runId: string) {
  const { rows } = await db.query<sql.CancelTurnRow>(sql.cancelTurn, [runId, "The run was cancelled."]);
  return rows[0] ? { threadId: rows[0].thread_id, messageId: rows[0].message_id } : null;
}

/**
 * Logs how run `runId`, which began no turn, ended (`statement`: sql.logUnbegunFailure or
 * sql.logUnbegunCancellation, with `error` as its cause) on its message's thread, when the thread
 * is the user's; a chat message that would have created its thread (`sentAt`) creates it for
 * this, empty, unless its user was erased since. False when nothing was logged.
 */
async function logUnbegun(
  db: pg.Pool,
  statement: string,
  runId: string,
  error: string,
  sent: SentMessage,
  // The statement's parameters after the four every one takes (logUnbegunCancellation's $5).
  more: readonly string[] = [],
) {
  const { userId } = sent;
  if (userId === undefined) return false;
  const sentAt = sent.sentAt === undefined ? null : new Date(sent.sentAt);
  return transaction(db, async (client) => {
    const thread = [sent.threadId, userId, sent.messageId, sentAt];
    const { rows } = await client.query<sql.SelectUnbegunThreadRow>(sql.selectUnbegunThread, thread);
    if (!rows[0]!.owned) return false;
    await client.query(sql.lockUnbegunThread, [sent.threadId]);
    const logged = await client.query(statement, [sent.threadId, runId, sent.messageId, error, ...more]);
    return (logged.rowCount ?? 0) > 0;
  });
}

/** How long a turn waited for may show no finish before the turn waiting presumes it lost (turn-waits.ts). */
export const PATIENCE_MINUTES = 30;

export const ABANDONED_TURN_ERROR = `No finish was reported for this turn within ${PATIENCE_MINUTES} minutes of a later turn waiting for it: its run is presumed lost. Regenerate the message to answer it.`;

/** Why a chat turn skipped while it waited answers nothing (its turn.skipped's reason, and the run's outcome). */
export const SKIPPED_WHILE_WAITING = "the message was answered by another run while this one waited";

export type EarlierTurn = {
  /** The oldest unfinished turn ahead of this one, or null when the thread is clear. */
  earlier: { runId: string; messageId: string } | null;
  /** This chat turn found its message answered by the run it waited for: recorded as skipped. */
  skipped: boolean;
};

/**
 * One round of a turn's wait (turn-waits.ts), in one statement (see sql.selectEarlierUnfinishedTurn):
 * records `abandon` as failed when given, finds the oldest unfinished turn ahead of run `runId`'s,
 * and records this turn as skipped when its message got its answer meanwhile, ending its stream.
 */
export async function findEarlierTurn(
  db: pg.Pool,
  input: { runId: string; abandon?: string | null },
): Promise<EarlierTurn> {
  const { rows } = await db.query<sql.SelectEarlierUnfinishedTurnRow>({
    name: sql.selectEarlierUnfinishedTurnName,
    text: sql.selectEarlierUnfinishedTurn,
    values: [input.runId, input.abandon ?? null, ABANDONED_TURN_ERROR, SKIPPED_WHILE_WAITING],
  });
  const row = rows[0]!;
  if (row.abandoned > 0)
    logger.warn(
      { runId: input.abandon, waitingRunId: input.runId },
      "turn presumed lost: recorded as failed so later turns can go on",
    );
  return {
    earlier: row.earlier_run_id ? { runId: row.earlier_run_id, messageId: row.earlier_message_id! } : null,
    skipped: row.skipped,
  };
}

/** The turn a stop ended: its run, the user message it answered, and whether a partial answer was stored. */
export type StoppedTurn = { runId: string; messageId: string; variant: number; answerStored: boolean };

const nothingRunning = (threadId: string, messageId: string | undefined) =>
  new HistoryRefusal(
    "no_running_turn",
    messageId
      ? `No turn of thread ${threadId} is answering message ${messageId}: it has finished (read its answer from the messages) or was never sent.`
      : `No turn of thread ${threadId} is running: its latest answer has finished (read it from the messages).`,
  );

/**
 * Stops the user's running turn on a thread: the one answering `messageId` when given, else the
 * one the thread is answering now. In one statement under the thread's lock
 * (threadline_stop_turn in src/history/schema/functions) the turn is recorded as stopped, the text its run
 * streamed so far is stored as its answer variant marked stopped (under the result id the run
 * itself would have used, so nothing is ever stored twice), and the log gets turn.stopped and
 * stream.ended. The partial answer is attributed to `agentName`. Refused: an unknown or another
 * user's thread, and a thread with nothing running (also a repeated stop).
 */
export async function stopRunningTurn(
  db: pg.Pool,
  input: { threadId: string; userId: string; messageId?: string | undefined; agentName: string },
): Promise<StoppedTurn> {
  const { threadId, userId, messageId } = input;
  const found = await runningTurn(db, threadId, messageId);
  if (!found) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  if (found.ownerId !== userId) throw threadNotOwned(threadId);
  const { running } = found;
  if (!running) throw nothingRunning(threadId, messageId);

  const { rows } = await db.query<sql.StopTurnRow>(sql.stopTurn, [
    threadId,
    userId,
    running.runId,
    resultId(running.messageId, running.variant, 0),
    input.agentName,
  ]);
  const row = rows[0]!;
  // The turn finished (or was stopped by another request) between the two statements.
  if (row.refusal === "not_running") throw nothingRunning(threadId, messageId);
  // The thread was deleted between them (its owner never changes).
  if (row.refusal) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  return { runId: running.runId, messageId: row.message_id, variant: row.variant, answerStored: row.stored > 0 };
}
