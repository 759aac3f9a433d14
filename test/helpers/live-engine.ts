import type { InngestFunction } from "inngest";
import type pg from "pg";
import { vi } from "vitest";
import { startEngineStandIn, type EngineStandIn, type StandInOptions } from "./engine-stand-in.js";
import { serveToStandIn } from "./http.js";

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
  const app = await serveToStandIn(db, engine, functions);
  return {
    engine,
    appUrl: app.url,
    close: async () => {
      await engine.close();
      await app.close();
      vi.unstubAllEnvs();
    },
  };
}
