import type pg from "pg";
import { threadDeleted } from "../../inngest.config.js";
import { DEFAULT_TOMBSTONE_DAYS, deleteExpiredThreads, pruneTombstones, retentionCutoff } from "../history/threads.js";
import { createCron, inBatches } from "./cron.js";

/** Threads one step deletes at most: bounds the step's time, locks and output. */
export const RETENTION_BATCH = 200;

/** Batches one run deletes at most (10,000 threads); a larger backlog continues on the next hour's run. */
const RETENTION_MAX_BATCHES = 50;

/** Tombstones one run prunes at most; a larger backlog continues on the next hour's run. */
const TOMBSTONE_BATCH = 10_000;

/**
 * Prunes the tombstones of threads deleted more than `tombstoneDays` ago (THREAD_TOMBSTONE_DAYS),
 * so their ids may be used again, and deletes threads inactive for longer than RETENTION_DAYS (unset: keeps everything), every hour.
 * The cutoff is fixed once per run (a step), then each batch is a step that deletes up to
 * RETENTION_BATCH expired threads and the next step announces them (thread/deleted). Idempotent:
 * a retried or re-run batch finds only threads still expired, and the announcement's event ids
 * are derived from the threads.
 */
export function createThreadRetention({
  db,
  retentionDays,
  tombstoneDays = DEFAULT_TOMBSTONE_DAYS,
}: {
  db: pg.Pool;
  retentionDays?: number | undefined;
  tombstoneDays?: number | undefined;
}) {
  return createCron(
    {
      id: "thread-retention",
      name: "Delete inactive threads (RETENTION_DAYS)",
      schedule: "TZ=UTC 17 * * * *",
      retries: 4,
    },
    async (step) => {
      // Every deletion leaves a tombstone (retention off or not): pruned here, whatever RETENTION_DAYS says.
      const tombstonesPruned = await step.run("retention.prune-tombstones", () =>
        pruneTombstones(db, tombstoneDays, TOMBSTONE_BATCH),
      );
      if (retentionDays === undefined) return { status: "disabled" as const, deleted: 0, tombstonesPruned };
      const cutoff = await step.run("retention.cutoff", () => retentionCutoff(db, retentionDays));
      const { status, deleted } = await inBatches(
        { batchSize: RETENTION_BATCH, maxBatches: RETENTION_MAX_BATCHES },
        async (batch) => {
          const gone = await step.run(`retention.delete-batch-${batch}`, () =>
            deleteExpiredThreads(db, cutoff, RETENTION_BATCH),
          );
          if (gone.length > 0) {
            await step.sendEvent(
              `retention.announce-batch-${batch}`,
              gone.map((thread) =>
                threadDeleted.create({ ...thread, reason: "retention" }, { id: `thread-deleted-${thread.threadId}` }),
              ),
            );
          }
          return gone.length;
        },
      );
      return { status, cutoff, deleted, tombstonesPruned };
    },
  );
}
