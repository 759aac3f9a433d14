import type pg from "pg";
import { chatMessageSent, inngest } from "../../inngest.config.js";
import type { ModelChoice } from "../agents/model.js";
import type { NetworkName } from "../agents/network.js";
import type { BusyPolicy } from "../history/busy-policy.js";
import type { PriceTable } from "../agents/usage.js";
import type { HistoryEnvironment } from "../history/policy.js";
import type { MemoryConfig } from "../memory/components.js";
import type { Inference } from "./streaming-inference.js";
import { CHAT_TURN_ID, turnOptions } from "./turn-lifecycle.js";
import type { ApprovalSettings } from "./tool-approvals.js";
import { runTurn } from "./turn-runner.js";

/**
 * How a deployment's agents are set up: which network answers, each agent's memory components,
 * and which tool calls need a human's approval (absent: none, and no demo tool).
 */
export type AgentsConfig = { network: NetworkName; memory: MemoryConfig; approvals?: ApprovalSettings };

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
  /** BUSY_POLICY: for a chat event whose data names no busy policy (default enqueue: src/history/busy-policy.ts). */
  busyPolicy?: BusyPolicy;
  /** Model prices for the usage ledger's costs (MODEL_PRICES over DEFAULT_PRICES; default: DEFAULT_PRICES). */
  prices?: PriceTable;
};

/** One chat turn: the user's message is answered by the turn runner (turn-runner.ts). */
export function createChatTurn(deps: FunctionDeps) {
  return inngest.createFunction(
    {
      id: CHAT_TURN_ID,
      name: "Chat turn",
      triggers: [chatMessageSent],
      // A message is answered by one run: a duplicate event within 24 hours starts none (per user:
      // another user's message id never silences this user's message). Inngest keeps the key
      // whatever the run did, so a message sent again after a run that began no turn for it
      // (refused, or failed or cancelled before storing it: the client is told to send it again)
      // names that run (resentAfter, set by send-message.ts), or its run would never start.
      idempotency:
        'has(event.data.resentAfter) ? event.data.userId + ":" + event.data.messageId + ":" + event.data.resentAfter : event.data.userId + ":" + event.data.messageId',
      ...turnOptions(deps),
    },
    // The SDK validates event.data against the trigger's schema before this runs (non-retriable).
    async ({ event, runId, step, logger, inferenceStream, inferenceUsage }) => {
      const turn = await runTurn(
        deps,
        { event, runId, step, inferenceStream, inferenceUsage },
        { kind: "chat", data: event.data },
      );
      // Fields first, message last: the app's logger (pino) drops fields given after the message.
      logger.info({ runId, threadId: turn.outcome.threadId, ...turn.history }, "chat-turn history");
      return { ...turn.outcome, history: turn.history, summaryRequested: turn.summaryRequested };
    },
  );
}
