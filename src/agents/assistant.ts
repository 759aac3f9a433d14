import { createAgent, type AgentResult, type Message } from "@inngest/agent-kit";
import { priorResultCount, turnSkipReason, userMessageText } from "../run-state.js";
import type { ModelChoice } from "./model.js";
import { currentTimeTool } from "./tools.js";

export const ASSISTANT_NAME = "assistant";

export const ASSISTANT_SYSTEM_PROMPT =
  "You are Threadline's assistant: a helpful, concise conversational partner. Answer the user's latest message using the conversation so far.";

/**
 * The default assistant. AgentKit sends each inference as prompt.concat(history): system and
 * the current user message first, stored history after. A chat needs the earlier turns first,
 * then the new message, then this turn's own tool calls; onStart puts them in that order.
 */
export function createAssistant(choice: ModelChoice) {
  return createAgent({
    name: ASSISTANT_NAME,
    description: "General-purpose conversational assistant",
    system: ASSISTANT_SYSTEM_PROMPT,
    tools: [currentTimeTool],
    ...(choice.configured ? { model: choice.model } : {}),
    lifecycle: {
      onStart: ({ prompt, network }) => {
        if (!network) return { prompt, history: [], stop: false };
        const state = network.state;
        if (turnSkipReason(state)) return { prompt, history: [], stop: true };
        const system = prompt.filter((m) => m.role === "system");
        // The current message as stored: the words the turn's question holds, whatever the input carried.
        const stored = userMessageText(state);
        const current: Message[] = stored === undefined ? prompt.filter((m) => m.role !== "system") : [{ type: "text", role: "user", content: stored }];
        const earlier = state.messages.concat(state.results.slice(0, priorResultCount(state)).flatMap(messagesOf));
        const thisTurn = state.results.slice(priorResultCount(state)).flatMap(messagesOf);
        return { prompt: system, history: [...earlier, ...current, ...thisTurn], stop: false };
      },
    },
  });
}

const messagesOf = (result: AgentResult): Message[] => [...result.output, ...result.toolCalls];
