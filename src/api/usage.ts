import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { USAGE_GROUPS, usageReport } from "../history/usage.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { validate, withinYears } from "./validate.js";

/** A time: an ISO 8601 date-time (with an offset) or a date (its UTC midnight), in the UTC years 1 to 9999. */
const instant = (name: string) =>
  z
    .union([z.iso.datetime({ offset: true }), z.iso.date()], {
      error: `${name} must be an ISO 8601 date-time (2025-01-31T00:00:00Z) or a date (2025-01-31)`,
    })
    .transform((value) => new Date(value))
    .refine(withinYears, `${name} must be a time between 0001-01-01 and 9999-12-31 (UTC)`);

const usageQuery = z
  .object({
    from: instant("from")
      .optional()
      .meta({ description: "Start, inclusive (default: the start of the current UTC month)." }),
    to: instant("to").optional().meta({ description: "End, exclusive (default: the end of the current UTC day)." }),
    groupBy: z
      .enum(USAGE_GROUPS, { error: 'groupBy must be "day" (UTC), "thread" or "model"' })
      .default("day")
      .meta({ description: "One group per UTC day (key YYYY-MM-DD), per thread (key: its id) or per model." }),
  })
  .transform((query, ctx) => {
    const now = new Date();
    const from = query.from ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const to = query.to ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
    if (from >= to) {
      ctx.addIssue({ code: "custom", path: ["to"], message: "to must be after from" });
      return z.NEVER;
    }
    return { ...query, from, to };
  });

const sums = z.object({
  calls: z
    .number()
    .int()
    .meta({ description: "Model calls whose usage the provider reported (billed failed attempts too)." }),
  inputTokens: z.number().int().meta({ description: "Input tokens, cached ones included." }),
  outputTokens: z.number().int().meta({ description: "Output tokens, reasoning ones included." }),
  cachedTokens: z.number().int(),
  reasoningTokens: z.number().int(),
  totalTokens: z.number().int(),
  costUsd: z
    .number()
    .nullable()
    .meta({ description: "US dollars by the price table when each call was recorded; null when no call was priced." }),
});

const usageResponse = z.object({
  from: z.iso.datetime(),
  to: z.iso.datetime(),
  groupBy: z.enum(USAGE_GROUPS),
  groups: z.array(
    sums.extend({
      key: z.string().meta({ description: "The UTC day (YYYY-MM-DD), the thread id or the model." }),
      provider: z.string().optional().meta({ description: "groupBy=model: the model's provider." }),
    }),
  ),
  total: sums,
});

/** GET /api/usage: the caller's model usage and cost in a time range, grouped (deleted threads' usage included). */
export function usageRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>().get(
    "/",
    describeRoute({
      operationId: "getUsage",
      tags: ["Usage"],
      summary: "The caller's token usage and cost in a time range, per UTC day, thread or model",
      responses: {
        200: jsonResponse("The groups, oldest or in key order, and their total.", usageResponse),
        ...apiErrors(400),
      },
    }),
    validate("query", usageQuery),
    async (c) => {
      const { from, to, groupBy } = c.req.valid("query");
      const report = await usageReport(db, { userId: callerId(c), from, to, groupBy });
      return c.json({
        from: from.toISOString(),
        to: to.toISOString(),
        groupBy,
        ...report,
      } satisfies z.input<typeof usageResponse>);
    },
  );
}
