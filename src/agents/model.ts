import { anthropic, gemini, openai } from "@inngest/agent-kit";
import { z } from "zod";
import type { Environment } from "../config.js";

/** `source`: the environment named the model, or none did and the dev server found a local Ollama. */
export type ModelChoice =
  | {
      configured: true;
      provider: "openai" | "anthropic" | "gemini";
      name: string;
      model: ReturnType<typeof openai> | ReturnType<typeof anthropic> | ReturnType<typeof gemini>;
      source: "environment" | "ollama";
    }
  | { configured: false; reason: string };

export const MODEL_NOT_CONFIGURED =
  "No model is configured: set OPENAI_API_KEY (or OPENAI_BASE_URL for any OpenAI-compatible server such as Ollama), ANTHROPIC_API_KEY or GEMINI_API_KEY, then regenerate the message.";

/** What to do when no model is configured, step by step: the start-up log and the playground both say it. */
export const MODEL_SETUP_STEPS = [
  "Put one of OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY in the environment (or in .env) and restart; MODEL picks the model (defaults: gpt-4o-mini, claude-3-5-haiku-latest, gemini-2.0-flash).",
  "Or, without a key: run Ollama on this machine (ollama serve, then ollama pull llama3.2) and restart npm run dev: it is found on OLLAMA_BASE_URL (default http://127.0.0.1:11434).",
  "Or point OPENAI_BASE_URL at any OpenAI-compatible server (vLLM, LM Studio, a remote Ollama: http://host:11434/v1/) and set MODEL.",
];

/**
 * The model from configuration. An OpenAI-compatible base URL wins (it is the explicit choice of a
 * server), then OpenAI, Anthropic and Gemini keys, in that order. MODEL names the model.
 */
export function chooseModel(env: Environment): ModelChoice {
  if (env.OPENAI_BASE_URL || env.OPENAI_API_KEY) {
    const name = env.MODEL ?? "gpt-4o-mini";
    // A local OpenAI-compatible server (Ollama, vLLM) usually takes any key.
    const model = openai({
      model: name,
      apiKey: env.OPENAI_API_KEY ?? "unused",
      ...(env.OPENAI_BASE_URL ? { baseUrl: env.OPENAI_BASE_URL } : {}),
    });
    return { configured: true, provider: "openai", name, model, source: "environment" };
  }
  if (env.ANTHROPIC_API_KEY) {
    const name = env.MODEL ?? "claude-3-5-haiku-latest";
    const model = anthropic({ model: name, apiKey: env.ANTHROPIC_API_KEY, defaultParameters: { max_tokens: 1024 } });
    return { configured: true, provider: "anthropic", name, model, source: "environment" };
  }
  if (env.GEMINI_API_KEY) {
    const name = env.MODEL ?? "gemini-2.0-flash";
    return {
      configured: true,
      provider: "gemini",
      name,
      model: gemini({ model: name, apiKey: env.GEMINI_API_KEY }),
      source: "environment",
    };
  }
  return { configured: false, reason: MODEL_NOT_CONFIGURED };
}

/** How long start-up waits for a local Ollama to answer: nothing listening is refused at once; this bounds a hung port. */
const OLLAMA_PROBE_TIMEOUT_MS = 1_500;

/** The OpenAI-compatible model list (GET /v1/models) as Ollama answers it. */
const modelList = z.object({ data: z.array(z.object({ id: z.string().min(1) })) });

export type OllamaProbe = { found: true; models: string[] } | { found: false; why: string };

/** Asks a local Ollama for its models through its OpenAI-compatible API; `why` says what answered instead. */
export async function probeOllama(baseUrl: string, timeoutMs = OLLAMA_PROBE_TIMEOUT_MS): Promise<OllamaProbe> {
  const url = new URL("v1/models", baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return { found: false, why: `${url} answered HTTP ${response.status}` };
    const list = modelList.safeParse(await response.json().catch(() => null));
    if (!list.success) return { found: false, why: `${url} did not answer an OpenAI-compatible model list` };
    return { found: true, models: list.data.data.map((model) => model.id) };
  } catch (error) {
    const cause = (error as Error).name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : "nothing answered";
    return { found: false, why: `${cause} at ${url}` };
  }
}

/**
 * The model a starting server uses: the configured one; or, in development with no provider
 * configured, a local Ollama that answers on OLLAMA_BASE_URL (MODEL, or the first model it lists),
 * through its OpenAI-compatible API. Production never guesses. `note` says what was found, for the log.
 */
export async function chooseStartModel(env: Environment): Promise<{ choice: ModelChoice; note?: string }> {
  const configured = chooseModel(env);
  if (configured.configured || env.NODE_ENV === "production") return { choice: configured };
  const probe = await probeOllama(env.OLLAMA_BASE_URL);
  if (!probe.found) return { choice: configured, note: `no local Ollama either (${probe.why})` };
  const base = env.OLLAMA_BASE_URL.replace(/\/+$/, "");
  if (probe.models.length === 0) {
    return {
      choice: {
        configured: false,
        reason: `A local Ollama answers at ${base} but has no model: run \`ollama pull llama3.2\` and restart. ${MODEL_NOT_CONFIGURED}`,
      },
    };
  }
  const name = env.MODEL ?? probe.models[0]!;
  const choice = chooseModel({ ...env, OPENAI_BASE_URL: `${base}/v1/`, MODEL: name });
  if (!choice.configured) throw new Error("an OpenAI-compatible base URL always configures a model");
  const others = probe.models.filter((model) => model !== name);
  return {
    choice: { ...choice, source: "ollama" },
    note: `no provider is configured, so the local Ollama at ${base} answers${others.length > 0 ? ` (MODEL picks another of its models: ${others.join(", ")})` : ""}`,
  };
}

/** GET /api/info's model: what answers chat turns, or how to configure one. */
export function describeModel(choice: ModelChoice) {
  return choice.configured
    ? { configured: true as const, provider: choice.provider, name: choice.name, source: choice.source }
    : { configured: false as const, problem: choice.reason, setup: MODEL_SETUP_STEPS };
}
