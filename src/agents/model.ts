import { anthropic, gemini, openai } from "@inngest/agent-kit";
import type { Environment } from "../config.js";

export type ModelChoice =
  | { configured: true; provider: "openai" | "anthropic" | "gemini"; name: string; model: ReturnType<typeof openai> | ReturnType<typeof anthropic> | ReturnType<typeof gemini> }
  | { configured: false; reason: string };

export const MODEL_NOT_CONFIGURED =
  "No model is configured: set OPENAI_API_KEY (or OPENAI_BASE_URL for any OpenAI-compatible server such as Ollama), ANTHROPIC_API_KEY or GEMINI_API_KEY, then regenerate the message.";

/**
 * The model from configuration. An OpenAI-compatible base URL wins (it is the explicit choice of a
 * server), then OpenAI, Anthropic and Gemini keys, in that order. MODEL names the model.
 */
export function chooseModel(env: Environment): ModelChoice {
  if (env.OPENAI_BASE_URL || env.OPENAI_API_KEY) {
    const name = env.MODEL ?? "gpt-4o-mini";
    // A local OpenAI-compatible server (Ollama, vLLM) usually takes any key.
    const model = openai({ model: name, apiKey: env.OPENAI_API_KEY ?? "unused", ...(env.OPENAI_BASE_URL ? { baseUrl: env.OPENAI_BASE_URL } : {}) });
    return { configured: true, provider: "openai", name, model };
  }
  if (env.ANTHROPIC_API_KEY) {
    const name = env.MODEL ?? "claude-3-5-haiku-latest";
    const model = anthropic({ model: name, apiKey: env.ANTHROPIC_API_KEY, defaultParameters: { max_tokens: 1024 } });
    return { configured: true, provider: "anthropic", name, model };
  }
  if (env.GEMINI_API_KEY) {
    const name = env.MODEL ?? "gemini-2.0-flash";
    return { configured: true, provider: "gemini", name, model: gemini({ model: name, apiKey: env.GEMINI_API_KEY }) };
  }
  return { configured: false, reason: MODEL_NOT_CONFIGURED };
}
