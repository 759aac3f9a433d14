import { createChatTurn, type FunctionDeps } from "./chat-turn.js";

/** Every Inngest function Threadline serves. */
export const createFunctions = (deps: FunctionDeps) => [createChatTurn(deps)];
