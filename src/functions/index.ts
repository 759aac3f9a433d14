import { createChatTurn, type FunctionDeps } from "./chat-turn.js";
import { createExtractMemories } from "./extract-memories.js";
import { createRegenerate } from "./regenerate.js";
import { createSummarizeThread } from "./summarize-thread.js";
import { createThreadRetention } from "./thread-retention.js";
import { createTitleThread } from "./title-thread.js";
import { createTurnCancellation } from "./turn-cancellation.js";

/** Every Inngest function Threadline serves. `retentionDays`: RETENTION_DAYS (unset: threads are kept). */
export const createFunctions = (deps: FunctionDeps & { retentionDays?: number | undefined }) => [
  createChatTurn(deps),
  createRegenerate(deps),
  createSummarizeThread(deps),
  createTurnCancellation(deps),
  createTitleThread(deps),
  createThreadRetention(deps),
  createExtractMemories(deps),
];
