import { createState } from "@inngest/agent-kit";
import type pg from "pg";
import { chatMessageSent, inngest } from "../../inngest.config.js";
import { createChatNetwork } from "../agents/network.js";
import type { ModelChoice } from "../agents/model.js";
import { createTurnHistory } from "../history/adapter.js";
import { threadConcurrency } from "./thread-concurrency.js";
import { recordTurnFailure } from "./turn-failure.js";
import { turnOutcome } from "./turn-outcome.js";

export type FunctionDeps = { db: pg.Pool; model: ModelChoice };

/** Retries per step: enough to ride out a model or database blip, few enough to fail in minutes. */
export const TURN_RETRIES = 4;

/** The history a turn's model request carries: the last 20 user messages (the current one included). */
export const TURN_HISTORY_WINDOW = { userMessages: 20 };

/**
 * One chat turn: the user's message is stored first, the thread's history loaded, the agent
 * network answers, and the answer is stored. AgentKit calls the history adapter at each of those
 * points, and each call is its own durable step.
 */
export function createChatTurn({ db, model }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: "chat-turn",
      name: "Chat turn",
      triggers: [chatMessageSent],
      // A new thread's id is its first message's id.
      concurrency: threadConcurrency("has(event.data.threadId) ? event.data.threadId : event.data.messageId"),
      retries: TURN_RETRIES,
      onFailure: recordTurnFailure(db),
    },
    // The SDK validates event.data against the trigger's schema before this runs (non-retriable).
    async ({ event, runId }) => {
      const data = event.data;

      const history = createTurnHistory(db, {
        userId: data.userId,
        messageId: data.messageId,
        runId,
        kind: "chat",
        eventId: event.id,
        clientTimestamp: data.clientTimestamp,
        window: TURN_HISTORY_WINDOW,
      });
      const network = createChatNetwork({ model, history });
      const run = await network.run(
        { id: data.messageId, content: data.content, role: "user" },
        { state: createState({}, data.threadId ? { threadId: data.threadId } : {}) },
      );
      return turnOutcome(run.state, data.messageId);
    },
  );
}
