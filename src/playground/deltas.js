/**
 * The readers' rule for streamed inference deltas, as src/stream/deltas.ts states it (the page
 * loads no TypeScript): per run and inference step only the latest attempt counts, its deltas
 * concatenated in log order; a later attempt replaces what an earlier one streamed, and a late
 * delta of an earlier attempt is dropped.
 */

/** Whether a `text.delta` row's data is one streamed by an inference step. */
export const isInferenceDelta = (data) =>
  typeof data?.runId === "string" &&
  typeof data.stepId === "string" &&
  typeof data.attempt === "number" &&
  typeof data.delta === "string";

/**
 * The text each inference step streamed, in the order the steps' surviving attempts started:
 * `[{runId, stepId, attempt, text}]`. `events` are rows `{event, data}` in id order.
 */
export function streamedTexts(events, runId) {
  const byStep = new Map();
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
