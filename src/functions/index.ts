import { createChatTurn, type FunctionDeps } from "./chat-turn.js";
import { createExtractMemories } from "./extract-memories.js";
import { createRegenerate } from "./regenerate.js";
import { createSummarizeThread } from "./summarize-thread.js";
import { createTurnCancellation } from "./turn-cancellation.js";

/** Every Inngest function Threadline serves. */
export const createFunctions = (deps: FunctionDeps) => [
  createChatTurn(deps),
  createRegenerate(deps),
  createSummarizeThread(deps),
  createTurnCancellation(deps),
  createExtractMemories(deps),
];
