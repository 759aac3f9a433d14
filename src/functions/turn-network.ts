import type { HistoryConfig, StateData } from "@inngest/agent-kit";
import type pg from "pg";
import type { StepTools } from "../../inngest.config.js";
import { createChatNetwork, NETWORK_AGENTS, type NetworkName } from "../agents/network.js";
import type { ModelChoice } from "../agents/model.js";
import type { TurnHistory } from "../history/adapter.js";
import { agentThreadState } from "../history/agent-state.js";
import { memoryComponents, NO_MEMORY, type MemoryConfig } from "../memory/components.js";
import { turnMemory } from "../memory/hooks.js";
import { turnSkipReason, userMessageText } from "../agents/run-state.js";

/** How a deployment's agents are set up: which network answers, and each agent's memory components. */
export type AgentsConfig = { network: NetworkName; memory: MemoryConfig };

export const DEFAULT_AGENTS: AgentsConfig = { network: "assistant", memory: NO_MEMORY };

/**
 * The network of one turn with its memory and agent state around the history adapter:
 * - agent thread state is loaded before the first agent and saved just before the answer is
 *   stored (storing the answer completes the turn and releases the next one, which loads it);
 * - the memory components hear of a new thread and of each stored message after the store.
 * Each is its own step (none at all when nothing is configured).
 */
export function createTurnNetwork(input: {
  db: pg.Pool;
  step: StepTools;
  model: ModelChoice;
  userId: string;
  kind: "chat" | "regenerate";
  history: TurnHistory;
  agents: AgentsConfig | undefined;
}) {
  const { db, step, userId, history } = input;
  const agents = input.agents ?? DEFAULT_AGENTS;
  const memory = turnMemory({ db, userId, step, components: memoryComponents(agents.memory) });
  const agentState = agentThreadState(db, { userId, declared: NETWORK_AGENTS[agents.network] });

  const withHooks: HistoryConfig<StateData> = {
    ...history,
    appendUserMessage: async (args) => {
      await history.appendUserMessage!(args);
      if (turnSkipReason(args.state)) return;
      const threadId = args.threadId!;
      // A new thread is named after its first message.
      if (input.kind === "chat" && threadId === args.userMessage.id) await memory.threadCreated(threadId);
      const text = userMessageText(args.state) ?? args.userMessage.content;
      await memory.newMessage(threadId, { id: args.userMessage.id, role: "user", agentName: "user", text });
    },
    appendResults: async (args) => {
      if (turnSkipReason(args.state)) return history.appendResults!(args);
      await agentState.save(step, args.state);
      await history.appendResults!(args);
      for (const [position, result] of args.newResults.entries()) {
        const text = result.output
          .flatMap((m) => (m.type === "text" && typeof m.content === "string" ? [m.content] : []))
          .join("\n");
        if (text)
          await memory.newMessage(args.threadId!, {
            id: result.id ?? `${position}`,
            role: "assistant",
            agentName: result.agentName,
            text,
          });
      }
    },
  };

  return createChatNetwork({
    model: input.model,
    history: withHooks,
    network: agents.network,
    memory: memory.forAgent,
    beforeFirstAgent: (state) => agentState.load(step, state),
  });
}
