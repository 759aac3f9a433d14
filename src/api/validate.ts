import type { ValidationTargets } from "hono";
import { validator } from "hono-openapi";
import type { z } from "zod";
import { badRequest } from "./errors.js";

/**
 * Validates one part of a request; a failure is a 400 naming each bad field. The schema also
 * documents that part of the request in /openapi.json (hono-openapi reads it off the middleware).
 */
export const validate = <Target extends keyof ValidationTargets, Schema extends z.ZodType>(target: Target, schema: Schema) =>
  validator(target, schema, (result, c) => {
    if (!result.success) return badRequest(c, { issues: result.error });
  });
