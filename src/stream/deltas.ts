import type { ThreadEvent } from "../history/events.js";
import { isInferenceDelta } from "../history/thread-log.js";

/**
 * The text streamed so far by one inference step: only its latest attempt counts. Its deltas
 * (thread-log.ts: inferenceDelta) are keyed `<stepId>:delta:<n>` in the log (n counts the batches
 * of that attempt) under the step's attempt, so a retried step writes its own rows next to the
 * failed attempt's instead of colliding.
 */
export type StreamedText = { runId: string; stepId: string; attempt: number; text: string };

/**
 * Folds a thread's events (in id order) into the text each inference step streamed, in the order
 * the steps started. The reader's rule for retries: a delta of a later attempt of a step replaces
 * everything an earlier attempt streamed (the failed attempt's partial text is superseded), and a
 * late delta of an earlier attempt is dropped.
 */
export function streamedTexts(events: readonly ThreadEvent[], runId?: string): StreamedText[] {
  const byStep = new Map<string, StreamedText>();
  for (const row of events) {
    if (row.event !== "text.delta" || !isInferenceDelta(row.data)) continue;
    const data = row.data;
    if (runId !== undefined && data.runId !== runId) continue;
    const key = `${data.runId}\u0000${data.stepId}`;
    const current = byStep.get(key);
    if (!current || data.attempt > current.attempt) {
      // Deleting first keeps the map in the order the surviving attempts started.
      byStep.delete(key);
      byStep.set(key, { runId: data.runId, stepId: data.stepId, attempt: data.attempt, text: data.delta });
    } else if (data.attempt === current.attempt) {
      current.text += data.delta;
    }
  }
  return [...byStep.values()];
}
