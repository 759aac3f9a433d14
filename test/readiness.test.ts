import { randomUUID } from "node:crypto";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readEnvironment } from "../src/config.js";
import { engineAdvice, engineProbe, inngestEngine, type InngestEngine } from "../src/platform/inngest-engine.js";
import { createApp } from "../src/server.js";
import { headersFor, testAuth, listen, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/**
 * A stand-in Inngest server on loopback that can go down and come back on the same port: up, it
 * answers every request (200); down, it drops every connection as it arrives. `probes` counts
 * what reached it either way.
 */
let engineUp = true;
let probes = 0;
let front: NetServer;
const open = new Set<Socket>();
let engineUrl: string;
const http: Server = createHttpServer((_request, response) => {
  probes += 1;
  response.writeHead(200).end("{}");
});

/** Virtual time for the probe's interval. */
let now = 0;
const INTERVAL_MS = 10_000;

let app: Listening;

beforeAll(async () => {
  front = createNetServer((socket) => {
    if (engineUp) {
      open.add(socket.once("close", () => open.delete(socket)));
      return void http.emit("connection", socket);
    }
    probes += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  engineUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  const engine: InngestEngine = { kind: "self-hosted", eventUrl: engineUrl, apiUrl: engineUrl };
  const hono = createApp({
    db: bed.db.pool,
    functions: [],
    sendEvent: () => Promise.reject(new Error("fetch failed")),
    auth: testAuth,
    serving: { mode: "dev" },
    engine,
    engineProbe: engineProbe(engine, { intervalMs: INTERVAL_MS, now: () => now }),
  });
  app = await listen(hono.fetch);
});

afterAll(async () => {
  await app.close();
  for (const socket of open) socket.destroy();
  await new Promise<void>((resolve) => front.close(() => resolve()));
});

/** `count` readiness probes at once, as several load balancers (or an impatient one) would send them. */
const probeReadiness = async (count: number) => {
  const answers = await Promise.all(Array.from({ length: count }, () => fetch(`${app.url}/health/ready`)));
  return {
    statuses: [...new Set(answers.map((r) => r.status))],
    bodies: await Promise.all(answers.map((r) => r.json() as Promise<Record<string, unknown>>)),
  };
};

describe("readiness (GET /health/ready) sees the Inngest server; liveness (GET /health) does not", () => {
  it("503 while the engine is unreachable, 200 once it is back; at most one probe of the engine per interval, however many probes arrive", async () => {
    const ready = await probeReadiness(20);
    expect(ready.statuses).toEqual([200]);
    expect(ready.bodies[0]).toEqual({ status: "ready", database: "ok", inngest: "ok" });
    expect(probes).toBe(1);

    // The engine goes down: its open connections with it.
    engineUp = false;
    for (const socket of open) socket.destroy();
    // Within the interval the last answer stands: the engine is not asked again.
    expect((await probeReadiness(5)).statuses).toEqual([200]);
    expect(probes).toBe(1);

    now += INTERVAL_MS;
    const down = await probeReadiness(20);
    expect(down.statuses).toEqual([503]);
    expect(down.bodies[0]).toMatchObject({
      status: "unavailable",
      database: "ok",
      inngest: "unreachable",
      requestId: expect.any(String),
    });
    expect(probes).toBe(2);
    // Liveness is the process and its database: a restart would not bring the engine back.
    expect((await fetch(`${app.url}/health`)).status).toBe(200);

    engineUp = true;
    expect((await probeReadiness(5)).statuses).toEqual([503]);
    expect(probes).toBe(2);
    now += INTERVAL_MS;
    expect((await probeReadiness(20)).statuses).toEqual([200]);
    expect(probes).toBe(3);
  });
});

describe("the 503 for an unsent chat event names the configured engine", () => {
  const adviceFor = (env: Record<string, string>) => engineAdvice(inngestEngine(readEnvironment(env)));

  it("the dev server by its URL (not the event key), a self-hosted server by its base URL, Inngest Cloud by name", () => {
    expect(adviceFor({ INNGEST_DEV: "1" })).toBe(
      "the Inngest dev server is running at http://localhost:8288 (npm run dev starts it; or npx inngest-cli@latest dev)",
    );
    expect(adviceFor({ INNGEST_DEV: "http://inngest:8288" })).toMatch(
      /^the Inngest dev server is running at http:\/\/inngest:8288 /,
    );
    expect(adviceFor({ INNGEST_DEV: "1" })).not.toContain("INNGEST_EVENT_KEY");
    expect(adviceFor({ INNGEST_SIGNING_KEY: "signkey-prod-00", INNGEST_BASE_URL: "http://inngest:8288/" })).toBe(
      "the self-hosted Inngest server at http://inngest:8288 is up and reachable from the app, and INNGEST_EVENT_KEY is one of its event keys (inngest start --event-key)",
    );
    expect(adviceFor({ INNGEST_SIGNING_KEY: "signkey-prod-00" })).toMatch(
      /^Inngest Cloud is reachable from the app and INNGEST_EVENT_KEY is an event key of this environment/,
    );
  });

  it("over HTTP: the answer names the self-hosted server the app is configured for", async () => {
    const response = await fetch(`${app.url}/api/chat`, {
      method: "POST",
      headers: { ...(await headersFor("ready-user")), "content-type": "application/json" },
      body: JSON.stringify({ messageId: randomUUID(), content: "hi" }),
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: string }).error).toContain(
      `the self-hosted Inngest server at ${engineUrl} is up and reachable from the app`,
    );
  });
});
