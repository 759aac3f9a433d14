import type { InngestEngine } from "../platform/inngest-engine.js";
import { createChatTurn, type FunctionDeps } from "./chat-turn.js";
import { createEventRetention } from "./event-retention.js";
import { createExtractMemories } from "./extract-memories.js";
import { createModelInference } from "./model-inference.js";
import { createReconcileTurns } from "./reconcile-turns.js";
import { createRegenerate } from "./regenerate.js";
import { createSummarizeThread } from "./summarize-thread.js";
import { createThreadRetention } from "./thread-retention.js";
import { createTitleThread } from "./title-thread.js";
import { createTurnCancellation } from "./turn-lifecycle.js";

/**
 * Every Inngest function Threadline serves. `eventLog`: EVENT_LOG_CHUNKS (the turns also write
 * AgentKit's chunks to the thread event log); `inference`: INFERENCE (every model call — turns,
 * regenerate, titles, summaries, memory extraction — is made by this process or by the gateway);
 * `retentionDays`: RETENTION_DAYS (unset: threads are kept); `eventRetentionHours`:
 * EVENT_LOG_RETENTION_HOURS (default 24); `tombstoneDays`: THREAD_TOMBSTONE_DAYS (default 90);
 * `engine`: the Inngest server the lost-run reconciliation asks about runs (the server always gives
 * it), with `lostRunDeadlineMinutes`: LOST_RUN_DEADLINE_MINUTES. Under INFERENCE=gateway the turns
 * invoke model-inference for each model call, so it is served then.
 */
export const createFunctions = (
  deps: FunctionDeps & {
    retentionDays?: number | undefined;
    eventRetentionHours?: number | undefined;
    tombstoneDays?: number | undefined;
    engine?: InngestEngine;
    lostRunDeadlineMinutes?: number | undefined;
  },
) => [
  createChatTurn(deps),
  createRegenerate(deps),
  createSummarizeThread(deps),
  createTurnCancellation(deps),
  createTitleThread(deps),
  createThreadRetention(deps),
  createEventRetention(deps),
  createExtractMemories(deps),
  ...((deps.inference ?? "gateway") === "gateway" ? [createModelInference(deps)] : []),
  ...(deps.engine
    ? [createReconcileTurns({ db: deps.db, engine: deps.engine, deadlineMinutes: deps.lostRunDeadlineMinutes })]
    : []),
];
