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
 */
export const historyPolicyName = z.enum(["all", "lastN", "none"]);
export type HistoryPolicyName = z.infer<typeof historyPolicyName>;

/** Longest history length accepted from a request or the environment, in user messages. */
export const MAX_HISTORY_LENGTH = 1_000;
/** Largest token budget accepted: far above any model's context window. */
export const MAX_HISTORY_TOKENS = 2_000_000;

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

/** Settings the operator fixes for every request (HISTORY_* environment variables). */
export type HistoryEnvironment = HistoryRequest;

export type HistorySettings = { policy: HistoryPolicyName; length: number; preserveSystemMessages: boolean; maxTokens: number | null };

/** The agent's own defaults, used where neither the environment nor the request decides. */
export const AGENT_HISTORY_DEFAULTS: HistorySettings = { policy: "lastN", length: 20, preserveSystemMessages: true, maxTokens: null };

export type SettingSource = "environment" | "request" | "default";

export type ResolvedHistoryPolicy = HistorySettings & { sources: Record<keyof HistorySettings, SettingSource> };

/**
 * Each setting from the first source that sets it: environment (the operator's word, which a
 * request cannot override), then the request, then the agent's defaults.
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
  const [policy, policySource] = pick("policy");
  const [length, lengthSource] = pick("length");
  const [preserveSystemMessages, preserveSource] = pick("preserveSystemMessages");
  const [maxTokens, maxTokensSource] = pick("maxTokens");
  return {
    policy,
    length,
    preserveSystemMessages,
    maxTokens,
    sources: { policy: policySource, length: lengthSource, preserveSystemMessages: preserveSource, maxTokens: maxTokensSource },
  };
}

/** The database window a policy reads; null: the policy reads nothing (`none`). */
export function historyWindow(policy: HistorySettings): HistoryWindow | null {
  if (policy.policy === "none") return null;
  return {
    userMessages: policy.policy === "all" ? null : Math.max(policy.length, 1),
    preserveSystemMessages: policy.preserveSystemMessages,
  };
}
