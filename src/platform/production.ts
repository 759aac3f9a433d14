import { authSettings, type Environment, isProduction } from "../config.js";
import { choosesDevServer } from "./inngest-serve.js";

/** The SDK's signing key: signkey-<environment>-<hex secret>. */
const SDK_SIGNING_KEY = /^signkey-\w+-(?:[0-9a-f]{2})+$/i;

/**
 * What stops this process from starting, one line per setting, each saying what to set; empty
 * when it may start. In production: a signed Inngest endpoint, a real database and real auth. In
 * any mode: the Inngest dev server only when chosen on purpose.
 */
export function startupRefusals(env: Environment): string[] {
  const auth = authSettings(env);
  const refusals: string[] = [];
  if (env.AUTH_JWKS_URL !== undefined && env.AUTH_JWT_SECRET !== undefined) {
    refusals.push(
      "AUTH_JWKS_URL and AUTH_JWT_SECRET are both set: keep one (AUTH_JWKS_URL for an identity provider, AUTH_JWT_SECRET for HS256 tokens you sign).",
    );
  }
  if (!isProduction(env)) {
    if (env.INNGEST_SIGNING_KEY === undefined && !choosesDevServer(env)) {
      refusals.push(
        "INNGEST_SIGNING_KEY is not set: set it to serve Inngest Cloud or self-hosted Inngest, or set INNGEST_DEV=1 to serve the local Inngest dev server (npm run dev does).",
      );
    }
    return refusals;
  }
  if (env.INNGEST_SIGNING_KEY === undefined) {
    refusals.push(
      "INNGEST_SIGNING_KEY is not set: production only runs requests signed by Inngest (Inngest Cloud: Manage > Signing Key; self-hosted: signkey-prod-<the hex key given to inngest start --signing-key>).",
    );
  } else if (!SDK_SIGNING_KEY.test(env.INNGEST_SIGNING_KEY)) {
    // A self-hosted server takes the key as bare hex; the SDK only in its signkey-… form.
    refusals.push(
      "INNGEST_SIGNING_KEY is not in the SDK's format signkey-<env>-<hex>: for self-hosted Inngest, prefix the server's hex key (inngest start --signing-key) with signkey-prod-.",
    );
  }
  if (env.INNGEST_SERVE_ORIGIN === undefined) {
    refusals.push(
      "INNGEST_SERVE_ORIGIN is not set: production announces the URL Inngest calls from configuration, never from a request's Host; set it to this app's public origin (e.g. https://chat.example.com), and INNGEST_SERVE_PATH if the endpoint is not at /api/inngest.",
    );
  }
  if (env.INNGEST_EVENT_KEY === undefined) {
    refusals.push(
      "INNGEST_EVENT_KEY is not set: production needs it to send events to Inngest (Inngest Cloud: Manage > Event Keys; self-hosted: one of the keys given to inngest start --event-key).",
    );
  }
  if (choosesDevServer(env))
    refusals.push("INNGEST_DEV is set: production never serves the Inngest dev server; unset it.");
  if (env.DATABASE_URL === undefined)
    refusals.push(
      "DATABASE_URL is not set: production does not start an embedded database; set it to your PostgreSQL's URL.",
    );
  if (auth.dev)
    refusals.push(
      "AUTH=dev is set: it lets any caller act as any user; unset it and configure JWTs (AUTH_JWKS_URL) or API keys.",
    );
  if (!auth.jwt && env.AUTH_API_KEYS_ONLY !== true) {
    refusals.push(
      "No JWT verification is configured: set AUTH_JWKS_URL (or AUTH_JWT_SECRET), or set AUTH_API_KEYS_ONLY=1 if only servers holding API keys call this API.",
    );
  }
  if (auth.jwt && env.AUTH_JWT_ISSUER === undefined)
    refusals.push(
      "AUTH_JWT_ISSUER is not set: production accepts only tokens from your identity provider's issuer (its iss claim).",
    );
  if (auth.jwt && env.AUTH_JWT_AUDIENCE === undefined)
    refusals.push(
      "AUTH_JWT_AUDIENCE is not set: production accepts only tokens issued for this API (their aud claim).",
    );
  return refusals;
}
