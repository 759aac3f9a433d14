import { createAgent } from "@inngest/agent-kit";
import { gateTools, type ToolApprovals } from "./approvals.js";
import type { ModelChoice } from "./model.js";
import { type AgentMemory, threadView } from "./thread-view.js";
import { withPreparedSchemas } from "./tool-schemas.js";
import { currentTimeTool, rollDiceTool } from "./tools.js";

export const ASSISTANT_NAME = "assistant";

export const ASSISTANT_SYSTEM_PROMPT =
  "You are Threadline's assistant: a helpful, concise conversational partner. Answer the user's latest message using the conversation so far.";

/**
 * The default assistant, with the tools of its memory components (if any) beside its own, those
 * that need approval behind it (src/agents/approvals.ts).
 */
export function createAssistant(choice: ModelChoice, memory?: AgentMemory, approvals?: ToolApprovals) {
  const own = approvals?.demoTool ? [currentTimeTool, rollDiceTool] : [currentTimeTool];
  const { tools, onResponse } = gateTools([...own, ...(memory?.tools ?? [])], approvals);
  return createAgent({
    name: ASSISTANT_NAME,
    description: "General-purpose conversational assistant",
    system: ASSISTANT_SYSTEM_PROMPT,
    tools: choice.configured ? withPreparedSchemas(tools, choice.model.format) : tools,
    ...(choice.configured ? { model: choice.model } : {}),
    lifecycle: { onStart: threadView(ASSISTANT_NAME, memory), ...(onResponse ? { onResponse } : {}) },
  });
}
