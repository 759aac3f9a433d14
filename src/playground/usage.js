/**
 * What a turn used and cost, under its answer: the messages API's `turnUsage` (tokens and cost
 * summed over the turn's model calls) as one line of text. Nothing when the provider reported no usage.
 */
import { h } from "./render.js";

const count = new Intl.NumberFormat("en");

/** Dollars with enough digits to show a cheap turn's cost (a fraction of a cent). */
const dollars = (usd) => `$${usd >= 1 ? usd.toFixed(2) : usd.toPrecision(2)}`;

/** The line shown under a turn's answer, or null. */
export function turnUsageLine(usage) {
  if (!usage) return null;
  const parts = [
    `${count.format(usage.totalTokens)} tokens (${count.format(usage.inputTokens)} in, ${count.format(usage.outputTokens)} out)`,
    usage.costUsd === null ? "no price" : dollars(usage.costUsd),
    usage.model,
  ];
  if (usage.calls > 1) parts.push(`${usage.calls} model calls`);
  return h(
    "div",
    {
      class: "usage",
      title: `Cached input: ${count.format(usage.cachedTokens)} tokens; reasoning: ${count.format(usage.reasoningTokens)} tokens`,
    },
    parts.join(" · "),
  );
}
