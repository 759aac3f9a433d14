import type pg from "pg";
import * as sql from "./lost-turns-sql.js";

/**
 * Turns whose run the engine may have lost: what the reconciler (src/functions/reconcile-turns.ts)
 * asks the engine about. Recording one as failed is turns.ts's failLostTurn.
 * Imports: pg and lost-turns-sql.ts.
 */

/** Default LOST_RUN_DEADLINE_MINUTES: longer than a turn that retries its model five times (~4.6 minutes). */
export const DEFAULT_LOST_RUN_DEADLINE_MINUTES = 10;

export type LongRunningTurn = { runId: string; threadId: string; messageId: string; overdue: boolean };

/** Running turns older than `checkAfterSeconds`, oldest first, and which are overdue (see sql.selectLongRunningTurns). */
export async function longRunningTurns(
  db: pg.Pool,
  input: { now: Date; checkAfterSeconds: number; deadlineMinutes: number; limit: number },
): Promise<LongRunningTurn[]> {
  const { rows } = await db.query<sql.SelectLongRunningTurnsRow>(sql.selectLongRunningTurns, [
    input.now.toISOString(),
    input.checkAfterSeconds,
    input.deadlineMinutes,
    input.limit,
  ]);
  return rows.map((row) => ({
    runId: row.run_id,
    threadId: row.thread_id,
    messageId: row.message_id,
    overdue: row.overdue,
  }));
}
