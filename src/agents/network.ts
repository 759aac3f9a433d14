import { createNetwork, type HistoryConfig, type StateData } from "@inngest/agent-kit";
import { NonRetriableError } from "inngest";
import { turnSkipReason } from "../run-state.js";
import { createAssistant } from "./assistant.js";
import type { ModelChoice } from "./model.js";

/** Tool round trips one turn may take before the network stops asking the model. */
export const MAX_INFERENCES_PER_TURN = 6;

/**
 * The chat network: the assistant answers, and is called again while its last inference asked
 * for tools (so it sees their results), up to MAX_INFERENCES_PER_TURN inferences. With no model
 * configured the turn fails non-retriably once the user's message is stored.
 */
export function createChatNetwork({ model, history }: { model: ModelChoice; history: HistoryConfig<StateData> }) {
  const assistant = createAssistant(model);
  return createNetwork({
    name: "threadline-chat",
    agents: [assistant],
    ...(model.configured ? { defaultModel: model.model } : {}),
    history,
    maxIter: MAX_INFERENCES_PER_TURN,
    router: ({ network, callCount, lastResult }) => {
      if (turnSkipReason(network.state)) return undefined;
      // Runs after the user message is stored: it stays, and a regenerate can answer it later.
      if (!model.configured) throw new NonRetriableError(model.reason);
      if (callCount === 0) return assistant;
      return lastResult && lastResult.toolCalls.length > 0 ? assistant : undefined;
    },
  });
}
