// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type pg from "pg";
import { verifiedUserId } from "../src/auth/identity.js";
import { budgetDefaults, readEnvironment } from "../src/config.js";
import { type BudgetLimits, budgetStanding, setUserBudget } from "../src/history/usage.js";
import { runDatabaseCommand, UsageError } from "./database-command.js";

const USAGE = `Usage: node dist/scripts/budget.js <command>   (npm run budget -- <command>)
  show --user <user id>    the user's limits (their own, or the BUDGET_* defaults) and usage this UTC day and month
  set --user <user id> [--daily-tokens <n>] [--monthly-tokens <n>] [--daily-cost <USD>] [--monthly-cost <USD>]
                           the user's own limits, replacing the defaults for them (a limit not given: none)
  clear --user <user id>   back to the BUDGET_* defaults
Tokens count input + output. A send over a limit is refused (429) until the period resets; a turn
already running finishes. Uses DATABASE_URL, or the embedded database under DATA_DIR.`;

const wholeNumber = (name: string, value: string | undefined) => {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`${name} must be a whole number of tokens`);
  return Number(value);
};
const dollars = (name: string, value: string | undefined) => {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}(\.\d{1,9})?$/.test(value)) throw new UsageError(`${name} must be an amount of US dollars, e.g. 2.50`);
  return Number(value);
};

const describeLimit = ({ tokens, costUsd }: { tokens?: number; costUsd?: number }) =>
  [tokens === undefined ? undefined : `${tokens} tokens`, costUsd === undefined ? undefined : `$${costUsd}`]
    .filter(Boolean)
    .join(", ") || "no limit";

/**
 * npm run budget — shows, sets and clears one user's usage budget (DATABASE_URL, or the embedded
 * database). `defaults`: the configured BUDGET_* limits. Returns what to print.
 */
export async function budgetCommand(
  args: string[],
  db: pg.Pool,
  defaults: BudgetLimits = budgetDefaults(readEnvironment()),
): Promise<string> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      user: { type: "string" },
      "daily-tokens": { type: "string" },
      "monthly-tokens": { type: "string" },
      "daily-cost": { type: "string" },
      "monthly-cost": { type: "string" },
    },
  });
  const [command] = positionals;
  if (command !== "show" && command !== "set" && command !== "clear")
    throw new UsageError(command === undefined ? "no command given" : `unknown command ${command}`);
  const user = verifiedUserId.safeParse(values.user);
  if (!user.success)
    throw new UsageError(`${command} needs --user <user id> (1 to 200 characters, no control characters)`);
  const userId = user.data;
  if (command === "set") {
    const limits: BudgetLimits = {
      dailyTokens: wholeNumber("--daily-tokens", values["daily-tokens"]),
      monthlyTokens: wholeNumber("--monthly-tokens", values["monthly-tokens"]),
      dailyCostUsd: dollars("--daily-cost", values["daily-cost"]),
      monthlyCostUsd: dollars("--monthly-cost", values["monthly-cost"]),
    };
    if (Object.values(limits).every((limit) => limit === undefined))
      throw new UsageError("set needs at least one of --daily-tokens, --monthly-tokens, --daily-cost, --monthly-cost");
    await setUserBudget(db, userId, limits);
  }
  if (command === "clear") await setUserBudget(db, userId, undefined);
  const standing = await budgetStanding(db, userId, defaults, new Date());
  return [
    `User ${JSON.stringify(userId)}: ${standing.own ? "their own budget" : "the configured defaults (BUDGET_*)"}`,
    ...standing.periods.map(
      ({ period, usage, limit, resetAt }) =>
        `  this ${period}: used ${usage.tokens} tokens, $${usage.costUsd}; limit ${describeLimit(limit)}; resets ${resetAt.toISOString()}`,
    ),
  ].join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDatabaseCommand(USAGE, budgetCommand);
