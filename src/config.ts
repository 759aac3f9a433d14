import { z } from "zod";
import { historyLength, historyMaxTokens, historyPolicyName, type HistoryEnvironment } from "./history/policy.js";

const optionalText = z.string().trim().min(1).optional().catch(undefined);
/** An optional setting: unset or empty means "not set"; anything else must be valid. */
const optionalSetting = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (typeof value === "string" && value.trim() === "" ? undefined : value), schema.optional());

/** The environment Threadline reads, validated once at the edge. Empty values count as unset. */
export const environment = z.object({
  DATABASE_URL: optionalText,
  PORT: z.coerce.number().int().positive().default(3000),
  DATA_DIR: z.string().default(".data"),
  EMBEDDED_POSTGRES_PORT: z.coerce.number().int().positive().default(54329),
  /** How long SIGTERM/SIGINT waits for requests in flight before cutting them off. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().nonnegative().default(10_000),
  OPENAI_API_KEY: optionalText,
  OPENAI_BASE_URL: optionalText,
  ANTHROPIC_API_KEY: optionalText,
  GEMINI_API_KEY: optionalText,
  MODEL: optionalText,
  /** Operator overrides of the history policy: they beat what a request asks for. */
  HISTORY_POLICY: optionalSetting(historyPolicyName),
  HISTORY_LENGTH: optionalSetting(z.coerce.number().pipe(historyLength)),
  HISTORY_MAX_TOKENS: optionalSetting(z.coerce.number().pipe(historyMaxTokens)),
});
export type Environment = z.infer<typeof environment>;

export function readEnvironment(env: NodeJS.ProcessEnv = process.env): Environment {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ");
    throw new Error(`Invalid environment: ${problems}`);
  }
  return parsed.data;
}

/** The history settings the operator fixed in the environment. */
export function historyEnvironment(env: Environment): HistoryEnvironment {
  return {
    ...(env.HISTORY_POLICY !== undefined ? { policy: env.HISTORY_POLICY } : {}),
    ...(env.HISTORY_LENGTH !== undefined ? { length: env.HISTORY_LENGTH } : {}),
    ...(env.HISTORY_MAX_TOKENS !== undefined ? { maxTokens: env.HISTORY_MAX_TOKENS } : {}),
  };
}
