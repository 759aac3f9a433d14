import { chatMessageRegenerate, inngest } from "../../inngest.config.js";
import type { FunctionDeps } from "./chat-turn.js";
import { REGENERATE_ID, turnOptions } from "./turn-lifecycle.js";
import { runTurn } from "./turn-runner.js";

/**
 * Regenerates the answer to a stored user message: the same durable turn as a chat turn, on a
 * message that is already stored. The model sees the thread as it stood before that message,
 * then the message once; the new answer becomes the current variant, the previous one is kept,
 * and the turns after the message leave the current path. A failed turn is completed this way.
 */
export function createRegenerate(deps: FunctionDeps) {
  return inngest.createFunction(
    {
      id: REGENERATE_ID,
      name: "Regenerate an answer",
      triggers: [chatMessageRegenerate],
      // A retried request (same requestId) starts no second run; without a requestId each event is its own request.
      idempotency: 'has(event.data.requestId) ? event.data.userId + ":" + event.data.requestId : event.id',
      ...turnOptions(deps),
    },
    // The SDK validates event.data against the trigger's schema before this runs (non-retriable).
    async ({ event, runId, step, inferenceStream, inferenceUsage }) => {
      const turn = await runTurn(
        deps,
        { event, runId, step, inferenceStream, inferenceUsage },
        { kind: "regenerate", data: event.data },
      );
      return turn.outcome;
    },
  );
}
