import { createState, type Message } from "@inngest/agent-kit";
import type pg from "pg";
import { chatMessageSent, inngest, memoryExtractRequested, threadSummarizeRequested } from "../../inngest.config.js";
import type { ModelChoice } from "../agents/model.js";
import { createTurnHistory } from "../history/adapter.js";
import { resolveHistoryPolicy, type HistoryEnvironment } from "../history/policy.js";
import { SUMMARIZE_AFTER_MESSAGES } from "../history/summaries.js";
import { turnPublisher } from "../stream/publish.js";
import { summaryLag, turnSkipReason } from "../agents/run-state.js";
import { ModelErrorMiddleware } from "../agents/model-errors.js";
import { turnRetryMiddleware } from "./turn-retrying.js";
import { inferenceMiddleware, type Inference } from "./streaming-inference.js";
import { createTurnNetwork, type AgentsConfig } from "./turn-network.js";
import { recordTurnFailure } from "./turn-failure.js";
import { announceTurnFinished } from "./turn-finished.js";
import { cancelOnDeletion } from "./turn-deletion.js";
import { cancelOnStop } from "./turn-stop.js";
import { turnOutcome } from "./turn-outcome.js";

export type FunctionDeps = {
  db: pg.Pool;
  model: ModelChoice;
  /** The operator's history settings (HISTORY_* environment variables): they beat a request's. */
  historyEnvironment?: HistoryEnvironment;
  /** Which network answers and each agent's memory components (default: the assistant alone, no memory). */
  agents?: AgentsConfig;
  /**
   * Append AgentKit's streaming chunks to the thread event log, one step and one statement each
   * (EVENT_LOG_CHUNKS). Off (the default), a turn's log holds its outcome events only, written by
   * the statements that record the answer, the failure or the cancellation, at no extra cost.
   */
  eventLog?: boolean;
  /**
   * Who calls the model in a turn (INFERENCE): the Inngest server through step.ai.infer (gateway,
   * the default) or this process, streaming the answer into the event log (stream).
   */
  inference?: Inference;
};

export const CHAT_TURN_ID = "chat-turn";

/** Retries per step: enough to ride out a model or database blip, few enough to fail in minutes. */
export const TURN_RETRIES = 4;

/**
 * One chat turn: the user's message is stored first, the thread's history loaded, the agent
 * network answers, and the answer is stored. AgentKit calls the history adapter at each of those
 * points, and each call is its own durable step; the agents' memory components and thread state
 * add steps of their own when configured (turn-network.ts).
 */
export function createChatTurn({ db, model, historyEnvironment, agents, eventLog, inference }: FunctionDeps) {
  return inngest.createFunction(
    {
      id: CHAT_TURN_ID,
      name: "Chat turn",
      triggers: [chatMessageSent],
      // A message is answered by one run: a duplicate event within 24 hours starts none (per user:
      // another user's message id never silences this user's message).
      idempotency: 'event.data.userId + ":" + event.data.messageId',
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
    async ({ event, runId, step, logger, inferenceStream }) => {
      const data = event.data;
      const policy = resolveHistoryPolicy({ environment: historyEnvironment, request: data.history });

      const history = createTurnHistory(db, {
        userId: data.userId,
        messageId: data.messageId,
        runId,
        kind: "chat",
        eventId: event.id,
        clientTimestamp: data.clientTimestamp,
        policy,
        clientMessages: data.conversation?.length,
      });
      const network = createTurnNetwork({ db, step, model, userId: data.userId, kind: "chat", history, agents });
      // Client-sent messages make AgentKit skip history.get; they are the turn's earlier history.
      const state = createState(
        {},
        {
          ...(data.threadId ? { threadId: data.threadId } : {}),
          ...(data.conversation ? { messages: data.conversation as Message[] } : {}),
        },
      );
      inferenceStream.writeTo(state);
      const publish = turnPublisher({ db, step, runId, state, chunks: eventLog === true });
      const run = await network.run(
        { id: data.messageId, content: data.content, role: "user" },
        { state, streaming: { publish } },
      );
      const outcome = turnOutcome(run.state, data.messageId);
      await announceTurnFinished(step, {
        threadId: run.state.threadId!,
        runId,
        messageId: data.messageId,
        status: outcome.status,
      });

      // Only a request: the summary is built by its own function, so its failures never reach this turn.
      const lag = summaryLag(run.state);
      const summaryRequested =
        !turnSkipReason(run.state) && lag !== undefined && lag.unsummarized > SUMMARIZE_AFTER_MESSAGES;
      if (summaryRequested) {
        await step.sendEvent(
          "history.request-summary",
          threadSummarizeRequested.create({
            threadId: run.state.threadId!,
            userId: data.userId,
            beforeSeq: lag.windowStart,
          }),
        );
      }

      // Also only a request: extraction runs in its own function, after the turn.
      if (agents?.memory.extract && outcome.status === "completed") {
        await step.sendEvent(
          "memory.request-extraction",
          memoryExtractRequested.create({
            threadId: run.state.threadId!,
            userId: data.userId,
            messageId: data.messageId,
          }),
        );
      }

      const report = { ...policy, ...history.load() };
      // Fields first, message last: the app's logger (pino) drops fields given after the message.
      logger.info({ runId, threadId: run.state.threadId, ...report }, "chat-turn history");
      return { ...outcome, history: report, summaryRequested };
    },
  );
}
