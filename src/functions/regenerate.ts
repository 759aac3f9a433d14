import { createState } from "@inngest/agent-kit";
import { chatMessageRegenerate, inngest } from "../../inngest.config.js";
import { createTurnHistory } from "../history/adapter.js";
import { durably } from "../history/durable.js";
import { loadUserMessage } from "../history/store.js";
import { resolveHistoryPolicy } from "../history/policy.js";
import { turnPublisher } from "../stream/publish.js";
import { TURN_RETRIES, type FunctionDeps } from "./chat-turn.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { turnRetryMiddleware } from "./turn-retrying.js";
import { inferenceMiddleware } from "./streaming-inference.js";
import { createTurnNetwork } from "./turn-network.js";
import { recordTurnFailure } from "./turn-failure.js";
import { announceTurnFinished } from "./turn-finished.js";
import { cancelOnDeletion } from "./turn-deletion.js";
import { cancelOnStop } from "./turn-stop.js";
import { turnOutcome } from "./turn-outcome.js";

export const REGENERATE_ID = "regenerate";

/**
 * Regenerates the answer to a stored user message: the same durable turn as a chat turn, on a
 * message that is already stored. The model sees the thread as it stood before that message,
 * then the message once; the new answer becomes the current variant, the previous one is kept,
 * and the turns after the message leave the current path. A failed turn is completed this way.
 */
export function createRegenerate({ db, model, historyEnvironment, agents, eventLog, inference }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: REGENERATE_ID,
      name: "Regenerate an answer",
      triggers: [chatMessageRegenerate],
      // A retried request (same requestId) starts no second run; without a requestId each event is its own request.
      idempotency: 'has(event.data.requestId) ? event.data.userId + ":" + event.data.requestId : event.id',
      // No per-thread concurrency key: turns of a thread are ordered by the durable wait before
      // history.get (src/history/turn-waits.ts), so a stop frees the thread at once (docs/engine.md).
      retries: TURN_RETRIES,
      // The user's stop (POST /api/threads/:threadId/stop) ends the run; so do the thread's
      // deletion and the user's erasure (turn-deletion.ts).
      cancelOn: [...cancelOnStop, ...cancelOnDeletion],
      onFailure: recordTurnFailure(db),
      middleware: [
        ModelErrorMiddleware,
        inferenceMiddleware(db, inference ?? "gateway"),
        turnRetryMiddleware(db, TURN_RETRIES),
      ],
    },
    // The SDK validates event.data against the trigger's schema before this runs (non-retriable).
    async ({ event, runId, step, inferenceStream }) => {
      const data = event.data;

      // The event carries only ids: the words the model answers are the stored ones.
      const message = await durably(step, "history.load-message", () => loadUserMessage(db, data));

      const history = createTurnHistory(db, {
        userId: data.userId,
        messageId: data.messageId,
        runId,
        kind: "regenerate",
        eventId: event.id,
        // A regenerate carries no history settings: the operator's, else the agent's defaults.
        policy: resolveHistoryPolicy({ environment: historyEnvironment }),
      });
      const network = createTurnNetwork({ db, step, model, userId: data.userId, kind: "regenerate", history, agents });
      const state = createState({}, { threadId: data.threadId });
      inferenceStream.writeTo(state);
      const publish = turnPublisher({ db, step, runId, state, chunks: eventLog === true });
      const run = await network.run(
        { id: data.messageId, content: message.text, role: "user" },
        { state, streaming: { publish } },
      );
      const outcome = turnOutcome(run.state, data.messageId);
      await announceTurnFinished(step, {
        threadId: data.threadId,
        runId,
        messageId: data.messageId,
        status: outcome.status,
      });
      return outcome;
    },
  );
}
