/**
 * The readers' rule for streamed inference deltas, written once for the server and the page: the
 * page loads its modules as they are (no build step), so the rule is plain JavaScript here, and
 * src/stream/deltas.ts serves it to the server's TypeScript (types: deltas.d.ts).
 *
 * An inference step's deltas (thread-log.ts: inferenceDelta) are keyed `<stepId>:delta:<n>` in the
 * log (n counts the batches of that attempt) under the step's attempt, so a retried step writes
 * its own rows next to the failed attempt's instead of colliding. Per run and inference step only
 * the latest attempt counts, its deltas concatenated in log order; a later attempt replaces what
 * an earlier one streamed (the failed attempt's partial text is superseded), and a late delta of
 * an earlier attempt is dropped.
 */

/** Whether a `text.delta` row's data is one streamed by an inference step (else AgentKit's own chunk). */
export const isInferenceDelta = (data) =>
  typeof data?.runId === "string" &&
  typeof data.stepId === "string" &&
  typeof data.attempt === "number" &&
  typeof data.delta === "string";

/**
 * The text each inference step streamed, in the order the steps' surviving attempts started:
 * `[{runId, stepId, attempt, text}]`. `events` are rows `{event, data}` in id order; with `runId`,
 * only that run's steps.
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
