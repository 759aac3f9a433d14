import { type StepTools, turnFinished, type TurnFinished } from "../../inngest.config.js";

/**
 * Tells a later turn of the thread that waits for this run (src/history/turn-waits.ts) that it
 * may go on. The event id is derived from the run, so however often a run's finish is reported
 * (its own end, onFailure), Inngest keeps one event.
 */
export const announceTurnFinished = (step: StepTools, finished: TurnFinished) =>
  step.sendEvent("turn.finished", turnFinished.create(finished, { id: `turn-finished-${finished.runId}` }));
