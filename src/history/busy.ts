import type pg from "pg";
import { type StepTools, turnFinished, turnStopRequested } from "../../inngest.config.js";
import type { BusyPolicy } from "./busy-policy.js";
import * as sql from "./busy-sql.js";
import { durably } from "./durable.js";
import { HistoryRefusal } from "./errors.js";
import { resultId } from "./ids.js";
import { transaction } from "./transaction.js";

/**
 * A chat message sent while a turn of its thread is unfinished meets its busy policy
 * (busy-policy.ts). enqueue needs nothing here: its turn waits (turn-waits.ts). reject is refused
 * twice over: by the sending route before the event is sent (checkNotBusy), and, for a raw event or
 * a turn that started in between, by the turn's first statement (threadline_begin_turn raises
 * TL409; store.ts beginTurn logs the refusal, logRefusal, and fails the run non-retriably with
 * ThreadBusy): nothing is stored either way, and no turn begins. interrupt and rollback are done
 * by the new turn itself, after its message is stored and before it waits (interruptEarlierTurns),
 * so the HTTP routes and the raw event behave alike.
 * Imports: pg, inngest.config.ts's events, storage modules, ids.
 */

/** The unfinished turn a rejected message met: its run and the user message it answers. */
export type BusyTurn = { runId: string; messageId: string };

/**
 * A message refused by policy reject: the thread is answering another (HTTP 409 naming it). With
 * `action`, another change refused while the thread answers (an edit or a branch switch: branches.ts).
 */
export class ThreadBusy extends HistoryRefusal {
  constructor(
    threadId: string,
    readonly runningTurn: BusyTurn,
    action?: string,
  ) {
    super(
      "thread_busy",
      action === undefined
        ? `Thread ${threadId} is still answering message ${runningTurn.messageId} (run ${runningTurn.runId}), and this message was sent with busy "reject": it was not accepted, nothing was stored. Send it again once that answer has finished (or after stopping it: POST /api/threads/${threadId}/stop), or send it with busy "enqueue", "interrupt" or "rollback".`
        : `Thread ${threadId} is still answering message ${runningTurn.messageId} (run ${runningTurn.runId}): nothing was changed. Wait for that answer to finish (or stop it: POST /api/threads/${threadId}/stop), then ${action}.`,
    );
  }
}

/** What threadline_begin_turn raises for a message refused by policy reject (DETAIL: the turn's ids as JSON). */
const THREAD_BUSY_SQLSTATE = "TL409";

/** The ThreadBusy a database error stands for, or undefined when it is another error. */
export function threadBusyFromError(error: unknown, threadId: string): ThreadBusy | undefined {
  if (typeof error !== "object" || error === null || (error as { code?: unknown }).code !== THREAD_BUSY_SQLSTATE)
    return undefined;
  return new ThreadBusy(threadId, JSON.parse(String((error as { detail?: unknown }).detail)) as BusyTurn);
}

/** The log key of a run's refusal, which threadline_begin_turn looks for (a run refuses once and for good). */
const REFUSED_KEY = "message.refused";

/**
 * Logs run `runId`'s refusal of message `messageId` (ThreadBusy, from the turn's first statement):
 * message.refused (the running turn and the reason), then stream.ended with status refused, under
 * the run's own keys, so however often the refusal is reported the log holds it once; nothing when
 * the run's stream had ended otherwise meanwhile (busy-sql.ts insertRefusal). The run
 * began no turn, so these rows are what ends the wait of a stream following the message (the UI
 * message stream, the thread's event stream). Asking again, the run is refused again
 * (threadline_begin_turn finds this row), whatever the thread does meanwhile.
 */
export async function logRefusal(
  db: pg.Pool,
  input: { threadId: string; runId: string; messageId: string },
  refusal: ThreadBusy,
): Promise<void> {
  const { threadId, runId, messageId } = input;
  const events = [
    {
      key: REFUSED_KEY,
      event: "message.refused",
      data: { runId, messageId, code: "thread_busy", runningTurn: refusal.runningTurn, error: refusal.message },
    },
    { key: "stream.ended", event: "stream.ended", data: { scope: "network", status: "refused", runId, messageId } },
  ];
  // Not after another ending of the run (its cancellation, logged since the refusal was raised).
  await transaction(db, async (client) => {
    await client.query(sql.lockRefusingThread, [threadId]);
    await client.query(sql.insertRefusal, [threadId, runId, JSON.stringify(events)]);
  });
}

/**
 * Before a route sends a message with policy reject (one read): refused when the thread is
 * answering another message. A message already stored is a re-send and is never refused.
 */
export async function checkNotBusy(
  db: pg.Pool,
  input: { threadId: string; messageId: string; busy: BusyPolicy },
): Promise<void> {
  if (input.busy !== "reject") return;
  const { rows } = await db.query<sql.SelectBusyTurnRow>(sql.selectBusyTurn, [input.threadId, input.messageId]);
  const row = rows[0];
  if (row) throw new ThreadBusy(input.threadId, { runId: row.run_id, messageId: row.message_id });
}

/** A turn a message sent with interrupt or rollback ended (or found finished, and still rolled back). */
export type InterruptedTurn = BusyTurn & {
  variant: number;
  /** Stopped by this message; false: it had finished meanwhile. */
  stopped: boolean;
  /** What it had streamed was stored as its answer, marked stopped. */
  answerStored: boolean;
  /** Its user message and answers left the current path (rollback). */
  rolledBack: boolean;
};

/**
 * Policy interrupt or rollback, run by the new message's turn once its message is stored (so a
 * turn that begins meanwhile is behind it, never missed), before it waits for earlier turns:
 * - history.find-turns-to-interrupt: the unfinished turns ahead of it (none: nothing more is done);
 * - history.interrupt-turns: stops them as the stop route does (threadline_interrupt_turns; with
 *   rollback, their messages and partial answers leave the current path), one statement;
 * - history.announce-interrupted: for each turn stopped, the stop route's two events under the
 *   same ids (its run is cancelled; a turn waiting for it, this one included, is released).
 * The partial answers are attributed to `agentName` (the agent that answers the user).
 */
export async function interruptEarlierTurns(
  step: StepTools,
  db: pg.Pool,
  turn: { threadId: string; userId: string; runId: string; messageId: string; agentName: string; rollback: boolean },
): Promise<InterruptedTurn[]> {
  const { threadId, userId } = turn;
  const ahead = await durably(step, "history.find-turns-to-interrupt", async () => {
    const { rows } = await db.query<sql.SelectTurnsAheadRow>(sql.selectTurnsAhead, [turn.runId]);
    return rows.map((row) => ({ runId: row.run_id, resultId: resultId(row.message_id, row.variant, 0) }));
  });
  if (ahead.length === 0) return [];
  const interrupted = await durably(step, "history.interrupt-turns", async () => {
    const { rows } = await db.query<sql.InterruptTurnsRow>(sql.interruptTurns, [
      threadId,
      userId,
      turn.runId,
      turn.messageId,
      JSON.stringify(ahead),
      turn.agentName,
      turn.rollback,
    ]);
    return rows.map(
      (row): InterruptedTurn => ({
        runId: row.run_id,
        messageId: row.message_id,
        variant: row.variant,
        stopped: row.stopped,
        answerStored: row.answer_stored,
        rolledBack: row.rolled_back,
      }),
    );
  });
  const stopped = interrupted.filter((t) => t.stopped);
  if (stopped.length > 0) {
    await step.sendEvent(
      "history.announce-interrupted",
      stopped.flatMap(({ runId, messageId }) => [
        turnStopRequested.create({ threadId, userId, runId, messageId }, { id: `turn-stop-${runId}` }),
        turnFinished.create({ threadId, runId, messageId, status: "stopped" }, { id: `turn-finished-${runId}` }),
      ]),
    );
  }
  return interrupted;
}
