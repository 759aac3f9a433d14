/**
 * The usage ledger: what each model call of a turn used and cost (recorded once per attempt), the
 * caller's usage over a time range, one turn's usage, and the per-user budgets a send is checked
 * against. Imports: pg, usage-sql.ts.
 */
import type pg from "pg";
import * as sql from "./usage-sql.js";

/** One model call's usage, as the turn's inference step records it. */
export type UsageRecord = {
  /** The attempt's idempotency key: run id, step id and attempt. */
  key: string;
  userId: string;
  threadId: string;
  messageId: string;
  runId: string;
  stepId: string;
  attempt: number;
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number | null;
  reasoningTokens: number | null;
  /** From the request to the last byte of the answer, when this process measured it (INFERENCE=stream). */
  latencyMs: number | null;
  costUsd: number | null;
  /** The attempt failed after the provider reported its usage. */
  failed: boolean;
};

/**
 * A turn's inference usage left for its answer's store (history.append-results) to record in the
 * same statement: that of the inference the answer came from, when nothing ran after it.
 */
export type PendingUsage = {
  /** The usage the store is to record, if any is pending. */
  pending: () => UsageRecord | undefined;
  /** The store recorded the pending usage (or a memoized store had). */
  stored: () => void;
};

/** Records a call's usage; the same key again inserts nothing. One statement. */
export async function recordUsage(db: pg.Pool, record: UsageRecord): Promise<void> {
  await db.query({ name: sql.insertUsageName, text: sql.insertUsage, values: usageValues(record) });
}

/** A usage record as the values of the usage insert ($1–$16, in its column order). */
export function usageValues(record: UsageRecord): unknown[] {
  return [
    record.key,
    record.userId,
    record.threadId,
    record.messageId,
    record.runId,
    record.stepId,
    record.attempt,
    record.provider,
    record.model,
    record.inputTokens,
    record.outputTokens,
    record.cachedTokens,
    record.reasoningTokens,
    record.latencyMs,
    record.costUsd,
    record.failed,
  ];
}

/** Summed usage: tokens and calls, and the cost of the priced calls (null when none was priced). */
export type UsageSums = {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  totalTokens: number;
  costUsd: number | null;
};

/** One turn's sums and the model its calls named (the messages API's turnUsage). */
export type TurnUsage = UsageSums & { model: string };

const toSums = (row: sql.UsageSumsRow): UsageSums => ({
  calls: row.calls,
  inputTokens: Number(row.input_tokens),
  outputTokens: Number(row.output_tokens),
  cachedTokens: Number(row.cached_tokens),
  reasoningTokens: Number(row.reasoning_tokens),
  totalTokens: Number(row.input_tokens) + Number(row.output_tokens),
  costUsd: row.cost_usd === null ? null : Number(row.cost_usd),
});

export const USAGE_GROUPS = ["day", "thread", "model"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

const groupStatements: Record<UsageGroup, string> = {
  day: sql.usageByDay,
  thread: sql.usageByThread,
  model: sql.usageByModel,
};

/** The user's usage from `from` (inclusive) to `to` (exclusive), grouped, with the total of the groups. */
export async function usageReport(
  db: pg.Pool,
  { userId, from, to, groupBy }: { userId: string; from: Date; to: Date; groupBy: UsageGroup },
) {
  const { rows } = await db.query<sql.UsageGroupRow>(groupStatements[groupBy], [userId, from, to]);
  const groups = rows.map((row) => ({
    key: row.key,
    ...(row.provider ? { provider: row.provider } : {}),
    ...toSums(row),
  }));
  const priced = groups.filter((group) => group.costUsd !== null);
  const total: UsageSums = {
    calls: sum(groups.map((g) => g.calls)),
    inputTokens: sum(groups.map((g) => g.inputTokens)),
    outputTokens: sum(groups.map((g) => g.outputTokens)),
    cachedTokens: sum(groups.map((g) => g.cachedTokens)),
    reasoningTokens: sum(groups.map((g) => g.reasoningTokens)),
    totalTokens: sum(groups.map((g) => g.totalTokens)),
    costUsd: priced.length === 0 ? null : roundUsd(sum(priced.map((g) => g.costUsd!))),
  };
  return { groups, total };
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
/** Costs are stored to the nano-dollar: sums of them in JavaScript are rounded back to it. */
const roundUsd = (usd: number) => Math.round(usd * 1e9) / 1e9;

/**
 * One turn's usage (by its run id), with the model of its latest call; undefined when the turn
 * recorded none. What an event about the turn carries (e.g. message/feedback.given).
 */
export async function turnUsage(db: pg.Pool, runId: string): Promise<TurnUsage | undefined> {
  const row = (await db.query<sql.TurnUsageRow>(sql.turnUsage, [runId])).rows[0]!;
  if (row.calls === 0 || row.model === null) return undefined;
  return { ...toSums(row), model: row.model };
}

/** A user's limits per UTC day and month, in tokens (input + output) and US dollars; absent: no limit. */
export type BudgetLimits = {
  dailyTokens?: number | undefined;
  monthlyTokens?: number | undefined;
  dailyCostUsd?: number | undefined;
  monthlyCostUsd?: number | undefined;
};

/** The limits that are set (NULL or undefined: none of that kind). */
const defined = <T extends Record<string, number | null | undefined>>(limits: T) =>
  Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== null && value !== undefined)) as {
    [K in keyof T]?: number;
  };

/** One period's standing: its usage so far, its limits (those set), and when it resets. */
type PeriodStanding = {
  period: "day" | "month";
  resetAt: Date;
  usage: { tokens: number; costUsd: number };
  limit: { tokens?: number; costUsd?: number };
};

/**
 * A user's budget and usage now: whether the limits are their own (npm run budget) or the
 * configured defaults, and for the current UTC month and day what was used and what is allowed.
 * One statement.
 */
export async function budgetStanding(db: pg.Pool, userId: string, defaults: BudgetLimits, now: Date) {
  const day = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const row = (await db.query<sql.BudgetStandingRow>(sql.budgetStanding, [userId, day, month])).rows[0]!;
  const limits: BudgetLimits = row.budget ? defined(row.budget) : defaults;
  const periods: PeriodStanding[] = [
    {
      period: "month",
      resetAt: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
      usage: { tokens: Number(row.month_tokens), costUsd: Number(row.month_cost_usd) },
      limit: defined({ tokens: limits.monthlyTokens, costUsd: limits.monthlyCostUsd }),
    },
    {
      period: "day",
      resetAt: new Date(day.getTime() + 86_400_000),
      usage: { tokens: Number(row.day_tokens), costUsd: Number(row.day_cost_usd) },
      limit: defined({ tokens: limits.dailyTokens, costUsd: limits.dailyCostUsd }),
    },
  ];
  return { own: row.budget !== null, periods };
}

/** Why a send is refused: the period whose limit is reached, when it resets, what was used and the limit. */
export type BudgetRefusal = PeriodStanding;

/**
 * Whether the user may send now: their own budget or else the configured defaults, against their
 * usage of the current UTC day and month. A turn already running is never stopped by this: only
 * new sends are refused, until the period resets.
 */
export async function budgetRefusal(
  db: pg.Pool,
  userId: string,
  defaults: BudgetLimits,
  now: Date,
): Promise<BudgetRefusal | undefined> {
  const { periods } = await budgetStanding(db, userId, defaults, now);
  // The month first: when both are reached, sending is possible again only when the month resets.
  return periods.find(
    ({ usage, limit }) =>
      (limit.tokens !== undefined && usage.tokens >= limit.tokens) ||
      (limit.costUsd !== undefined && usage.costUsd >= limit.costUsd),
  );
}

/** Sets a user's own budget (replacing the defaults for them), or with `undefined` puts them back on the defaults. */
export async function setUserBudget(db: pg.Pool, userId: string, limits: BudgetLimits | undefined): Promise<void> {
  if (limits === undefined) {
    await db.query(sql.deleteBudget, [userId]);
    return;
  }
  await db.query(sql.upsertBudget, [
    userId,
    limits.dailyTokens ?? null,
    limits.monthlyTokens ?? null,
    limits.dailyCostUsd ?? null,
    limits.monthlyCostUsd ?? null,
  ]);
}

/** Erases a user's ledger rows and budget, inside the erasure's transaction; returns the ledger rows removed. */
export async function deleteUserUsage(client: pg.PoolClient, userId: string): Promise<number> {
  return (await client.query(sql.deleteUserUsage, [userId])).rowCount ?? 0;
}
