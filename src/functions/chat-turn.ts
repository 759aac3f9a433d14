import { createState, type AgentResult } from "@inngest/agent-kit";
import type pg from "pg";
import { chatMessageSent, chatMessageSentData, inngest, threadSummarizeRequested } from "../../inngest.config.js";
import { createChatNetwork } from "../agents/network.js";
import type { ModelChoice } from "../agents/model.js";
import { createTurnHistory } from "../history/adapter.js";
import { SUMMARIZE_AFTER_MESSAGES } from "../history/summaries.js";
import { summaryLag, turnSkipReason } from "../run-state.js";
import { parseEventData } from "./event-data.js";
import { recordTurnFailure } from "./turn-failure.js";

export type FunctionDeps = { db: pg.Pool; model: ModelChoice };

/** Retries per step: enough to ride out a model or database blip, few enough to fail in minutes. */
export const TURN_RETRIES = 4;

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
      // One turn per thread at a time; a new thread's id is its first message's id.
      concurrency: { key: "has(event.data.threadId) ? event.data.threadId : event.data.messageId", limit: 1 },
      retries: TURN_RETRIES,
      onFailure: recordTurnFailure(db),
    },
    async ({ event, runId, step }) => {
      const data = parseEventData(chatMessageSentData, event.data);

      const history = createTurnHistory(db, {
        userId: data.userId,
        messageId: data.messageId,
        runId,
        kind: "chat",
        eventId: event.id,
        clientTimestamp: data.clientTimestamp,
        window: { userMessages: 20 },
      });
      const network = createChatNetwork({ model, history });
      const run = await network.run(
        { id: data.messageId, content: data.content, role: "user" },
        { state: createState({}, data.threadId ? { threadId: data.threadId } : {}) },
      );

      const skipped = turnSkipReason(run.state);
      // Only a request: the summary is built by its own function, so its failures never reach this turn.
      const lag = summaryLag(run.state);
      const summaryRequested = !skipped && lag !== undefined && lag.unsummarized > SUMMARIZE_AFTER_MESSAGES;
      if (summaryRequested) {
        await step.sendEvent(
          "history.request-summary",
          threadSummarizeRequested.create({ threadId: run.state.threadId!, userId: data.userId, beforeSeq: lag.windowStart }),
        );
      }
      return {
        threadId: run.state.threadId,
        messageId: data.messageId,
        status: skipped ? ("skipped" as const) : ("completed" as const),
        ...(skipped ? { reason: skipped } : { answer: answerText(run.state.results.at(-1)), summaryRequested }),
      };
    },
  );
}

/** The text of the turn's final answer, for the run's output in the dev server. */
export function answerText(result: AgentResult | undefined): string {
  return (result?.output ?? [])
    .filter((m) => m.type === "text" && m.role === "assistant")
    .map((m) => (m.type === "text" ? (typeof m.content === "string" ? m.content : m.content.map((c) => c.text).join("")) : ""))
    .join("\n");
}
