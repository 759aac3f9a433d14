import type pg from "pg";
import { z } from "zod";
import { failTurn } from "../history/turns.js";
import { describeFailure } from "./failure-message.js";
import { announceTurnFinished } from "./turn-finished.js";

type FailureContext = {
  event: { data: { run_id: string; event?: { data?: unknown } } };
  error: Error;
  step: { run: <T>(id: string, fn: () => Promise<T>) => Promise<unknown> };
};

/** The ids a failed run's event carried: a chat turn's thread is its first message's id when absent. */
const failedTurnEvent = z.object({ messageId: z.uuid(), threadId: z.uuid().optional() });

/**
 * The onFailure handler of turn functions: once a run has used up its retries (or failed
 * non-retriably), its turn is recorded as failed with the run id and a readable cause (the
 * provider's status and reason, no credentials), and a later turn waiting for it is released.
 * The user's message stays stored, so a regenerate can complete the turn later.
 */
export const recordTurnFailure =
  (db: pg.Pool) =>
  async ({ event, error, step }: FailureContext) => {
    const runId = event.data.run_id;
    await step.run("turn.record-failure", () => failTurn(db, runId, describeFailure(error)));
    // An event refused by its schema never started a turn: nobody waits for it.
    const ids = failedTurnEvent.safeParse(event.data.event?.data);
    if (!ids.success) return;
    const { messageId, threadId = messageId } = ids.data;
    await announceTurnFinished(step, { threadId, runId, messageId, status: "failed" });
  };
