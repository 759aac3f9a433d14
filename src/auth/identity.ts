import type { Context } from "hono";
import { z } from "zod";

/** Who is calling, as verified by the authentication middleware, and how it was proven. */
export type Identity = { userId: string; method: "jwt" | "api-key" | "dev" };

/** Hono's typing for routes behind the authentication middleware: `identity` is always set. */
export type AuthEnv = { Variables: { identity: Identity } };

/** The verified caller's user id: the only user id a route may read or write for. */
export const callerId = (c: Context<AuthEnv>): string => c.get("identity").userId;

/**
 * A user id taken from a credential must also be storable and fit the events' userId field: no
 * control characters (PostgreSQL refuses NUL), no lone surrogates, at most 200 characters.
 */
export const verifiedUserId = z
  .string()
  .min(1, "is empty")
  .max(200, "is longer than 200 characters")
  .refine((id) => !/[\p{Cc}\p{Cs}]/u.test(id), "holds a control character or a lone surrogate");

/**
 * The userId field a client may no longer send: refused by name, so a client written for the
 * old API learns why instead of silently acting as someone else.
 */
export const userIdNotAccepted = z
  .never({ error: "userId is not accepted: the user is the one your credentials identify (send no userId)" })
  .meta({ description: "Not accepted: the user is the one the credentials identify." })
  .optional();
