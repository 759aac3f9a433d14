import {
  createNetwork,
  type Agent,
  type HistoryConfig,
  type NetworkRun,
  type State,
  type StateData,
} from "@inngest/agent-kit";
import { NonRetriableError } from "inngest";
import { z } from "zod";
import { priorResultCount, turnSkipReason } from "./run-state.js";
import type { ToolApprovals } from "./approvals.js";
import { ASSISTANT_NAME, createAssistant } from "./assistant.js";
import type { ModelChoice } from "./model.js";
import { createReviewer, REVIEWER_NAME, REVIEWER_STATE_KEY } from "./reviewer.js";
import type { AgentMemory } from "./thread-view.js";

/** Tool round trips one turn may take before the network stops asking the model. */
const MAX_INFERENCES_PER_TURN = 6;

/** Which agents answer a turn: the assistant alone, or the assistant then the reviewer. */
export const networkName = z.enum(["assistant", "pair"], { error: 'NETWORK must be "assistant" or "pair"' });
export type NetworkName = z.infer<typeof networkName>;

/** The agents of each network, and the state.data keys each declares as its own thread state (none: nothing stored). */
export const NETWORK_AGENTS: Record<NetworkName, Readonly<Record<string, readonly string[]>>> = {
  assistant: { [ASSISTANT_NAME]: [] },
  pair: { [ASSISTANT_NAME]: [], [REVIEWER_NAME]: [REVIEWER_STATE_KEY] },
};

type AnyState = State<Record<string, unknown>>;

export type ChatNetworkOptions = {
  model: ModelChoice;
  history: HistoryConfig<StateData>;
  network?: NetworkName;
  /** Each agent's memory (its components' tools and context), by agent name. */
  memory?: (agentName: string) => AgentMemory | undefined;
  /** Tool calls that need a human's approval, and how to ask for it (the assistant's tools). */
  approvals?: ToolApprovals;
  /** Runs once before the first agent (after the user message is stored and earlier turns finished): loads agent thread state. */
  beforeFirstAgent?: (state: AnyState) => Promise<void>;
  /**
   * The state the turn runs the network with: the network's default too, which spares AgentKit
   * building one (a network without a default makes one, on each of the run's requests).
   */
  state?: State<StateData>;
};

/**
 * The chat network. The router is code, deciding from state.results alone (memoized inferences),
 * so a replayed or retried run routes exactly as the first execution did:
 * - assistant: the assistant answers, called again while its last inference asked for tools;
 * - pair: the same, then the reviewer checks the assistant's final answer, once.
 * At most MAX_INFERENCES_PER_TURN inferences. With no model configured the turn fails
 * non-retriably once the user's message is stored.
 */
export function createChatNetwork({
  model,
  history,
  network = "assistant",
  memory,
  approvals,
  beforeFirstAgent,
  state,
}: ChatNetworkOptions) {
  const assistantMemory = memory?.(ASSISTANT_NAME);
  const assistant =
    assistantMemory || approvals
      ? createAssistant(model, assistantMemory, approvals)
      : sharedAgent(model, ASSISTANT_NAME, () => createAssistant(model));
  const reviewerMemory = network === "pair" ? memory?.(REVIEWER_NAME) : undefined;
  const reviewer =
    network !== "pair"
      ? undefined
      : reviewerMemory
        ? createReviewer(model, reviewerMemory)
        : sharedAgent(model, REVIEWER_NAME, () => createReviewer(model));
  return createNetwork({
    name: `threadline-${network}`,
    agents: reviewer ? [assistant, reviewer] : [assistant],
    ...(model.configured ? { defaultModel: model.model } : {}),
    ...(state ? { defaultState: state } : {}),
    history,
    maxIter: MAX_INFERENCES_PER_TURN,
    router: async ({ network: run, callCount, lastResult }) => {
      const state = run.state as AnyState;
      if (turnSkipReason(state)) return undefined;
      // Runs after the user message is stored: it stays, and a regenerate can answer it later.
      if (!model.configured) throw new NonRetriableError(model.reason);
      if (callCount === 0) {
        await beforeFirstAgent?.(state);
        return assistant;
      }
      return nextAgent(run, lastResult, { assistant, reviewer });
    },
  });
}

/**
 * Agents without memory or approvals hold nothing of a turn (their hooks read the run's state
 * from their arguments), so one per model serves every turn: a turn's function replays the
 * network on each request, and building the agents again each time is wasted work.
 */
const sharedAgents = new WeakMap<ModelChoice, Map<string, Agent<StateData>>>();

function sharedAgent(model: ModelChoice, name: string, create: () => Agent<StateData>): Agent<StateData> {
  const agents = sharedAgents.get(model) ?? new Map<string, Agent<StateData>>();
  sharedAgents.set(model, agents);
  const agent = agents.get(name) ?? create();
  agents.set(name, agent);
  return agent;
}

/** After the first inference: tools pending go back to the agent that asked; the assistant's final answer goes to the reviewer, if any. */
function nextAgent(
  run: NetworkRun<StateData>,
  lastResult: { agentName: string; toolCalls: unknown[] } | undefined,
  agents: { assistant: Agent<StateData>; reviewer: Agent<StateData> | undefined },
) {
  if (!lastResult) return undefined;
  if (lastResult.toolCalls.length > 0)
    return lastResult.agentName === REVIEWER_NAME ? agents.reviewer : agents.assistant;
  if (lastResult.agentName !== ASSISTANT_NAME || !agents.reviewer) return undefined;
  const thisTurn = run.state.results.slice(priorResultCount(run.state as AnyState));
  return thisTurn.some((result: { agentName: string }) => result.agentName === REVIEWER_NAME)
    ? undefined
    : agents.reviewer;
}
