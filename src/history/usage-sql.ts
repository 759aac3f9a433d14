/**
 * The statements of usage.ts: the usage ledger (usage_records) and the per-user budgets
 * (user_budgets), migration 0020.
 */

/**
 * One model call's usage, once per attempt ($1 is the attempt's key). The answer variant is the
 * turn's, read from its row (NULL when the turn row is gone, e.g. its thread was deleted meanwhile).
 * A call whose thread is gone and whose user has an erasure on record (user_erasures, migration
 * 0034) is not recorded: it was made by a turn in flight when the user was erased, and the
 * erasure deleted the user's ledger. (A user erased once, back under the same id, whose own thread
 * is deleted while a turn runs on it, has that turn's last calls unrecorded.)
 */
export const insertUsage = `
  INSERT INTO usage_records (key, user_id, thread_id, message_id, variant, run_id, step_id, attempt, provider, model,
    input_tokens, output_tokens, cached_tokens, reasoning_tokens, latency_ms, cost_usd, failed)
  SELECT $1, $2, $3, $4, (SELECT variant FROM turns WHERE run_id = $5), $5, $6, $7, $8, $9,
    $10, $11, $12, $13, $14, $15, $16
  WHERE EXISTS (SELECT 1 FROM threads t WHERE t.id = $3::uuid)
    OR NOT threadline_user_erased_after($2::text, '-infinity')
  ON CONFLICT (key) DO NOTHING`;
/** The prepared name of insertUsage (a turn's usage step): parsed and planned once per connection. */
export const insertUsageName = "usage.insert";

/** The sums every usage read returns, over the rows `u`. Numbers as text: bigint and numeric stay exact. */
const sums = `
  count(*)::int AS calls,
  coalesce(sum(u.input_tokens), 0)::text AS input_tokens,
  coalesce(sum(u.output_tokens), 0)::text AS output_tokens,
  coalesce(sum(u.cached_tokens), 0)::text AS cached_tokens,
  coalesce(sum(u.reasoning_tokens), 0)::text AS reasoning_tokens,
  sum(u.cost_usd)::text AS cost_usd`;

export type UsageSumsRow = {
  calls: number;
  input_tokens: string;
  output_tokens: string;
  cached_tokens: string;
  reasoning_tokens: string;
  cost_usd: string | null;
};

/** The caller's usage from $2 (inclusive) to $3 (exclusive), one row per UTC day. */
export const usageByDay = `
  SELECT to_char(date_trunc('day', u.created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS key, ${sums}
  FROM usage_records u WHERE u.user_id = $1 AND u.created_at >= $2 AND u.created_at < $3
  GROUP BY 1 ORDER BY 1`;

/** The same, one row per thread (deleted threads included: what was spent stays spent). */
export const usageByThread = `
  SELECT u.thread_id::text AS key, ${sums}
  FROM usage_records u WHERE u.user_id = $1 AND u.created_at >= $2 AND u.created_at < $3
  GROUP BY 1 ORDER BY 1`;

/** The same, one row per model (with its provider). */
export const usageByModel = `
  SELECT u.model AS key, min(u.provider) AS provider, ${sums}
  FROM usage_records u WHERE u.user_id = $1 AND u.created_at >= $2 AND u.created_at < $3
  GROUP BY 1 ORDER BY 1`;

export type UsageGroupRow = UsageSumsRow & { key: string; provider?: string };

/** One turn's usage (its run id), and the model of its latest call. */
export const turnUsage = `
  SELECT ${sums},
    (SELECT model FROM usage_records WHERE run_id = $1 ORDER BY created_at DESC, key DESC LIMIT 1) AS model
  FROM usage_records u WHERE u.run_id = $1`;
export type TurnUsageRow = UsageSumsRow & { model: string | null };

/**
 * The user's budget row (NULL without one), and their tokens and cost since $2 (the UTC day's
 * start) and since $3 (the UTC month's start): what a send is checked against, in one read.
 */
export const budgetStanding = `
  SELECT
    (SELECT json_build_object(
       'dailyTokens', b.daily_tokens, 'monthlyTokens', b.monthly_tokens,
       'dailyCostUsd', b.daily_cost_usd::float8, 'monthlyCostUsd', b.monthly_cost_usd::float8)
     FROM user_budgets b WHERE b.user_id = $1) AS budget,
    coalesce(sum(u.input_tokens + u.output_tokens) FILTER (WHERE u.created_at >= $2), 0)::text AS day_tokens,
    coalesce(sum(u.cost_usd) FILTER (WHERE u.created_at >= $2), 0)::text AS day_cost_usd,
    coalesce(sum(u.input_tokens + u.output_tokens), 0)::text AS month_tokens,
    coalesce(sum(u.cost_usd), 0)::text AS month_cost_usd
  FROM usage_records u WHERE u.user_id = $1 AND u.created_at >= least($2, $3)`;
export type BudgetStandingRow = {
  budget: {
    dailyTokens: number | null;
    monthlyTokens: number | null;
    dailyCostUsd: number | null;
    monthlyCostUsd: number | null;
  } | null;
  day_tokens: string;
  day_cost_usd: string;
  month_tokens: string;
  month_cost_usd: string;
};

/** Sets the user's budget (every limit at once; NULL: none of that kind). */
export const upsertBudget = `
  INSERT INTO user_budgets (user_id, daily_tokens, monthly_tokens, daily_cost_usd, monthly_cost_usd)
  VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (user_id) DO UPDATE SET daily_tokens = $2, monthly_tokens = $3, daily_cost_usd = $4,
    monthly_cost_usd = $5, updated_at = now()`;

/** The user goes back to the configured defaults. */
export const deleteBudget = `DELETE FROM user_budgets WHERE user_id = $1`;

/** Erasing a user: their ledger rows and budget, in the erasure's transaction. */
export const deleteUserUsage = `
  WITH budget AS (DELETE FROM user_budgets WHERE user_id = $1)
  DELETE FROM usage_records WHERE user_id = $1`;
