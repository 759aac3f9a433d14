import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { InngestFunction } from "inngest";
import type pg from "pg";
import { vi } from "vitest";
import { startEngineStandIn, type EngineStandIn, type StandInOptions } from "./engine-stand-in.js";
import { createTestApp } from "./http.js";

export type LiveEngine = { engine: EngineStandIn; appUrl: string; close: () => Promise<void> };

/**
 * The app in this process, listening on loopback and registered with the engine stand-in, which
 * runs `functions` over the SDK's HTTP protocol. Events the app or a function sends go to the
 * stand-in (INNGEST_BASE_URL is stubbed for this file until close).
 */
export async function startLiveEngine(
  db: pg.Pool,
  functions: InngestFunction.Any[],
  options: StandInOptions = {},
): Promise<LiveEngine> {
  const engine = await startEngineStandIn(options);
  vi.stubEnv("INNGEST_BASE_URL", engine.url);
  const { app } = createTestApp(db, {
    functions,
    sendEvent: async (event) => ({ ids: [(await engine.send(event)).id] }),
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once("listening", () => resolve())));
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await engine.registerApp(`${appUrl}/api/inngest`);
  return {
    engine,
    appUrl,
    close: async () => {
      await engine.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      vi.unstubAllEnvs();
    },
  };
}
