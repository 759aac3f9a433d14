import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import type pg from "pg";
import { logger } from "../platform/logger.js";
import { looksLikeApiKey, verifyApiKey } from "./api-keys.js";
import { clientAddress, failureLimiter } from "./failure-limit.js";
import { verifiedUserId, type AuthEnv, type Identity } from "./identity.js";
import { jwtVerifier, TokenRefused } from "./jwt.js";
import { DEV_USER_HEADER, type AuthSettings } from "./settings.js";

/** Why a request has no identity: nothing was sent, or what was sent is refused. */
type Refusal = { missing: true } | { missing: false; reason: string };

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Sets the verified caller (`c.get("identity")`, read through `callerId`) or answers 401 saying
 * what to send. A bearer token starting with tl_ is an API key, any other a JWT; under AUTH=dev a
 * request without a bearer token may name its user in the X-Threadline-User header.
 */
export function authenticate(settings: AuthSettings, db: pg.Pool): MiddlewareHandler<AuthEnv> {
  const verifyJwt = settings.jwt && jwtVerifier(settings.jwt);
  if (settings.dev) {
    logger.warn(
      `AUTH=dev: every request may act as any user by naming it in the ${DEV_USER_HEADER} header. Local development only; production mode refuses it.`,
    );
  }

  async function identify(c: Context): Promise<Identity | Refusal> {
    const authorization = c.req.header("authorization");
    if (authorization === undefined) {
      return settings.dev ? devUser(c) : { missing: true };
    }
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined) return { missing: false, reason: "the Authorization header must read: Bearer <token>" };
    if (looksLikeApiKey(token)) {
      const userId = await verifyApiKey(db, token);
      return userId === undefined
        ? { missing: false, reason: "the API key is unknown or revoked" }
        : { userId, method: "api-key" };
    }
    if (!verifyJwt)
      return { missing: false, reason: "this server accepts only Threadline API keys (tl_...) as bearer tokens" };
    try {
      return asIdentity(await verifyJwt(token), "jwt", `the token's ${settings.jwt!.userClaim} claim`);
    } catch (error) {
      if (error instanceof TokenRefused) return { missing: false, reason: error.message };
      throw new KeysUnavailable(error);
    }
  }

  const accepted = [
    "Authorization: Bearer <API key>",
    ...(verifyJwt ? ["Authorization: Bearer <JWT from your identity provider>"] : []),
    ...(settings.dev ? [`${DEV_USER_HEADER}: <user id> (AUTH=dev)`] : []),
  ].join(" or ");

  const limiter = settings.failureLimit && failureLimiter(settings.failureLimit);

  return async (c, next) => {
    // An address that has failed too often is answered before its credentials cost any work.
    const address = settings.failureLimit && clientAddress(c, settings.failureLimit);
    const wait = address !== undefined ? limiter?.retryAfter(address) : undefined;
    if (wait !== undefined) {
      c.header("Retry-After", String(wait));
      return c.json(
        {
          error: `Too many failed authentications from this address: try again in ${wait} s.`,
          code: "too_many_failures",
        },
        429,
      );
    }
    let identity: Identity | Refusal;
    try {
      identity = await identify(c);
    } catch (error) {
      if (!(error instanceof KeysUnavailable)) throw error;
      logger.error({ err: error.cause }, "the JWT signing keys (AUTH_JWKS_URL) could not be fetched");
      return c.json(
        {
          error:
            "The token could not be checked now: the identity provider's signing keys are unreachable. Send it again shortly.",
          code: "auth_unavailable",
        },
        503,
      );
    }
    if ("userId" in identity) {
      c.set("identity", identity);
      return next();
    }
    // Refused credentials are what guessing looks like; a request that sends none costs nothing.
    if (address !== undefined && !identity.missing) limiter?.failed(address);
    // A header value is ASCII: the reason's other characters would make the answer a 500.
    const challenge = identity.missing
      ? 'Bearer realm="threadline"'
      : `Bearer realm="threadline", error="invalid_token", error_description="${identity.reason.replaceAll('"', "'").replace(/[^\x20-\x7e]/g, "?")}"`;
    c.header("WWW-Authenticate", challenge);
    const error = identity.missing
      ? `Authentication required: send ${accepted}.`
      : `Authentication failed: ${identity.reason}. Send ${accepted}.`;
    return c.json({ error, code: "unauthenticated" }, 401);
  };
}

/** The identity provider's keys could not be fetched: no verdict on the token, so not a 401. */
class KeysUnavailable extends Error {
  constructor(cause: unknown) {
    super("JWT signing keys unavailable", { cause });
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A header value's bytes (one character each) read as UTF-8, or undefined when they are not UTF-8. */
function asUtf8(value: string): string | undefined {
  try {
    return utf8.decode(Buffer.from(value, "latin1"));
  } catch {
    return undefined;
  }
}

/**
 * The user AUTH=dev's header names, as the client wrote it. Header values arrive one character per
 * byte (Latin-1, as Node and fetch's Headers read them), so bytes that are UTF-8 (curl sends what
 * was typed) are read again as UTF-8: "José" would otherwise be another user. Other bytes are the
 * characters a Latin-1 writer sent (fetch writes "José" so), and are kept. A header sent twice is
 * refused: Node joins the copies into "a, b", a user nobody named. The copies are counted in the
 * raw headers of a request served by @hono/node-server (an in-process request has only the joined value).
 */
function devUser(c: Context): Identity | Refusal {
  const raw = (c.env as Partial<HttpBindings> | undefined)?.incoming?.rawHeaders ?? [];
  const name = DEV_USER_HEADER.toLowerCase();
  const copies = raw.filter((entry, i) => i % 2 === 0 && entry.toLowerCase() === name).length;
  if (copies > 1)
    return { missing: false, reason: `the ${DEV_USER_HEADER} header was sent ${copies} times: send it once` };
  const value = c.req.header(DEV_USER_HEADER);
  if (value === undefined) return { missing: true };
  return asIdentity(asUtf8(value) ?? value, "dev", `the ${DEV_USER_HEADER} header`);
}

function asIdentity(userId: unknown, method: Identity["method"], source: string): Identity | Refusal {
  if (typeof userId !== "string") return { missing: false, reason: `${source} is missing or not a string` };
  const checked = verifiedUserId.safeParse(userId);
  return checked.success
    ? { userId, method }
    : { missing: false, reason: `${source} ${checked.error.issues[0]!.message}` };
}
