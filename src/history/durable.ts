import { NonRetriableError, RetryAfterError } from "inngest";
import { EarlierTurnRunning, HistoryRefusal } from "./errors.js";

type StepRunner = { run: <T>(id: string, fn: () => Promise<T>) => Promise<unknown> };

/** How long a history read waits before looking again for an earlier turn's answer. */
export const EARLIER_TURN_RETRY_AFTER = "15s";

/**
 * Runs storage work as a step: a refusal becomes non-retriable, a wait for an earlier turn is
 * retried after a pause, anything else is retried with Inngest's backoff.
 */
export async function durably<R>(step: unknown, id: string, work: () => Promise<R>): Promise<R> {
  const guarded = () =>
    work().catch((error: unknown) => {
      if (error instanceof HistoryRefusal) throw new NonRetriableError(error.message, { cause: error });
      if (error instanceof EarlierTurnRunning) throw new RetryAfterError(error.message, EARLIER_TURN_RETRY_AFTER, { cause: error });
      throw error;
    });
  if (!step) return guarded();
  return (await (step as StepRunner).run(id, guarded)) as R;
}
