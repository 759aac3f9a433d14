import { Inngest, type InngestFunction } from "inngest";
import { serve } from "inngest/hono";
import { inngest } from "../inngest.config.js";
import type { Environment } from "./config.js";
import { logger } from "./logger.js";

/**
 * How /api/inngest is served: to the local dev server (no signatures, chosen with INNGEST_DEV) or
 * to Inngest Cloud / self-hosted Inngest, where every request must carry a valid signature.
 */
export type InngestServing = { mode: "dev" } | { mode: "cloud"; signingKey: string; signingKeyFallback?: string };

/** INNGEST_DEV=1 (or the dev server's URL) chooses the dev server; 0, false or unset do not. */
export const choosesDevServer = (env: Environment) => env.INNGEST_DEV !== undefined && !["0", "false"].includes(env.INNGEST_DEV);

/** The serving mode the environment chose; src/production.ts refuses to start without a choice. */
export function inngestServing(env: Environment): InngestServing {
  if (choosesDevServer(env)) return { mode: "dev" };
  if (env.INNGEST_SIGNING_KEY === undefined) throw new Error("INNGEST_SIGNING_KEY is not set and INNGEST_DEV does not choose the dev server.");
  return { mode: "cloud", signingKey: env.INNGEST_SIGNING_KEY, ...(env.INNGEST_SIGNING_KEY_FALLBACK && { signingKeyFallback: env.INNGEST_SIGNING_KEY_FALLBACK }) };
}

/**
 * The client the process sends events and serves functions with, built at start-up from the
 * configuration. The SDK reads the environment when a client is constructed, so a client built
 * while modules load (inngest.config.ts) would keep whatever the environment said then: dev or
 * cloud mode, event key, base URL. This one is built at the point of use, with the mode explicit,
 * so nothing depends on the order in which modules are imported or the environment is set.
 */
export function inngestClient(serving: InngestServing) {
  return new Inngest({
    id: inngest.id,
    logger,
    internalLogger: logger,
    isDev: serving.mode === "dev",
    ...(serving.mode === "cloud" && { signingKey: serving.signingKey, signingKeyFallback: serving.signingKeyFallback }),
  });
}

/** The serve handler, on a client of its own (inngestClient): signatures are checked unless serving the dev server. */
export function inngestHandler(functions: InngestFunction.Any[], serving: InngestServing) {
  return serve({ client: inngestClient(serving), functions });
}
