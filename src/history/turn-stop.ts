import type pg from "pg";
import { HistoryRefusal, threadNotOwned } from "./errors.js";
import { resultId } from "./ids.js";
import { runningTurn } from "./turn-runs.js";
import * as sql from "./turn-stop-sql.js";

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

  const { rows } = await db.query<{ refusal: string | null; message_id: string; variant: number; stored: number }>(
    sql.stopTurn,
    [threadId, userId, running.runId, resultId(running.messageId, running.variant, 0), input.agentName],
  );
  const row = rows[0]!;
  // The turn finished (or was stopped by another request) between the two statements.
  if (row.refusal === "not_running") throw nothingRunning(threadId, messageId);
  // The thread was deleted between them (its owner never changes).
  if (row.refusal) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
  return { runId: running.runId, messageId: row.message_id, variant: row.variant, answerStored: row.stored > 0 };
}
