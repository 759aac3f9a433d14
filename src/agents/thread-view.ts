import { type AgentResult, type Message, type NetworkRun, State, type StateData, type Tool } from "@inngest/agent-kit";
import { priorResultCount, turnSkipReason, userMessageText } from "./run-state.js";

/**
 * What one agent gets from its memory in a turn, handed in by the function that builds the
 * network (src/functions/turn-runner.ts), so agents never touch storage: tools, and context before
 * each model call. `call` numbers the request within the turn (deterministic), for its step id.
 */
export type AgentMemory = {
  tools: Tool.Any[];
  beforeModelCall: (request: { threadId: string; text: string; call: number }) => Promise<{ text: string }[]>;
};

type OnStartArgs = { prompt: Message[]; history?: Message[]; network?: NetworkRun<StateData> | undefined };

/**
 * What one agent's model sees, as an agent's onStart: AgentKit sends each inference as
 * prompt.concat(history), with the current user message in the prompt and stored history after.
 * A chat needs [system, memory context, earlier turns, the current message once, this turn's
 * results], so the prompt keeps only the system message and the rest goes in that order.
 *
 * Each agent sees its own results whole (its tool calls paired with their results) and other
 * agents' results as their text only: another agent's tool calls name tools this agent does not
 * have, which a provider may refuse.
 */
export function threadView(agentName: string, memory: AgentMemory | undefined) {
  return async ({ prompt, network }: OnStartArgs) => {
    if (!network) return { prompt, history: [], stop: false };
    const state = network.state as State<Record<string, unknown>>;
    if (turnSkipReason(state)) return { prompt, history: [], stop: true };
    const system = prompt.filter((m) => m.role === "system");
    // The current message as stored: the words the turn's question holds, whatever the input carried.
    const stored = userMessageText(state);
    const current: Message[] =
      stored === undefined
        ? prompt.filter((m) => m.role !== "system")
        : [{ type: "text", role: "user", content: stored }];
    // state.results copies the list on each read: read once.
    const results = state.results;
    const prior = priorResultCount(state);
    const earlier = state.messages.concat(storedView(agentName, results, prior));
    const thisTurn = results.slice(prior).flatMap((result) => viewOf(agentName, result));
    const contexts =
      memory && state.threadId
        ? await memory.beforeModelCall({
            threadId: state.threadId,
            text: stored ?? textOf(current),
            call: results.length,
          })
        : [];
    const context: Message[] = contexts.map((c) => ({ type: "text", role: "user", content: c.text }));
    return { prompt: system, history: [...context, ...earlier, ...current, ...thisTurn], stop: false };
  };
}

/**
 * A turn's AgentKit state. Before each agent runs, AgentKit formats every result of the state as
 * its own history view (formatHistory), on every replay of the run; each agent of the network
 * replaces that view in its onStart (threadView), so it is never read, and the state hands
 * AgentKit none.
 */
export class TurnState extends State<StateData> {
  override formatHistory(): Message[] {
    return [];
  }
}

/**
 * Each agent's view of the stored results a run read, by the last of them: every replay of the run,
 * and each of its inferences, sees the same (frozen, shared) results, so the view is built once.
 */
const storedListViews = new Map<string, WeakMap<AgentResult, { results: AgentResult[]; view: Message[] }>>();

function storedView(agentName: string, results: AgentResult[], prior: number): Message[] {
  const last = prior > 0 ? results[prior - 1]! : undefined;
  if (!last || !Object.isFrozen(last)) return results.slice(0, prior).flatMap((r) => viewOf(agentName, r));
  let views = storedListViews.get(agentName);
  if (!views) {
    views = new WeakMap();
    storedListViews.set(agentName, views);
  }
  const known = views.get(last);
  if (known && known.results.length === prior && known.results.every((result, i) => result === results[i]))
    return known.view;
  const stored = results.slice(0, prior);
  const view = stored.flatMap((r) => viewOf(agentName, r));
  // Only frozen results: a view of a result that may change later would go stale.
  if (stored.every((result) => Object.isFrozen(result))) views.set(last, { results: stored, view });
  return view;
}

/** A result as `agentName` sees it: whole when its own (or a user, summary or system row), text only when another agent's. */
function viewOf(agentName: string, result: AgentResult): Message[] {
  const fromAgent =
    result.toolCalls.length > 0 || result.output.some((m) => m.type !== "text" || m.role === "assistant");
  if (!fromAgent || result.agentName === agentName) return [...result.output, ...result.toolCalls];
  return result.output.filter((m) => m.type === "text");
}

const textOf = (messages: Message[]) =>
  messages
    .map((m) =>
      m.type === "text"
        ? typeof m.content === "string"
          ? m.content
          : m.content.map((part) => part.text).join("")
        : "",
    )
    .join("\n");
