import { Middleware } from "inngest";
import type pg from "pg";
import { clearTurnRetrying, recordTurnRetrying } from "../history/turn-retrying.js";
import { describeFailure } from "./failure-message.js";

/**
 * While a turn's step is retried, clients see it: each failed attempt that Inngest will retry is
 * recorded on the running turn and logged as `turn.retrying {attempt, maxAttempts, cause}` (the
 * attempt that comes next, counted from 1), once per failed attempt and never after the turn
 * ended (src/history/turn-retrying.ts). When the retried step succeeds, the turn is running again.
 *
 * The SDK reports every attempt of a step it executes (step.run: the history steps, and each
 * inference under INFERENCE=stream). Under INFERENCE=gateway the Inngest server retries a failed
 * step.ai.infer itself and hands the SDK only the last attempt's error, so those attempts are not
 * seen here (docs/engine.md).
 */
export function turnRetryMiddleware(db: pg.Pool, retries: number) {
  return class TurnRetryMiddleware extends Middleware.BaseMiddleware {
    readonly id = "threadline/turn-retrying";

    override async onStepError({ ctx, error, isFinalAttempt, stepInfo }: Middleware.OnStepErrorArgs) {
      if (isFinalAttempt) return;
      const maxAttempts = ctx.maxAttempts ?? retries + 1;
      const attempt = ctx.attempt + 2;
      await recordTurnRetrying(db, ctx.runId, `turn.retrying:${stepInfo.hashedId}:${attempt}`, {
        attempt,
        maxAttempts,
        cause: describeFailure(error),
      });
    }

    override async onStepComplete({ ctx, stepInfo }: Middleware.OnStepCompleteArgs) {
      if (ctx.attempt > 0 && !stepInfo.memoized) await clearTurnRetrying(db, ctx.runId);
    }
  };
}
