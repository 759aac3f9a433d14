import { createAgent } from "@inngest/agent-kit";
import type { ModelChoice } from "./model.js";
import { type AgentMemory, threadView } from "./thread-view.js";
import { currentTimeTool } from "./tools.js";

export const ASSISTANT_NAME = "assistant";

export const ASSISTANT_SYSTEM_PROMPT =
  "You are Threadline's assistant: a helpful, concise conversational partner. Answer the user's latest message using the conversation so far.";

/** The default assistant, with the tools of its memory components (if any) beside its own. */
export function createAssistant(choice: ModelChoice, memory?: AgentMemory) {
  return createAgent({
    name: ASSISTANT_NAME,
    description: "General-purpose conversational assistant",
    system: ASSISTANT_SYSTEM_PROMPT,
    tools: [currentTimeTool, ...(memory?.tools ?? [])],
    ...(choice.configured ? { model: choice.model } : {}),
    lifecycle: { onStart: threadView(ASSISTANT_NAME, memory) },
  });
}
