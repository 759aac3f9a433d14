import type pg from "pg";
import { turnRetrying, type TurnRetrying } from "./thread-log.js";
import * as sql from "./turn-retrying-sql.js";

/**
 * Records a failed attempt of run `runId`'s turn and logs it, once per failed attempt (`key`
 * names the step and its attempt), in one statement (threadline_turn_retrying). Writes
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
