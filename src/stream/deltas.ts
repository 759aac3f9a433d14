import type { ThreadEvent } from "../history/events.js";

/**
 * What a `text.delta` from in-process streaming inference carries: the run, the inference step,
 * the step's attempt (0 first, 1 on its first retry…) and the text. The log row's key is
 * `<stepId>:delta:<n>` (n counts the batches of that attempt) and its attempt column is `attempt`,
 * so a retried step writes its own rows next to the failed attempt's instead of colliding.
 */
export type InferenceDelta = { runId: string; stepId: string; attempt: number; delta: string };

/** The text streamed so far by one inference step: only its latest attempt counts. */
export type StreamedText = { runId: string; stepId: string; attempt: number; text: string };

const isInferenceDelta = (data: Record<string, unknown>): data is InferenceDelta =>
  typeof data.runId === "string" &&
  typeof data.stepId === "string" &&
  typeof data.attempt === "number" &&
  typeof data.delta === "string";

/**
 * Folds a thread's events (in id order) into the text each inference step streamed, in the order
 * the steps started. The reader's rule for retries: a delta of a later attempt of a step replaces
 * everything an earlier attempt streamed (the failed attempt's partial text is superseded), and a
 * late delta of an earlier attempt is dropped.
 */
export function streamedTexts(events: readonly ThreadEvent[], runId?: string): StreamedText[] {
  const byStep = new Map<string, StreamedText>();
  for (const { event, data } of events) {
    if (event !== "text.delta" || !isInferenceDelta(data)) continue;
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
