import type pg from "pg";
import { failTurn } from "../history/store.js";

type FailureContext = {
  event: { data: { run_id: string } };
  error: Error;
  step: { run: <T>(id: string, fn: () => Promise<T>) => Promise<unknown> };
};

/**
 * The onFailure handler of turn functions: once a run has used up its retries (or failed
 * non-retriably), its turn is recorded as failed with the run id and the error. The user's
 * message stays stored, so a regenerate can complete the turn later.
 */
export const recordTurnFailure = (db: pg.Pool) => async ({ event, error, step }: FailureContext) => {
  await step.run("turn.record-failure", () => failTurn(db, event.data.run_id, error.message));
};
