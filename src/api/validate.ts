import type { ValidationTargets } from "hono";
import { validator } from "hono-openapi";
import { z } from "zod";
import { badRequest } from "./errors.js";

/**
 * Validates one part of a request; a failure is a 400 naming each bad field. The schema also
 * documents that part of the request in /openapi.json (hono-openapi reads it off the middleware).
 */
export const validate = <Target extends keyof ValidationTargets, Schema extends z.ZodType>(
  target: Target,
  schema: Schema,
) =>
  validator(target, schema, (result, c) => {
    if (!result.success) return badRequest(c, { issues: result.error });
  });

/** A page size query parameter: a whole number from 1 to `max`, `fallback` when absent. */
export const pageLimit = (fallback: number, max: number) =>
  z
    .string({ error: "limit must be a whole number" })
    .regex(/^\d+$/, "limit must be a whole number")
    .transform(Number)
    .pipe(z.number().min(1, "limit must be at least 1").max(max, `limit must be at most ${max}`))
    .default(fallback);

/**
 * A cursor query parameter: the position `decode` reads from it, `message` when it reads none.
 * `text` is the string schema before decoding (by default refusing a non-string with `message` too).
 */
export const cursorParameter = <Position>(
  decode: (cursor: string) => Position | undefined,
  message: string,
  text: z.ZodString = z.string({ error: message }),
) => text.transform((value, ctx) => decode(value) ?? (ctx.addIssue({ code: "custom", message }), z.NEVER));

/**
 * Whether a time lies in the UTC years 1 to 9999: the times PostgreSQL stores (it has no year 0)
 * and ISO 8601 writes with four digits (toISOString writes others as -000001 or +010000).
 */
export const withinYears = (date: Date) => {
  const year = date.getUTCFullYear();
  return year >= 1 && year <= 9999;
};
