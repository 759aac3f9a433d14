import { NonRetriableError } from "inngest";
import type { z } from "zod";
import { describeIssues } from "../../inngest.config.js";

/**
 * Validates event data before a function writes anything. Bad data is the sender's mistake:
 * retrying cannot fix it, so the run fails at once with a message naming each bad field.
 */
export function parseEventData<S extends z.ZodType>(schema: S, data: unknown): z.infer<S> {
  const parsed = schema.safeParse(data);
  if (!parsed.success) throw new NonRetriableError(`Invalid event data: ${describeIssues(parsed.error)}`);
  return parsed.data;
}
