/**
 * Storage work run as an Inngest step, with refusals made non-retriable. Stores nothing.
 * Imports: inngest and errors.ts only.
 */
import { NonRetriableError } from "inngest";
import type { StepTools } from "../../inngest.config.js";
import { HistoryRefusal } from "./errors.js";

/**
 * Runs storage work as a step: a refusal becomes non-retriable, anything else is retried with
 * Inngest's backoff. (Waiting for an earlier turn is not an error: see turn-waits.ts.)
 */
export async function durably<R>(step: StepTools | undefined, id: string, work: () => Promise<R>): Promise<R> {
  const guarded = () =>
    work().catch((error: unknown) => {
      if (error instanceof HistoryRefusal) throw new NonRetriableError(error.message, { cause: error });
      throw error;
    });
  if (!step) return guarded();
  return (await step.run(id, guarded)) as R;
}
