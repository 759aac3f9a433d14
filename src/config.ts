import { z } from "zod";

const optionalText = z.string().trim().min(1).optional().catch(undefined);

/** The environment Threadline reads, validated once at the edge. Empty values count as unset. */
export const environment = z.object({
  DATABASE_URL: optionalText,
  PORT: z.coerce.number().int().positive().default(3000),
  DATA_DIR: z.string().default(".data"),
  EMBEDDED_POSTGRES_PORT: z.coerce.number().int().positive().default(54329),
  OPENAI_API_KEY: optionalText,
  OPENAI_BASE_URL: optionalText,
  ANTHROPIC_API_KEY: optionalText,
  GEMINI_API_KEY: optionalText,
  MODEL: optionalText,
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
