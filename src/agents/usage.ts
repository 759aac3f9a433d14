import { z } from "zod";

/**
 * What a provider reports a model call used, read from its answer (the same JSON whether the
 * Inngest server called it or this process streamed it and assembled the answer), and what it
 * cost by the operator's price table. Pure: the functions record it (src/history/usage.ts).
 */

/** Tokens of one call. `inputTokens` counts cached input too; `outputTokens` counts reasoning too (both are billed). */
export type ReportedUsage = {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number | null;
  reasoningTokens: number | null;
};

/*
 * Read by hand rather than with zod: under INFERENCE=gateway a turn reads its inference's usage on
 * every replay past the inference (whether the usage step exists), and a schema parse there was a
 * visible share of a replay's CPU. Same rules as the schemas they replace: a count is a safe
 * non-negative integer, a field an object (not null, not an array), optional fields absent or
 * undefined, nullish details also null; anything else means no usage was reported.
 */
type Fields = Record<string, unknown>;
const isFields = (value: unknown): value is Fields =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
const isOptionalCount = (value: unknown): value is number | undefined => value === undefined || isCount(value);
const isNullishCount = (value: unknown): value is number | null | undefined => value === null || isOptionalCount(value);

/** An optional details object holding an optional count: the count, null when the details are absent; false when malformed. */
function detailCount(details: unknown, key: string): number | null | false {
  if (details === undefined || details === null) return null;
  if (!isFields(details) || !isOptionalCount(details[key])) return false;
  return (details[key] as number | undefined) ?? null;
}

/** Anthropic's input_tokens leaves out what was read from or written to the prompt cache. */
function anthropicUsage(usage: unknown): ReportedUsage | undefined {
  if (!isFields(usage)) return undefined;
  const { input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens } = usage;
  if (!isCount(input_tokens) || !isCount(output_tokens)) return undefined;
  if (!isNullishCount(cache_creation_input_tokens) || !isNullishCount(cache_read_input_tokens)) return undefined;
  return {
    inputTokens: input_tokens + (cache_creation_input_tokens ?? 0) + (cache_read_input_tokens ?? 0),
    outputTokens: output_tokens,
    cachedTokens: cache_read_input_tokens ?? null,
    reasoningTokens: null,
  };
}

/** Gemini's candidatesTokenCount leaves out the thinking tokens; absent counts are 0. */
function geminiUsage(usage: unknown): ReportedUsage | undefined {
  if (!isFields(usage)) return undefined;
  const { promptTokenCount = 0, candidatesTokenCount = 0, cachedContentTokenCount, thoughtsTokenCount } = usage;
  if (!isCount(promptTokenCount) || !isCount(candidatesTokenCount)) return undefined;
  if (!isOptionalCount(cachedContentTokenCount) || !isOptionalCount(thoughtsTokenCount)) return undefined;
  return {
    inputTokens: promptTokenCount,
    outputTokens: candidatesTokenCount + (thoughtsTokenCount ?? 0),
    cachedTokens: cachedContentTokenCount ?? null,
    reasoningTokens: thoughtsTokenCount ?? null,
  };
}

function openAiUsage(usage: unknown): ReportedUsage | undefined {
  if (!isFields(usage)) return undefined;
  const { prompt_tokens, completion_tokens } = usage;
  if (!isCount(prompt_tokens) || !isCount(completion_tokens)) return undefined;
  const cachedTokens = detailCount(usage.prompt_tokens_details, "cached_tokens");
  const reasoningTokens = detailCount(usage.completion_tokens_details, "reasoning_tokens");
  if (cachedTokens === false || reasoningTokens === false) return undefined;
  return { inputTokens: prompt_tokens, outputTokens: completion_tokens, cachedTokens, reasoningTokens };
}

/** The usage a provider's answer (or a stream's usage so far) reports, in the adapter's format; undefined when it reports none. */
export function reportedUsage(format: string, answer: unknown): ReportedUsage | undefined {
  const fields = (answer ?? {}) as { usage?: unknown; usageMetadata?: unknown };
  if (format === "anthropic") return anthropicUsage(fields.usage);
  if (format === "gemini") return geminiUsage(fields.usageMetadata);
  return openAiUsage(fields.usage);
}

/**
 * Whether a provider's answer asks for a tool call, as AgentKit's adapter would read it (OpenAI
 * `tool_calls`, Anthropic `tool_use` content, Gemini `functionCall` parts): after such an answer
 * the agent's tools run, then usually another inference.
 */
export function asksForTools(format: string, answer: unknown): boolean {
  const fields = (answer ?? {}) as { choices?: unknown; content?: unknown; candidates?: unknown };
  const items = (list: unknown): Fields[] => (Array.isArray(list) ? list.filter(isFields) : []);
  if (format === "anthropic") return items(fields.content).some((item) => item.type === "tool_use");
  if (format === "gemini")
    return items(fields.candidates).some((candidate) =>
      items(isFields(candidate.content) ? candidate.content.parts : undefined).some((part) => part.functionCall),
    );
  return items(fields.choices).some((choice) => {
    const calls = isFields(choice.message) ? choice.message.tool_calls : undefined;
    return Array.isArray(calls) && calls.length > 0;
  });
}

/** The provider an adapter format speaks to, as the ledger names it. */
export const providerOf = (format: string) =>
  ({ "openai-chat": "openai", anthropic: "anthropic", gemini: "gemini" })[format] ?? format;

/** The model that answered, as the answer names it (OpenAI and Anthropic `model`, Gemini `modelVersion`). */
export function answeringModel(answer: unknown): string | undefined {
  const fields = (answer ?? {}) as { model?: unknown; modelVersion?: unknown };
  const name = fields.model ?? fields.modelVersion;
  return typeof name === "string" && name !== "" ? name : undefined;
}

/** A model's prices in US dollars per million tokens; cached input at `cachedInput` (default: `input`). */
const modelPrice = z.strictObject({
  input: z.number().nonnegative(),
  output: z.number().nonnegative(),
  cachedInput: z.number().nonnegative().optional(),
});
export const priceTable = z.record(z.string().min(1), modelPrice);
export type PriceTable = z.infer<typeof priceTable>;

/** List prices of the default models (USD per million tokens); MODEL_PRICES adds models or replaces these. */
export const DEFAULT_PRICES: PriceTable = {
  "gpt-4o-mini": { input: 0.15, output: 0.6, cachedInput: 0.075 },
  "gpt-4o": { input: 2.5, output: 10, cachedInput: 1.25 },
  "claude-3-5-haiku": { input: 0.8, output: 4, cachedInput: 0.08 },
  "gemini-2.0-flash": { input: 0.1, output: 0.4, cachedInput: 0.025 },
};

/**
 * A model's price: its own entry, else the longest entry its name starts with (providers answer
 * with dated names such as gpt-4o-mini-2024-07-18), else none.
 */
function priceOf(prices: PriceTable, model: string) {
  if (Object.hasOwn(prices, model)) return prices[model];
  const prefix = Object.keys(prices)
    .filter((name) => model.startsWith(name))
    .sort((a, b) => b.length - a.length)[0];
  return prefix === undefined ? undefined : prices[prefix];
}

/** What a call cost in US dollars, or null when the model has no price. */
export function costOf(prices: PriceTable, model: string, usage: ReportedUsage): number | null {
  const price = priceOf(prices, model);
  if (!price) return null;
  const cached = Math.min(usage.cachedTokens ?? 0, usage.inputTokens);
  return (
    ((usage.inputTokens - cached) * price.input +
      cached * (price.cachedInput ?? price.input) +
      usage.outputTokens * price.output) /
    1_000_000
  );
}
