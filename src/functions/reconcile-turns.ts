import type pg from "pg";
import { DEFAULT_LOST_RUN_DEADLINE_MINUTES, longRunningTurns } from "../history/lost-turns.js";
import { failLostTurn } from "../history/turns.js";
import { askEngineAboutRun, type InngestEngine, type RunVerdict } from "../platform/inngest-engine.js";
import { logger } from "../platform/logger.js";
import { createCron } from "./cron.js";
import { turnFinishedEvent } from "./turn-lifecycle.js";

/** A turn is asked about once it has run this long: every live run is known to the engine well before. */
const CHECK_AFTER_SECONDS = 60;

/** Turns one reconciliation looks at, at most; a larger backlog is taken on the next run. */
const RECONCILE_BATCH = 50;

const regenerate = "Regenerate the message to answer it.";

const lostBecause = (verdict: RunVerdict): string | undefined => {
  if (verdict.verdict === "unknown")
    return `Inngest no longer knows this turn's run: it was lost (e.g. an Inngest server restarted without a persistent Redis). ${regenerate}`;
  if (verdict.verdict === "ended")
    return `Inngest reports this turn's run as ${verdict.status}, but its end was never recorded. ${regenerate}`;
  return undefined;
};

const overdueError = (deadlineMinutes: number) =>
  `No finish was reported for this turn within LOST_RUN_DEADLINE_MINUTES (${deadlineMinutes} minutes) of its thread's turn coming: its run is presumed lost. ${regenerate}`;

/**
 * Every two minutes: turns still running whose run the engine has lost are recorded as failed, so
 * their thread is not blocked (the next message is answered) and a regenerate answers them.
 * Every turn running for over a minute is looked up in Inngest's REST API (GET /v1/runs/:runId):
 * a run the engine does not know, or one it reports ended, is lost. Where the API cannot tell —
 * it is unreachable, or a self-hosted server that lost its queue still lists the run as running —
 * the turn a thread is answering is presumed lost once it has run for LOST_RUN_DEADLINE_MINUTES.
 * Each recorded failure releases the turns waiting for it (threadline/turn.finished).
 */
export function createReconcileTurns({
  db,
  engine,
  deadlineMinutes = DEFAULT_LOST_RUN_DEADLINE_MINUTES,
  clock = () => new Date(),
}: {
  db: pg.Pool;
  engine: InngestEngine;
  deadlineMinutes?: number | undefined;
  /** The reconciliation's clock, read inside its first step (tests move it forward). */
  clock?: () => Date;
}) {
  return createCron(
    // Every two minutes: a lost turn is found within about three, at 720 runs a day.
    { id: "reconcile-turns", name: "Record turns whose run was lost", schedule: "*/2 * * * *", retries: 2 },
    async (step) => {
      const { now, candidates } = await step.run("reconcile.find-long-running", async () => {
        const now = clock();
        return {
          now: now.toISOString(),
          candidates: await longRunningTurns(db, {
            now,
            checkAfterSeconds: CHECK_AFTER_SECONDS,
            deadlineMinutes,
            limit: RECONCILE_BATCH,
          }),
        };
      });
      if (candidates.length === 0) return { checked: 0, lost: 0 };

      // One step for all the lookups: its answers are memoized together, so the decision replays the same.
      const verdicts = await step.run("reconcile.ask-engine", () =>
        Promise.all(candidates.map((turn) => askEngineAboutRun(engine, turn.runId, { now: new Date(now) }))),
      );
      const lost = candidates.flatMap((turn, i) => {
        const error = lostBecause(verdicts[i]!) ?? (turn.overdue ? overdueError(deadlineMinutes) : undefined);
        return error ? [{ ...turn, error }] : [];
      });
      if (lost.length === 0) return { checked: candidates.length, lost: 0 };

      const recorded = await step.run("reconcile.record-lost", async () => {
        const failed: typeof lost = [];
        for (const turn of lost) if (await failLostTurn(db, turn.runId, turn.error)) failed.push(turn);
        for (const turn of failed)
          logger.warn(
            { runId: turn.runId, threadId: turn.threadId, error: turn.error },
            "turn recorded failed: its run was lost",
          );
        return failed;
      });
      if (recorded.length > 0) {
        // The same event id as the run's own finish: Inngest keeps one, whoever reports it.
        await step.sendEvent(
          "reconcile.turns-finished",
          recorded.map(({ threadId, runId, messageId }) =>
            turnFinishedEvent({ threadId, runId, messageId, status: "failed" }),
          ),
        );
      }
      return { checked: candidates.length, lost: recorded.length, runIds: recorded.map((turn) => turn.runId) };
    },
  );
}
