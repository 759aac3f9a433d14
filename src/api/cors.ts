import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";

/**
 * Cross-origin access for browser apps on the listed origins (CORS_ORIGINS; none: same origin only).
 * It runs before authentication, since a browser sends its preflight without credentials, and every
 * answer to a listed origin names it, errors and streams included, so the app can read them.
 * Credentials are bearer tokens, not cookies: no Allow-Credentials.
 */
export function crossOrigin(origins: readonly string[] | undefined): MiddlewareHandler {
  if (!origins?.length) return (_c, next) => next();
  return cors({
    origin: [...origins],
    allowMethods: ["GET", "POST", "PUT", "PATCH", "DELETE"],
    allowHeaders: ["Authorization", "Content-Type", "X-Threadline-User", "X-Request-Id", "Last-Event-ID"],
    exposeHeaders: ["X-Request-Id", "Retry-After", "x-vercel-ai-ui-message-stream"],
    maxAge: 600,
  });
}
