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

const count = z.number().int().nonnegative();
const openAiUsage = z.object({
  prompt_tokens: count,
  completion_tokens: count,
  prompt_tokens_details: z.object({ cached_tokens: count.optional() }).nullish(),
  completion_tokens_details: z.object({ reasoning_tokens: count.optional() }).nullish(),
});
/** Anthropic's input_tokens leaves out what was read from or written to the prompt cache. */
const anthropicUsage = z.object({
  input_tokens: count,
  output_tokens: count,
  cache_creation_input_tokens: count.nullish(),
  cache_read_input_tokens: count.nullish(),
});
/** Gemini's candidatesTokenCount leaves out the thinking tokens. */
const geminiUsage = z.object({
  promptTokenCount: count.default(0),
  candidatesTokenCount: count.default(0),
  cachedContentTokenCount: count.optional(),
  thoughtsTokenCount: count.optional(),
});

/** The usage a provider's answer (or a stream's usage so far) reports, in the adapter's format; undefined when it reports none. */
export function reportedUsage(format: string, answer: unknown): ReportedUsage | undefined {
  const fields = (answer ?? {}) as { usage?: unknown; usageMetadata?: unknown };
  if (format === "anthropic") {
    const usage = anthropicUsage.safeParse(fields.usage);
    if (!usage.success) return undefined;
    const { input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens } = usage.data;
    return {
      inputTokens: input_tokens + (cache_creation_input_tokens ?? 0) + (cache_read_input_tokens ?? 0),
      outputTokens: output_tokens,
      cachedTokens: cache_read_input_tokens ?? null,
      reasoningTokens: null,
    };
  }
  if (format === "gemini") {
    const usage = geminiUsage.safeParse(fields.usageMetadata);
    if (!usage.success || fields.usageMetadata === undefined) return undefined;
    const { promptTokenCount, candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount } = usage.data;
    return {
      inputTokens: promptTokenCount,
      outputTokens: candidatesTokenCount + (thoughtsTokenCount ?? 0),
      cachedTokens: cachedContentTokenCount ?? null,
      reasoningTokens: thoughtsTokenCount ?? null,
    };
  }
  const usage = openAiUsage.safeParse(fields.usage);
  if (!usage.success) return undefined;
  return {
    inputTokens: usage.data.prompt_tokens,
    outputTokens: usage.data.completion_tokens,
    cachedTokens: usage.data.prompt_tokens_details?.cached_tokens ?? null,
    reasoningTokens: usage.data.completion_tokens_details?.reasoning_tokens ?? null,
  };
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
