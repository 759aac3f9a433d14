import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { InngestTestEngine } from "@inngest/test";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { countingPool } from "./counting-pool.js";
import { inferOverHttp, recordSentEvents, withFunctionMiddleware } from "./engine.js";

/** Where a statement sent by no step is counted (code outside steps must send none). */
const OUTSIDE_STEPS = "(outside any step)";

/**
 * A pool that counts every SQL statement against the Inngest step that sent it, and a way to run
 * an event to the end under InngestTestEngine (inference over HTTP, sent events recorded) with
 * each step.run callback tagged by its step id. `perStep` holds the counts of the latest run,
 * `sqlTime` how long it waited for the database.
 */
export function statementsPerStep(db: pg.Pool) {
  const currentStep = new AsyncLocalStorage<string>();
  const perStep = new Map<string, number>();
  /** Milliseconds the latest run spent waiting for the database, summed over its statements. */
  const sqlTime = { ms: 0 };
  const counting = countingPool(db, () => {
    const step = currentStep.getStore() ?? OUTSIDE_STEPS;
    perStep.set(step, (perStep.get(step) ?? 0) + 1);
    const sent = performance.now();
    return () => {
      sqlTime.ms += performance.now() - sent;
    };
  });

  /** Runs the event to the end; returns how many steps ran and what the run returned. */
  async function run(fn: InngestFunction.Like, event: { name: string; data: Record<string, unknown> }) {
    perStep.clear();
    sqlTime.ms = 0;
    const runId = `run-${randomUUID()}`;
    const engine = new InngestTestEngine({
      function: withFunctionMiddleware(fn),
      events: [{ id: `event-${randomUUID()}`, ...event }],
      transformCtx: (raw) => {
        const ctx = recordSentEvents([])(inferOverHttp(runId)(raw)) as typeof raw & {
          step: { run: (id: string, work: () => unknown) => unknown };
        };
        const stepRun = ctx.step.run;
        return {
          ...ctx,
          step: { ...ctx.step, run: (id: string, work: () => unknown) => stepRun(id, () => currentStep.run(id, work)) },
        } as typeof raw;
      },
    });
    const output = (await engine.execute()) as unknown as {
      result?: unknown;
      error?: unknown;
      state: Record<string, unknown>;
    };
    return { steps: Object.keys(output.state).length, result: output.result, error: output.error };
  }

  return { pool: counting.pool, perStep, sqlTime, run };
}

/** The statement count of a run in total. */
export const totalStatements = (perStep: Map<string, number>) => [...perStep.values()].reduce((a, b) => a + b, 0);
