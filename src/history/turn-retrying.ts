import type pg from "pg";
import { z } from "zod";
import * as sql from "./turn-retrying-sql.js";

/**
 * A failed attempt of a running turn that Inngest will retry: the thread log's `turn.retrying`
 * event and what the messages API shows as the turn's `retrying` status.
 * `attempt`: the attempt that comes next, counted from 1 (2 after the first failure);
 * `maxAttempts`: the run's attempts in all (retries + 1); `nextAttemptAt`: when, if known (ISO).
 * Imports: pg, zod and turn-retrying-sql.ts.
 */
const turnRetrying = z.object({
  attempt: z.int().min(2),
  maxAttempts: z.int().min(2),
  cause: z.string(),
  nextAttemptAt: z.iso.datetime().optional(),
});
export type TurnRetrying = z.infer<typeof turnRetrying>;

/**
 * Records a failed attempt of run `runId`'s turn and logs it, once per failed attempt (`key`
 * names the step and its attempt), in one statement (migrations/0014_turn_retrying.sql). Writes
 * nothing once the turn has ended, or for a run with no turn. Returns whether it wrote.
 */
export async function recordTurnRetrying(
  db: pg.Pool,
  runId: string,
  key: string,
  retry: TurnRetrying,
): Promise<boolean> {
  const { rows } = await db.query<sql.RecordTurnRetryingRow>(sql.recordTurnRetrying, [
    runId,
    key,
    turnRetrying.parse(retry),
  ]);
  return rows[0]?.id !== null;
}

/** The retried step succeeded: the turn is running again, no longer retrying. */
export async function clearTurnRetrying(db: pg.Pool, runId: string): Promise<void> {
  await db.query(sql.clearTurnRetrying, [runId]);
}
