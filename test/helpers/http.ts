import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import type pg from "pg";
import { SignJWT } from "jose";
import type { InngestFunction } from "inngest";
import type { SendEvent } from "../../src/api/deps.js";
import type { AuthEnv } from "../../src/auth/identity.js";
import type { AuthSettings } from "../../src/auth/settings.js";
import type { InngestServing } from "../../src/platform/inngest-serve.js";
import { createApp } from "../../src/server.js";
import type { RealtimePublisher } from "../../src/stream/realtime-publisher.js";
import type { EventNotifier } from "../../src/stream/notifier.js";
import type { StreamLimits } from "../../src/stream/stream-slots.js";
import type { SentEvent } from "./engine.js";
import type { EngineStandIn } from "./engine-stand-in.js";
import type { EngineProbe } from "../../src/platform/inngest-engine.js";

/** An app listening on loopback: its port, its base URL, and `close`. */
export type Listening = { server: Server; port: number; url: string; close: () => Promise<void> };

/**
 * Serves `fetch` (an app's, as @hono/node-server takes it) on a free loopback port, once it
 * listens. `close` drops every connection first (an open event stream, a request a test left
 * half sent), so it never waits on a client.
 */
export async function listen(fetch: Parameters<typeof serve>[0]["fetch"]): Promise<Listening> {
  const server = serve({ fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once("listening", () => resolve())));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * `routes` mounted at `path` alone, behind a stand-in for the authentication middleware: every
 * request is `userId`'s.
 */
export function routesAs(userId: string, path: string, routes: Hono<AuthEnv>) {
  return new Hono<AuthEnv>()
    .use(async (c, next) => {
      c.set("identity", { userId } as AuthEnv["Variables"]["identity"]);
      await next();
    })
    .route(path, routes);
}

/** The shared secret, issuer and audience the test app verifies JWTs with (HS256). */
export const TEST_JWT = {
  secret: "threadline-test-secret-of-at-least-32-characters",
  issuer: "https://issuer.test",
  audience: "threadline-test",
};

/** Authentication as a deployment with a shared-secret JWT set-up has it (API keys included). */
export const testAuth: AuthSettings = {
  dev: false,
  jwt: {
    key: { secret: TEST_JWT.secret },
    issuer: TEST_JWT.issuer,
    audience: TEST_JWT.audience,
    clockSkewSeconds: 0,
    userClaim: "sub",
  },
};

export type TokenOptions = {
  expiresAt?: number;
  issuedAt?: number;
  audience?: string;
  issuer?: string;
  secret?: string;
};

/** A signed HS256 JWT for a user (valid for an hour unless told otherwise). */
export async function tokenFor(userId: string, options: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(userId)
    .setIssuer(options.issuer ?? TEST_JWT.issuer)
    .setAudience(options.audience ?? TEST_JWT.audience)
    .setIssuedAt(options.issuedAt ?? now)
    .setExpirationTime(options.expiresAt ?? now + 3600)
    .sign(new TextEncoder().encode(options.secret ?? TEST_JWT.secret));
}

/** Request headers of a JSON request by a user: a bearer JWT and the JSON content type. */
export async function headersFor(userId: string): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await tokenFor(userId)}`, "content-type": "application/json" };
}

export type { SentEvent };

/**
 * The app as a deployment builds it, with JWT auth (testAuth) and, unless told otherwise, no
 * functions served to the dev server and a sendEvent that records each event in `sent` and
 * answers evt-<n>.
 */
export function createTestApp(
  db: pg.Pool,
  overrides: {
    sendEvent?: SendEvent;
    functions?: InngestFunction.Any[];
    auth?: AuthSettings;
    serving?: InngestServing;
    events?: EventNotifier;
    realtime?: RealtimePublisher;
    engineProbe?: EngineProbe;
    streams?: StreamLimits;
    corsOrigins?: readonly string[];
  } = {},
) {
  const sent: SentEvent[] = [];
  const recordEvent: SendEvent = async (event) => {
    sent.push(event);
    return { ids: [`evt-${sent.length}`] };
  };
  const app = createApp({
    db,
    functions: overrides.functions ?? [],
    sendEvent: overrides.sendEvent ?? recordEvent,
    auth: overrides.auth ?? testAuth,
    serving: overrides.serving ?? { mode: "dev" },
    ...(overrides.events ? { events: overrides.events } : {}),
    ...(overrides.realtime ? { realtime: overrides.realtime } : {}),
    ...(overrides.engineProbe ? { engineProbe: overrides.engineProbe } : {}),
    ...(overrides.streams ? { streams: overrides.streams } : {}),
    ...(overrides.corsOrigins ? { corsOrigins: overrides.corsOrigins } : {}),
  });
  return { app, sent };
}

/**
 * The app as deployed, serving `functions` over HTTP on a loopback port and registered with the
 * engine stand-in, which runs them over the SDK's serve protocol and receives the app's events.
 */
export async function serveToStandIn(
  db: pg.Pool,
  engine: EngineStandIn,
  functions: InngestFunction.Any[],
  options: { events?: EventNotifier } = {},
) {
  const { app } = createTestApp(db, {
    functions,
    sendEvent: async (event) => ({ ids: [(await engine.send(event)).id] }),
    ...options,
  });
  const { url, close } = await listen(app.fetch);
  await engine.registerApp(`${url}/api/inngest`);
  return { url, close };
}

type App = Pick<ReturnType<typeof createApp>, "request">;

/** Requests made by one signed-in user: `get(path)`, `post(path, body)` (an object is sent as JSON, a string as is), bodiless `put(path)` and `delete(path)`. */
export function asUser(app: App, userId: string) {
  const headers = headersFor(userId);
  return {
    get: async (path: string) => app.request(path, { headers: await headers }),
    post: async (path: string, body: unknown) =>
      app.request(path, {
        method: "POST",
        headers: await headers,
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    put: async (path: string) => app.request(path, { method: "PUT", headers: await headers }),
    delete: async (path: string) => app.request(path, { method: "DELETE", headers: await headers }),
  };
}
