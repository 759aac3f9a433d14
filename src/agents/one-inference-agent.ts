import { createAgent } from "@inngest/agent-kit";
import type { ModelChoice } from "./model.js";

/**
 * An agent with no tools and no history, making one inference per request (the summarizer, the
 * titler, the memory extractor): made for a configured model when its function runs.
 */
export const oneInferenceAgent =
  (agent: { name: string; description: string; system: string }) =>
  (choice: Extract<ModelChoice, { configured: true }>) =>
    createAgent({ ...agent, model: choice.model });

/**
 * Such an agent's answer without a leading <think> block: reasoning models served as
 * OpenAI-compatible (Ollama, vLLM without a reasoning parser) write their reasoning there first.
 */
export const withoutReasoning = (answer: string): string => answer.replace(/^\s*<think>[\s\S]*?<\/think>/i, "");
