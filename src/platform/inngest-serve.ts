import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { Inngest, InngestCommHandler, type InngestFunction, type ServeHandlerOptions } from "inngest";
import { inngest } from "../../inngest.config.js";
import { type Environment, isProduction } from "../config.js";
import { boundBody } from "./body-bound.js";
import { keepAliveFetch } from "./keep-alive-fetch.js";
import { logger } from "./logger.js";

/** Where the app serves Inngest unless INNGEST_SERVE_PATH says otherwise (a proxy's prefix). */
export const DEFAULT_SERVE_PATH = "/api/inngest";

/**
 * Inngest's largest request to the app: a run's whole state (event data, every step's output) is
 * at most 32 MB (inngest.com/docs/usage-limits/inngest, "Function run state size"); 1 MiB more
 * covers the request's envelope (run context, step stack). A larger body is no Inngest request.
 */
export const INNGEST_MAX_REQUEST_BYTES = 33 * 1024 * 1024;

/** How long a refused request's connection keeps discarding its body after the answer. */
const LINGER_MS = 2_000;

/**
 * Answers a refused request and closes its connection without a TCP reset. The client may still be
 * writing a body nobody will read; Node closes such a socket with unread input, which sends a reset,
 * and a client busy writing then sees "connection reset" instead of the answer it was sent. So, as
 * nginx's lingering close does, the socket half-closes after the answer and discards what still
 * arrives for up to LINGER_MS (nothing is kept), then closes.
 */
function closeAfterAnswer(c: Context): void {
  c.header("Connection", "close");
  const socket = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket;
  if (!socket) return;
  // Node's server calls destroySoon once a `Connection: close` answer is written.
  socket.destroySoon = () => {
    socket.end();
    socket.resume();
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  };
}

/** The answer to a body larger than Inngest's largest request. */
function tooLarge(c: Context) {
  closeAfterAnswer(c);
  return c.json(
    {
      error: `Request body too large: Inngest's requests are at most ${INNGEST_MAX_REQUEST_BYTES} bytes.`,
      code: "too_large",
    },
    413,
  );
}

/** How far a signature's timestamp may be from now: the SDK's own window for expired signatures. */
const SIGNATURE_WINDOW_SECONDS = 5 * 60;

/**
 * How /api/inngest is served: to the local dev server (no signatures, chosen with INNGEST_DEV) or
 * to Inngest Cloud / self-hosted Inngest, where every request must carry a valid signature. The
 * public URL announced when the app syncs comes from configuration when given (always in
 * production), never from a request's Host header.
 */
export type InngestServing = (
  | { mode: "dev" }
  | { mode: "cloud"; signingKey: string; signingKeyFallback?: string; refuseUnsignedSync?: boolean }
) & {
  serveOrigin?: string;
  servePath?: string;
};

/** INNGEST_DEV=1 (or the dev server's URL) chooses the dev server; 0, false or unset do not. */
export const choosesDevServer = (env: Environment) =>
  env.INNGEST_DEV !== undefined && !["0", "false"].includes(env.INNGEST_DEV);

/** The serving mode the environment chose; src/platform/production.ts refuses to start without a choice. */
export function inngestServing(env: Environment): InngestServing {
  const url = {
    ...(env.INNGEST_SERVE_ORIGIN !== undefined && { serveOrigin: env.INNGEST_SERVE_ORIGIN }),
    servePath: env.INNGEST_SERVE_PATH ?? DEFAULT_SERVE_PATH,
  };
  if (choosesDevServer(env)) return { mode: "dev", ...url };
  if (env.INNGEST_SIGNING_KEY === undefined)
    throw new Error("INNGEST_SIGNING_KEY is not set and INNGEST_DEV does not choose the dev server.");
  return {
    mode: "cloud",
    signingKey: env.INNGEST_SIGNING_KEY,
    ...(env.INNGEST_SIGNING_KEY_FALLBACK && { signingKeyFallback: env.INNGEST_SIGNING_KEY_FALLBACK }),
    refuseUnsignedSync: isProduction(env),
    ...url,
  };
}

/**
 * Why a request's X-Inngest-Signature cannot be Inngest's, judged from the header alone (its form
 * and its timestamp); undefined when it may be. The HMAC itself covers the body, so the SDK
 * checks it after the (bounded) body is read.
 */
export function signatureHeaderRefusal(header: string | undefined, nowSeconds = Date.now() / 1000): string | undefined {
  if (header === undefined || header === "") return "the request is not signed (no X-Inngest-Signature header)";
  const params = new URLSearchParams(header);
  const timestamp = params.get("t") ?? "";
  if (!/^\d{1,12}$/.test(timestamp) || !/^[0-9a-f]{64}$/i.test(params.get("s") ?? ""))
    return "the X-Inngest-Signature header is malformed (expected t=<seconds>&s=<hex HMAC>)";
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_WINDOW_SECONDS)
    return "the X-Inngest-Signature header has expired";
  return undefined;
}

/** Every Inngest client of the process calls Inngest through one pool of keep-alive connections. */
const inngestFetch = keepAliveFetch();

/**
 * The client the process sends events and serves functions with, built at start-up from the
 * configuration. The SDK reads the environment when a client is constructed, so a client built
 * while modules load (inngest.config.ts) would keep whatever the environment said then: dev or
 * cloud mode, event key, base URL. This one is built at the point of use, with the mode explicit,
 * so nothing depends on the order in which modules are imported or the environment is set. Its
 * calls to Inngest (events, checkpoints, syncs) go through a keep-alive fetch (keep-alive-fetch.ts).
 */
export function inngestClient(serving: InngestServing) {
  return new Inngest({
    id: inngest.id,
    logger,
    internalLogger: logger,
    fetch: inngestFetch,
    isDev: serving.mode === "dev",
    ...(serving.mode === "cloud" && { signingKey: serving.signingKey, signingKeyFallback: serving.signingKeyFallback }),
  });
}

/**
 * The SDK's Hono adapter (inngest/hono) without its `env` action. On Node that action hands the
 * SDK the whole of process.env, which the SDK copies on every request beside its own copy of the
 * variables it reads (INNGEST_*, a platform's branch names), and again for each set of headers it
 * builds. Without it the SDK reads the same variables from process.env.
 */
function serveOnHono(options: ServeHandlerOptions) {
  return new InngestCommHandler({
    frameworkName: "hono",
    ...options,
    handler: (c: Context) => ({
      transformResponse: ({ headers, status, body }) => c.body(body, { headers, status: status as 200 }),
      // @hono/node-server's request URLs are absolute (the Host header's origin unless serveOrigin is given).
      url: () => new URL(c.req.url),
      queryString: (key: string) => c.req.query(key),
      headers: (key: string) => c.req.header(key),
      method: () => c.req.method,
      body: () => c.req.text(),
    }),
  }).createHandler() as (c: Context) => Promise<Response>;
}

/**
 * The serve handler, on a client of its own (inngestClient). The SDK reads a request's whole body
 * before it checks the signature (in dev mode, before anything), and takes the app's URL from the
 * Host header unless given one, and treats an unsigned PUT as a resync that calls Inngest's
 * register API with that URL. So a body is read only up to Inngest's largest request, in every
 * mode, and when signatures are required, a POST (and in production a PUT) without a plausible
 * signature header is refused before its body is read.
 */
export function inngestHandler(functions: InngestFunction.Any[], serving: InngestServing): MiddlewareHandler[] {
  const handler = serveOnHono({
    client: inngestClient(serving),
    functions,
    ...(serving.serveOrigin && { serveOrigin: serving.serveOrigin }),
    ...(serving.servePath && { servePath: serving.servePath }),
    // The gate below only sees that a signature is there; the SDK verifies it on a sync too (npm run sync signs).
    ...(serving.mode === "cloud" && serving.refuseUnsignedSync && { enableUnauthedSync: false }),
  });
  const serveRequest: MiddlewareHandler = (c) => handler(c);
  // Inngest's calls: bounded by its largest request, the connection closed after a refusal either way.
  const limit = boundBody(INNGEST_MAX_REQUEST_BYTES, { declared: tooLarge, streamed: tooLarge });
  if (serving.mode === "dev") return [limit, serveRequest];

  const mustBeSigned = new Set(serving.refuseUnsignedSync ? ["POST", "PUT"] : ["POST"]);
  const requireSignature: MiddlewareHandler = async (c, next) => {
    const refusal = mustBeSigned.has(c.req.method)
      ? signatureHeaderRefusal(c.req.header("x-inngest-signature"))
      : undefined;
    if (refusal === undefined) return next();
    // Nothing more of this request is wanted: the connection closes instead of draining its body.
    closeAfterAnswer(c);
    return c.json(
      {
        error: `Refused: ${refusal}. Only Inngest calls this endpoint; sync the app from Inngest (its signed in-band sync).`,
        code: "unsigned",
      },
      401,
    );
  };
  return [requireSignature, limit, serveRequest];
}
