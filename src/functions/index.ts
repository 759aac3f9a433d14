import { createChatTurn, type FunctionDeps } from "./chat-turn.js";
import { createRegenerate } from "./regenerate.js";
import { createSummarizeThread } from "./summarize-thread.js";

/** Every Inngest function Threadline serves. */
export const createFunctions = (deps: FunctionDeps) => [createChatTurn(deps), createRegenerate(deps), createSummarizeThread(deps)];
