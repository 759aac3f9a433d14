import { cron } from "inngest";
import { inngest, type StepTools } from "../../inngest.config.js";

/**
 * A function on a schedule (`schedule`: Inngest's cron syntax, with its TZ= prefix where given).
 * One run at a time: two would work on the same rows.
 */
export function createCron<T>(
  options: { id: string; name: string; schedule: string; retries: 2 | 4 },
  handler: (step: StepTools) => Promise<T>,
) {
  const { id, name, schedule, retries } = options;
  return inngest.createFunction(
    { id, name, triggers: [cron(schedule)], concurrency: { limit: 1 }, retries },
    ({ step }) => handler(step),
  );
}

/**
 * Runs `deleteBatch` for batches 0, 1, … (each its own step or steps, named after its number), until
 * one deletes fewer than `batchSize` rows or `maxBatches` ran; a larger backlog is left to the next run.
 */
export async function inBatches(
  { batchSize, maxBatches }: { batchSize: number; maxBatches: number },
  deleteBatch: (batch: number) => Promise<number>,
) {
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch += 1) {
    const gone = await deleteBatch(batch);
    deleted += gone;
    if (gone < batchSize) return { status: "done" as const, deleted };
  }
  return { status: "more-next-run" as const, deleted };
}
