import { readFileSync } from "node:fs";
import { z } from "zod";
import { DEFAULT_PRICES, priceTable, type PriceTable } from "./agents/usage.js";
import type { BudgetLimits } from "./history/usage.js";
import { NETWORK_AGENTS, networkName } from "./agents/network.js";
import { DEFAULT_APPROVAL_EXPIRY_MINUTES } from "./functions/tool-approvals.js";
import { DEFAULT_MEMORY_CONTEXT_TOKENS } from "./memory/user-memory.js";
import type { AuthSettings } from "./auth/settings.js";
import type { AgentsConfig } from "./functions/chat-turn.js";
import { DEFAULT_SESSION_TIMEOUTS } from "./platform/database.js";
import { busyPolicy, DEFAULT_BUSY_POLICY } from "./history/busy-policy.js";
import { DEFAULT_EVENT_RETENTION_HOURS } from "./history/events.js";
import { DEFAULT_LOST_RUN_DEADLINE_MINUTES } from "./history/lost-turns.js";
import { DEFAULT_TOMBSTONE_DAYS } from "./history/threads.js";
import { DEFAULT_STREAM_LIMITS } from "./stream/stream-slots.js";
import {
  DEFAULT_HISTORY_MAXIMUMS,
  historyLength,
  historyMaxBytes,
  historyMaxTokens,
  historyPolicyName,
  type HistoryEnvironment,
  type HistoryMaximums,
} from "./history/policy.js";

const optionalText = z.string().trim().min(1).optional().catch(undefined);
/** An optional setting: unset or empty means "not set"; anything else must be valid. */
const optionalSetting = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (typeof value === "string" && value.trim() === "" ? undefined : value), schema.optional());

/**
 * A whole number from `min` to `max`, its errors naming the setting and its unit. `notANumber`:
 * the message for a value that is no number, where it differs from the one for a fraction.
 */
const wholeNumber = (
  name: string,
  {
    unit,
    min,
    max,
    belowMin = "",
    notANumber,
  }: { unit?: string; min: number; max: number; belowMin?: string; notANumber?: string },
) => {
  const whole = `${name} must be a whole number${unit ? ` of ${unit}` : ""}`;
  return z.coerce
    .number({ error: notANumber ?? whole })
    .int(whole)
    .min(min, `${name} must be at least ${min}${belowMin}`)
    .max(max, `${name} must be at most ${max}`);
};

const flag = z
  .enum(["1", "true", "0", "false"], { error: "must be 1, true, 0 or false" })
  .transform((value) => value === "1" || value === "true");

/** A comma-separated list of names: trimmed, empty entries and repeats dropped (default none). */
const nameList = z
  .string()
  .default("")
  .transform((list) => [
    ...new Set(
      list
        .split(",")
        .map((name) => name.trim())
        .filter((name) => name.length > 0),
    ),
  ]);

/** Production mode, Inngest's mode and authentication: what src/platform/production.ts checks at start-up. */
const deploymentEnvironment = z.object({
  /** "production" switches on the start-up refusals of production mode. */
  NODE_ENV: optionalText,
  /** Explicit choice of the Inngest dev server (1, or its URL); never set in production. */
  INNGEST_DEV: optionalText,
  INNGEST_SIGNING_KEY: optionalText,
  INNGEST_SIGNING_KEY_FALLBACK: optionalText,
  INNGEST_EVENT_KEY: optionalText,
  /** A self-hosted Inngest server (or the dev server elsewhere than localhost:8288): its events and REST API, as the SDK reads them; set, `npm run dev` starts no dev server of its own. */
  INNGEST_BASE_URL: optionalSetting(
    z.url({ error: "INNGEST_BASE_URL must be the URL of your Inngest server (e.g. http://inngest:8288)" }),
  ),
  INNGEST_EVENT_API_BASE_URL: optionalSetting(z.url({ error: "INNGEST_EVENT_API_BASE_URL must be a URL" })),
  INNGEST_API_BASE_URL: optionalSetting(z.url({ error: "INNGEST_API_BASE_URL must be a URL" })),
  /** The app's public origin as Inngest reaches it (https://host[:port]): announced on sync instead of a request's Host. */
  INNGEST_SERVE_ORIGIN: optionalSetting(
    z
      .url({
        protocol: /^https?$/,
        error: "INNGEST_SERVE_ORIGIN must be an http(s) origin such as https://chat.example.com",
      })
      .refine(
        (value) => !URL.canParse(value) || (new URL(value).pathname === "/" && new URL(value).search === ""),
        "INNGEST_SERVE_ORIGIN is an origin only (scheme, host, port): put a path in INNGEST_SERVE_PATH",
      )
      .transform((value) => new URL(value).origin),
  ),
  /**
   * Browser origins allowed to call the API from another origin (CORS), comma-separated: e.g. a web
   * app at https://app.example.com using useChat with Threadline's URL. Unset: same origin only.
   */
  CORS_ORIGINS: optionalSetting(
    z
      .string()
      .transform((value) => value.split(",").map((origin) => origin.trim()))
      .pipe(
        z.array(
          z
            .url({
              protocol: /^https?$/,
              error: "CORS_ORIGINS must list http(s) origins, comma-separated (e.g. https://app.example.com)",
            })
            .refine(
              (value) => !URL.canParse(value) || value === new URL(value).origin,
              "CORS_ORIGINS holds origins only, as a browser sends them: scheme, host and port, no path or trailing slash",
            ),
        ),
      ),
  ),
  /** The path of the serve endpoint as Inngest reaches it (a proxy may add a prefix); default /api/inngest. */
  INNGEST_SERVE_PATH: optionalSetting(
    z.string().regex(/^\/[^\s?#]*$/, "INNGEST_SERVE_PATH must be a path starting with / (e.g. /api/inngest)"),
  ),
  /** "dev": take the user from the X-Threadline-User header (local development only). */
  AUTH: optionalSetting(
    z.enum(["dev"], { error: 'AUTH accepts only "dev" (local development); unset it to require JWTs or API keys' }),
  ),
  AUTH_JWKS_URL: optionalSetting(
    z.url({ error: "AUTH_JWKS_URL must be the URL of your identity provider's JWKS (…/.well-known/jwks.json)" }),
  ),
  AUTH_JWT_SECRET: optionalSetting(
    z.string().min(32, "AUTH_JWT_SECRET must be at least 32 characters (HS256 shared secret)"),
  ),
  AUTH_JWT_ISSUER: optionalText,
  AUTH_JWT_AUDIENCE: optionalText,
  AUTH_JWT_CLOCK_SKEW: optionalSetting(
    z.coerce.number().int().min(0).max(300, "AUTH_JWT_CLOCK_SKEW is in seconds, at most 300"),
  ),
  AUTH_JWT_USER_CLAIM: optionalText,
  /** The longest token lifetime accepted: seconds, or a number with s, m, h or d (e.g. 24h); unset: any. */
  AUTH_JWT_MAX_AGE: optionalSetting(
    z
      .string()
      .trim()
      .regex(
        /^\d+\s*[smhd]?$/,
        "AUTH_JWT_MAX_AGE must be a duration: seconds, or a number with s, m, h or d (e.g. 3600 or 24h)",
      )
      .transform(
        (value) =>
          Number.parseInt(value, 10) *
          { s: 1, m: 60, h: 3_600, d: 86_400 }[(/[smhd]$/.exec(value)?.[0] ?? "s") as "s" | "m" | "h" | "d"],
      )
      .pipe(z.number().int().positive("AUTH_JWT_MAX_AGE must be more than 0")),
  ),
  /** Refused credentials (bad token or API key) a client address may send a minute, as a burst and a refill; 0: no limit. */
  AUTH_FAILURES_PER_MINUTE: z.coerce
    .number({ error: "AUTH_FAILURES_PER_MINUTE must be a whole number" })
    .int()
    .min(0)
    .default(20),
  /** A header your proxy sets to the client's address (e.g. X-Forwarded-For, last value used); unset: the connection's peer. */
  AUTH_CLIENT_ADDRESS_HEADER: optionalText,
  /** Production without JWTs: callers are servers holding API keys, and that is intended. */
  AUTH_API_KEYS_ONLY: optionalSetting(flag),
});

/** The environment Threadline reads, validated once at the edge. Empty values count as unset. */
export const environment = z
  .object({
    ...deploymentEnvironment.shape,
    DATABASE_URL: optionalText,
    PORT: z.coerce.number().int().positive().default(3000),
    /** The interface the HTTP server listens on: every interface (containers) unless set; npm run dev uses loopback. */
    HOST: optionalSetting(z.string().trim().min(1)).transform((value) => value ?? "0.0.0.0"),
    /** A running turn whose run the engine cannot vouch for is recorded failed after this long as its thread's current turn. */
    LOST_RUN_DEADLINE_MINUTES: optionalSetting(
      wholeNumber("LOST_RUN_DEADLINE_MINUTES", { unit: "minutes", min: 2, max: 240 }),
    ).transform((value) => value ?? DEFAULT_LOST_RUN_DEADLINE_MINUTES),
    /** Readiness (GET /health/ready) probes the Inngest server at most once per this many seconds. */
    READINESS_ENGINE_INTERVAL_SECONDS: optionalSetting(
      wholeNumber("READINESS_ENGINE_INTERVAL_SECONDS", {
        unit: "seconds",
        min: 1,
        max: 300,
        notANumber: "READINESS_ENGINE_INTERVAL_SECONDS must be a number of seconds",
      }),
    ).transform((value) => value ?? 10),
    DATA_DIR: z.string().default(".data"),
    EMBEDDED_POSTGRES_PORT: z.coerce.number().int().positive().default(54329),
    /** "pretty": human-readable log lines (npm run dev's default; never in production); "json" otherwise. Read by src/platform/logger.ts as it loads. */
    LOG_FORMAT: optionalSetting(z.enum(["json", "pretty"], { error: 'LOG_FORMAT must be "json" or "pretty"' })),
    /** PostgreSQL's statement_timeout for the app's pooled sessions, in ms (0: none). */
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(0).default(DEFAULT_SESSION_TIMEOUTS.statementTimeoutMs),
    /** PostgreSQL's idle_in_transaction_session_timeout for the app's pooled sessions, in ms (0: none). */
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(0)
      .default(DEFAULT_SESSION_TIMEOUTS.idleInTransactionTimeoutMs),
    /** How long SIGTERM/SIGINT waits for requests in flight before cutting them off. */
    SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().nonnegative().default(10_000),
    OPENAI_API_KEY: optionalText,
    OPENAI_BASE_URL: optionalText,
    ANTHROPIC_API_KEY: optionalText,
    GEMINI_API_KEY: optionalText,
    MODEL: optionalText,
    /** Where development start-up looks for a local Ollama when no provider is configured. */
    OLLAMA_BASE_URL: optionalSetting(
      z.url({ error: "OLLAMA_BASE_URL must be Ollama's URL, e.g. http://127.0.0.1:11434" }),
    ).transform((value) => value ?? "http://127.0.0.1:11434"),
    /**
     * Who calls the model, for every model call (turns, regenerate, titles, summaries, memory
     * extraction): "gateway" (default; step.ai.infer, the Inngest server) or "stream" (this process,
     * streaming; a turn's text is logged as it arrives).
     */
    INFERENCE: optionalSetting(
      z.enum(["gateway", "stream"], {
        error:
          'INFERENCE must be "gateway" (the Inngest server calls the model) or "stream" (this process calls it, streaming)',
      }),
    ).transform((value) => value ?? "gateway"),
    /** What a message sent while a turn of its thread runs does, unless its request says (src/history/busy-policy.ts). */
    BUSY_POLICY: optionalSetting(
      z.enum(busyPolicy.options, {
        error: 'BUSY_POLICY must be "enqueue", "reject", "interrupt" or "rollback"',
      }),
    ).transform((value) => value ?? DEFAULT_BUSY_POLICY),
    /**
     * Model prices for the usage ledger, USD per million tokens: a JSON object, or the path of a JSON
     * file holding one, `{"<model>": {"input": 0.15, "output": 0.6, "cachedInput": 0.075}}`. Its
     * models are added to DEFAULT_PRICES (replacing an entry of the same name).
     */
    MODEL_PRICES: optionalSetting(z.string().trim()).transform((value, ctx): PriceTable => {
      if (value === undefined) return DEFAULT_PRICES;
      let text = value;
      try {
        if (!value.startsWith("{")) text = readFileSync(value, "utf8");
        const parsed = priceTable.safeParse(JSON.parse(text));
        if (parsed.success) return { ...DEFAULT_PRICES, ...parsed.data };
        ctx.addIssue({
          code: "custom",
          message: `MODEL_PRICES must map model names to {input, output, cachedInput?} in USD per million tokens: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
        });
      } catch (error) {
        ctx.addIssue({
          code: "custom",
          message: `MODEL_PRICES must be a JSON object or the path of a JSON file: ${(error as Error).message}`,
        });
      }
      return z.NEVER;
    }),
    /** Every user's default usage limits per UTC day and month (a user's own budget, npm run budget, replaces them). */
    BUDGET_DAILY_TOKENS: optionalSetting(wholeNumber("BUDGET_DAILY_TOKENS", { unit: "tokens", min: 0, max: 1e15 })),
    BUDGET_MONTHLY_TOKENS: optionalSetting(wholeNumber("BUDGET_MONTHLY_TOKENS", { unit: "tokens", min: 0, max: 1e15 })),
    BUDGET_DAILY_COST_USD: optionalSetting(
      z.coerce.number({ error: "BUDGET_DAILY_COST_USD must be a number of US dollars" }).nonnegative(),
    ),
    BUDGET_MONTHLY_COST_USD: optionalSetting(
      z.coerce.number({ error: "BUDGET_MONTHLY_COST_USD must be a number of US dollars" }).nonnegative(),
    ),
    /** Operator overrides of the history policy: they beat what a request asks for. */
    HISTORY_POLICY: optionalSetting(historyPolicyName),
    HISTORY_LENGTH: optionalSetting(z.coerce.number().pipe(historyLength)),
    HISTORY_MAX_TOKENS: optionalSetting(z.coerce.number().pipe(historyMaxTokens)),
    /** Operator maximums that no request or setting exceeds (defaults: DEFAULT_HISTORY_MAXIMUMS). */
    HISTORY_MAX_LENGTH: optionalSetting(z.coerce.number().pipe(historyLength.min(1))),
    HISTORY_MAX_TOKENS_CAP: optionalSetting(z.coerce.number().pipe(historyMaxTokens)),
    HISTORY_MAX_BYTES: optionalSetting(z.coerce.number().pipe(historyMaxBytes)),
    /** Threads inactive for longer than this many days are deleted (hourly); unset: kept forever. */
    RETENTION_DAYS: optionalSetting(
      wholeNumber("RETENTION_DAYS", {
        unit: "days",
        min: 1,
        max: 36_500,
        belowMin: " (unset it to keep threads forever)",
      }),
    ),
    /**
     * How long a deleted thread's id stays refused (its tombstone), in days; the hourly thread
     * retention function prunes older tombstones, and the id may then be used again.
     */
    THREAD_TOMBSTONE_DAYS: wholeNumber("THREAD_TOMBSTONE_DAYS", { unit: "days", min: 1, max: 36_500 }).default(
      DEFAULT_TOMBSTONE_DAYS,
    ),
    /** Open live streams (event streams and useChat's UI streams) one user may hold on one process; beyond it, 429. */
    STREAM_MAX_PER_USER: wholeNumber("STREAM_MAX_PER_USER", { min: 1, max: 10_000 }).default(
      DEFAULT_STREAM_LIMITS.perUser,
    ),
    /** Open live streams one process holds in all; beyond it, 429. */
    STREAM_MAX_PER_PROCESS: wholeNumber("STREAM_MAX_PER_PROCESS", { min: 1, max: 100_000 }).default(
      DEFAULT_STREAM_LIMITS.perProcess,
    ),
    /**
     * 1: turns also log AgentKit's chunks (run.started, part.*, text.delta, tool_call.*), one step and
     * one statement each; unset: only each turn's outcome events, written with the outcome itself.
     */
    EVENT_LOG_CHUNKS: optionalSetting(flag),
    /** Thread event log rows older than this many hours are pruned (every 10 minutes); a client resumes within it. */
    EVENT_LOG_RETENTION_HOURS: wholeNumber("EVENT_LOG_RETENTION_HOURS", { unit: "hours", min: 1, max: 8_760 }).default(
      DEFAULT_EVENT_RETENTION_HOURS,
    ),
    /**
     * "inngest": every event of the log is also published to Inngest realtime (the thread owner's
     * channel, topic agent_stream, for @inngest/use-agent) and POST /api/realtime/token issues tokens.
     * Needs the Inngest server (dev server or Inngest Cloud); set it on one instance of a deployment.
     */
    REALTIME: optionalSetting(
      z.enum(["inngest"], { error: 'REALTIME accepts only "inngest" (unset: no realtime publishing)' }),
    ),
    /** Which agents answer a turn: "assistant" (default) or "pair" (the assistant, then the reviewer). */
    NETWORK: networkName.default("assistant"),
    /** Agents that get the user-memory component (comma-separated names; default none: nothing is remembered). */
    MEMORY_AGENTS: nameList,
    /**
     * Tools whose every call needs the user's approval (comma-separated tool names), beside those
     * declared so in code (docs/approvals.md).
     */
    APPROVAL_TOOLS: nameList,
    /** Minutes a tool call waits for its approval before it expires (the tool does not run). */
    APPROVAL_EXPIRY_MINUTES: optionalSetting(
      z.coerce
        .number()
        .int()
        .min(1, "APPROVAL_EXPIRY_MINUTES must be at least 1")
        .max(7 * 24 * 60, "APPROVAL_EXPIRY_MINUTES must be at most 10080 (7 days)"),
    ),
    /** 0: the assistant has no demo tool (roll_dice, which needs approval); default 1. */
    DEMO_TOOL: optionalSetting(flag),
    /** 1: propose memories from each completed chat turn (its own function, after the turn). */
    MEMORY_EXTRACTION: optionalSetting(flag),
    /** Tokens the user's memories may add to one model request. */
    MEMORY_CONTEXT_TOKENS: optionalSetting(
      z.coerce
        .number()
        .int()
        .min(50, "MEMORY_CONTEXT_TOKENS must be at least 50")
        .max(8_000, "MEMORY_CONTEXT_TOKENS must be at most 8000"),
    ),
  })
  .superRefine((env, ctx) => {
    const agents = Object.keys(NETWORK_AGENTS[env.NETWORK]);
    for (const name of env.MEMORY_AGENTS.filter((agent) => !agents.includes(agent))) {
      ctx.addIssue({
        code: "custom",
        path: ["MEMORY_AGENTS"],
        message: `${name} is not an agent of the ${env.NETWORK} network (its agents: ${agents.join(", ")})`,
      });
    }
    // The operator's own settings must respect the operator's maximums: a contradiction is a start-up error.
    const capped = [
      [
        "HISTORY_LENGTH",
        env.HISTORY_LENGTH,
        "HISTORY_MAX_LENGTH",
        env.HISTORY_MAX_LENGTH ?? DEFAULT_HISTORY_MAXIMUMS.length,
      ],
      [
        "HISTORY_MAX_TOKENS",
        env.HISTORY_MAX_TOKENS,
        "HISTORY_MAX_TOKENS_CAP",
        env.HISTORY_MAX_TOKENS_CAP ?? DEFAULT_HISTORY_MAXIMUMS.maxTokens,
      ],
    ] as const;
    for (const [setting, value, capName, cap] of capped) {
      if (value !== undefined && value > cap)
        ctx.addIssue({
          code: "custom",
          path: [setting],
          message: `${value} is above ${capName} (${cap}): lower it or raise ${capName}`,
        });
    }
  });
export type Environment = z.infer<typeof environment>;

/** NODE_ENV=production: the deployment faces users, and start-up refuses anything unsafe. */
export const isProduction = (env: Environment) => env.NODE_ENV === "production";

export function readEnvironment(env: NodeJS.ProcessEnv = process.env): Environment {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ");
    throw new Error(`Invalid environment: ${problems}`);
  }
  return parsed.data;
}

/** The history settings and maximums the operator fixed in the environment. */
export function historyEnvironment(env: Environment): HistoryEnvironment {
  const maximums: Partial<HistoryMaximums> = {
    ...(env.HISTORY_MAX_LENGTH !== undefined ? { length: env.HISTORY_MAX_LENGTH } : {}),
    ...(env.HISTORY_MAX_TOKENS_CAP !== undefined ? { maxTokens: env.HISTORY_MAX_TOKENS_CAP } : {}),
    ...(env.HISTORY_MAX_BYTES !== undefined ? { maxBytes: env.HISTORY_MAX_BYTES } : {}),
  };
  return {
    ...(env.HISTORY_POLICY !== undefined ? { policy: env.HISTORY_POLICY } : {}),
    ...(env.HISTORY_LENGTH !== undefined ? { length: env.HISTORY_LENGTH } : {}),
    ...(env.HISTORY_MAX_TOKENS !== undefined ? { maxTokens: env.HISTORY_MAX_TOKENS } : {}),
    ...(Object.keys(maximums).length > 0 ? { maximums } : {}),
  };
}

/** Every user's default usage limits, as the environment configures them (none: unlimited). */
export function budgetDefaults(env: Environment): BudgetLimits {
  return {
    dailyTokens: env.BUDGET_DAILY_TOKENS,
    monthlyTokens: env.BUDGET_MONTHLY_TOKENS,
    dailyCostUsd: env.BUDGET_DAILY_COST_USD,
    monthlyCostUsd: env.BUDGET_MONTHLY_COST_USD,
  };
}

/** The network and each agent's memory components, as the environment configures them. */
export function agentsConfig(env: Environment): AgentsConfig {
  return {
    network: env.NETWORK,
    memory: {
      agents: Object.fromEntries(env.MEMORY_AGENTS.map((agent) => [agent, ["user-memory" as const]])),
      contextTokens: env.MEMORY_CONTEXT_TOKENS ?? DEFAULT_MEMORY_CONTEXT_TOKENS,
      extract: env.MEMORY_EXTRACTION ?? false,
    },
    approvals: {
      tools: env.APPROVAL_TOOLS,
      expiryMinutes: env.APPROVAL_EXPIRY_MINUTES ?? DEFAULT_APPROVAL_EXPIRY_MINUTES,
      demoTool: env.DEMO_TOOL ?? true,
    },
  };
}

/** The ways a request may prove its user, as the environment configures them. */
export function authSettings(env: Environment): AuthSettings {
  const key =
    env.AUTH_JWKS_URL !== undefined
      ? { jwksUrl: env.AUTH_JWKS_URL }
      : env.AUTH_JWT_SECRET !== undefined
        ? { secret: env.AUTH_JWT_SECRET }
        : undefined;
  return {
    dev: env.AUTH === "dev",
    ...(env.AUTH_FAILURES_PER_MINUTE > 0 && {
      failureLimit: {
        perMinute: env.AUTH_FAILURES_PER_MINUTE,
        ...(env.AUTH_CLIENT_ADDRESS_HEADER !== undefined && { addressHeader: env.AUTH_CLIENT_ADDRESS_HEADER }),
      },
    }),
    ...(key && {
      jwt: {
        key,
        issuer: env.AUTH_JWT_ISSUER,
        audience: env.AUTH_JWT_AUDIENCE,
        clockSkewSeconds: env.AUTH_JWT_CLOCK_SKEW ?? 30,
        userClaim: env.AUTH_JWT_USER_CLAIM ?? "sub",
        ...(env.AUTH_JWT_MAX_AGE !== undefined && { maxAgeSeconds: env.AUTH_JWT_MAX_AGE }),
      },
    }),
  };
}
