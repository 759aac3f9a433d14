import type pg from "pg";
import { DEFAULT_EVENT_RETENTION_HOURS, deleteEventsBefore, eventCutoff } from "../history/events.js";
import { createCron, inBatches } from "./cron.js";

/** Events one step deletes at most: bounds the step's time and locks. */
const EVENT_PRUNE_BATCH = 5_000;

/** Batches one run deletes at most; a larger backlog continues on the next run. */
const EVENT_PRUNE_MAX_BATCHES = 100;

/**
 * Prunes the thread event log: rows older than EVENT_LOG_RETENTION_HOURS (but a running turn's)
 * are deleted every 10 minutes, oldest first, in batches of EVENT_PRUNE_BATCH (one step each). The log is for watching
 * and resuming a turn; the conversation itself is in the messages, which this never touches.
 * The cutoff is fixed once per run, so a retried batch deletes only what is still old.
 */
export function createEventRetention({
  db,
  eventRetentionHours = DEFAULT_EVENT_RETENTION_HOURS,
}: {
  db: pg.Pool;
  eventRetentionHours?: number | undefined;
}) {
  return createCron(
    {
      id: "event-retention",
      name: "Prune the thread event log (EVENT_LOG_RETENTION_HOURS)",
      schedule: "TZ=UTC */10 * * * *",
      retries: 4,
    },
    async (step) => {
      const cutoff = await step.run("events.cutoff", () => eventCutoff(db, eventRetentionHours));
      const { status, deleted } = await inBatches(
        { batchSize: EVENT_PRUNE_BATCH, maxBatches: EVENT_PRUNE_MAX_BATCHES },
        (batch) => step.run(`events.delete-batch-${batch}`, () => deleteEventsBefore(db, cutoff, EVENT_PRUNE_BATCH)),
      );
      return { status, cutoff, deleted };
    },
  );
}
