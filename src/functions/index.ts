import { createChatTurn, type FunctionDeps } from "./chat-turn.js";
import { createRegenerate } from "./regenerate.js";

/** Every Inngest function Threadline serves. */
export const createFunctions = (deps: FunctionDeps) => [createChatTurn(deps), createRegenerate(deps)];
