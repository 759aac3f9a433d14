import { z } from "zod";
import type { HistoryWindow } from "./store.js";

/**
 * Which earlier messages a turn sends to the model (AgentDock's history policies):
 * - `all`: every turn of the thread's current path;
 * - `lastN`: the last `length` user messages and everything after each, the current message
 *   counted (lastN with length 1 sends only the current message; 0 behaves as 1);
 * - `none`: no history at all, nothing is read.
 * `preserveSystemMessages` also keeps system and summary messages older than the window.
 * `maxTokens` caps the earlier history's tokens (see token-budget.ts); null: no cap.
 * Imports: zod and store.ts types.
 */
export const historyPolicyName = z.enum(["all", "lastN", "none"]);
type HistoryPolicyName = z.infer<typeof historyPolicyName>;

/** Longest history length accepted from a request or the environment, in user messages. */
const MAX_HISTORY_LENGTH = 1_000;
/** Largest token budget accepted: far above any model's context window. */
const MAX_HISTORY_TOKENS = 2_000_000;

export const historyLength = z.number().int().min(0).max(MAX_HISTORY_LENGTH);
export const historyMaxTokens = z.number().int().positive().max(MAX_HISTORY_TOKENS);

/** History settings a request may carry (event data `history`, the POST /api/chat body). */
export const historyRequest = z
  .object({
    policy: historyPolicyName.optional(),
    length: historyLength.optional(),
    preserveSystemMessages: z.boolean().optional(),
    maxTokens: historyMaxTokens.optional(),
  })
  .strict();
export type HistoryRequest = z.infer<typeof historyRequest>;

/**
 * Ceilings the operator puts on every turn, whatever the request or the other settings say:
 * - `length`: user messages a window reads at most. A request for `all` reads every turn up to
 *   this many user messages (the current one counted), and reports length = the maximum;
 * - `maxTokens`: the largest token budget; a turn without a budget gets this one;
 * - `maxBytes`: the byte budget of what history.get returns (UTF-8 bytes of the rows' JSON).
 */
export type HistoryMaximums = { length: number; maxTokens: number; maxBytes: number };

/**
 * The maximums when the operator sets none. 60,000 bytes of rows keep history.get's output
 * (rows plus its small reports) under 64 KB whatever the message sizes; 100 user messages are
 * far more than a chat turn needs and far less than a runaway request asks. A token takes at
 * least one byte, so the default token maximum, above the default byte budget, never binds by
 * itself: it caps what a request asks for, and binds when the operator raises HISTORY_MAX_BYTES.
 */
export const DEFAULT_HISTORY_MAXIMUMS: HistoryMaximums = { length: 100, maxTokens: 64_000, maxBytes: 60_000 };

/** Largest byte budget accepted: well under Inngest's 4 MB step output limit. */
const MAX_HISTORY_BYTES = 3_000_000;
export const historyMaxBytes = z.number().int().min(1_000).max(MAX_HISTORY_BYTES);

/** Settings the operator fixes for every request (HISTORY_* environment variables) and the maximums. */
export type HistoryEnvironment = HistoryRequest & { maximums?: Partial<HistoryMaximums> };

export type HistorySettings = {
  policy: HistoryPolicyName;
  length: number;
  preserveSystemMessages: boolean;
  maxTokens: number | null;
};

/** The agent's own defaults, used where neither the environment nor the request decides. */
export const AGENT_HISTORY_DEFAULTS: HistorySettings = {
  policy: "lastN",
  length: 20,
  preserveSystemMessages: true,
  maxTokens: null,
};

/** Where a setting came from; "operator-maximum": what was asked for went past the operator's maximum. */
type SettingSource = "environment" | "request" | "default" | "operator-maximum";

export type ResolvedHistoryPolicy = HistorySettings & {
  /** The byte budget of history.get's output (the operator's, never a request's). */
  maxBytes: number;
  sources: Record<keyof HistorySettings, SettingSource> & { maxBytes: "environment" | "default" };
};

/**
 * Each setting from the first source that sets it: environment (the operator's word, which a
 * request cannot override), then the request, then the agent's defaults; then held to the
 * operator's maximums (environment, else DEFAULT_HISTORY_MAXIMUMS).
 */
export function resolveHistoryPolicy(input: {
  environment?: HistoryEnvironment | undefined;
  request?: HistoryRequest | undefined;
  defaults?: HistorySettings;
}): ResolvedHistoryPolicy {
  const defaults = input.defaults ?? AGENT_HISTORY_DEFAULTS;
  const pick = <K extends keyof HistorySettings>(key: K): [HistorySettings[K], SettingSource] => {
    const fromEnvironment = input.environment?.[key];
    if (fromEnvironment !== undefined) return [fromEnvironment as HistorySettings[K], "environment"];
    const fromRequest = input.request?.[key];
    if (fromRequest !== undefined) return [fromRequest as HistorySettings[K], "request"];
    return [defaults[key], "default"];
  };
  const maximums = { ...DEFAULT_HISTORY_MAXIMUMS, ...input.environment?.maximums };
  const [policy, policySource] = pick("policy");
  const [preserveSystemMessages, preserveSource] = pick("preserveSystemMessages");
  let [length, lengthSource] = pick("length");
  if (policy === "all" || length > maximums.length) [length, lengthSource] = [maximums.length, "operator-maximum"];
  let [maxTokens, maxTokensSource] = pick("maxTokens");
  if (maxTokens === null || maxTokens > maximums.maxTokens)
    [maxTokens, maxTokensSource] = [maximums.maxTokens, "operator-maximum"];
  return {
    policy,
    length,
    preserveSystemMessages,
    maxTokens,
    maxBytes: maximums.maxBytes,
    sources: {
      policy: policySource,
      length: lengthSource,
      preserveSystemMessages: preserveSource,
      maxTokens: maxTokensSource,
      maxBytes: input.environment?.maximums?.maxBytes !== undefined ? "environment" : "default",
    },
  };
}

/**
 * The database window a policy reads; null: the policy reads nothing (`none`). A resolved `all`
 * carries the operator's length maximum, so it reads at most that many user messages too.
 */
export function historyWindow(policy: HistorySettings): HistoryWindow | null {
  if (policy.policy === "none") return null;
  return {
    userMessages: Math.max(policy.length, 1),
    // `all` keeps every system message, also those older than a window the maximum cut short.
    preserveSystemMessages: policy.policy === "all" || policy.preserveSystemMessages,
  };
}
