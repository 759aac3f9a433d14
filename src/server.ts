import type { Server } from "node:http";
import { pathToFileURL } from "node:url";
import { serve as serveHttp } from "@hono/node-server";
import { Hono } from "hono";
import type { InngestFunction } from "inngest";
import { serve as serveInngest } from "inngest/hono";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "./agents/model.js";
import { chatRoutes } from "./api/chat.js";
import { answerError, EventNotSent } from "./api/errors.js";
import type { ApiDeps } from "./api/deps.js";
import { regenerateRoutes } from "./api/regenerate.js";
import { threadRoutes } from "./api/threads.js";
import { historyEnvironment, readEnvironment } from "./config.js";
import { createFunctions } from "./functions/index.js";
import { openDatabase } from "./history/database.js";
import { migrate } from "./history/migrate.js";
import { checkDatabase } from "./history/store.js";
import { drainable } from "./graceful-shutdown.js";
import { logger } from "./logger.js";

/** The HTTP surface: Inngest's serve endpoint, the REST API and a health check. */
export function createApp({ functions, ...api }: ApiDeps & { functions: InngestFunction.Any[] }) {
  // An event that cannot reach Inngest means the request was not accepted: answered 503.
  const deps: ApiDeps = { ...api, sendEvent: (event) => api.sendEvent(event).catch((error: unknown) => Promise.reject(new EventNotSent(error))) };
  const app = new Hono();
  app.onError(answerError);
  app.on(["GET", "PUT", "POST"], "/api/inngest", serveInngest({ client: inngest, functions }));
  app.route("/api/chat", chatRoutes(deps));
  app.route("/api/threads", threadRoutes(deps));
  app.route("/api/threads", regenerateRoutes(deps));
  app.get("/health", async (c) => {
    try {
      await checkDatabase(deps.db);
      return c.json({ status: "ok", database: "ok" });
    } catch (error) {
      return c.json({ status: "unavailable", database: (error as Error).message }, 503);
    }
  });
  return app;
}

/** Process start-up: configuration, database (migrated), model, functions, HTTP server. */
export async function startServer() {
  const env = readEnvironment();
  if (!process.env.INNGEST_SIGNING_KEY && !process.env.INNGEST_DEV) {
    // Without a signing key only the dev server can talk to us: say so, and serve it.
    process.env.INNGEST_DEV = "1";
    console.warn("[threadline] INNGEST_SIGNING_KEY is not set: serving the Inngest dev server (set INNGEST_SIGNING_KEY and INNGEST_EVENT_KEY for Inngest Cloud).");
  }
  const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR, embeddedPort: env.EMBEDDED_POSTGRES_PORT });
  console.info(`[threadline] database: ${database.source === "embedded" ? `embedded PostgreSQL (${env.DATA_DIR}/postgres)` : "DATABASE_URL"}`);
  const applied = await migrate(database.url);
  if (applied.length > 0) console.info(`[threadline] migrations applied: ${applied.join(", ")}`);

  const model = chooseModel(env);
  if (model.configured) console.info(`[threadline] model: ${model.provider} ${model.name}`);
  else console.warn(`[threadline] WARNING: ${model.reason} Until then every chat turn fails (the user's message is still stored).`);

  const history = historyEnvironment(env);
  if (Object.keys(history).length > 0) console.info(`[threadline] history settings fixed by the environment: ${JSON.stringify(history)}`);
  const functions = createFunctions({ db: database.pool, model, historyEnvironment: history });
  const app = createApp({ db: database.pool, sendEvent: (event) => inngest.send(event), functions });
  const server = serveHttp({ fetch: app.fetch, port: env.PORT });
  console.info(`[threadline] listening on http://localhost:${env.PORT} (Inngest endpoint: /api/inngest)`);

  // SIGTERM/SIGINT: no new connections, requests in flight finish (up to SHUTDOWN_TIMEOUT_MS), then
  // the pool and the embedded database close. Exit 1 when the timeout cut requests off. A second
  // signal ends the process at once (an embedded database left running is stopped on the next start).
  const { drain } = drainable(server as Server);
  const shutdown = async (signal: NodeJS.Signals) => {
    logger.info(`${signal}: not accepting connections; waiting up to ${env.SHUTDOWN_TIMEOUT_MS} ms for requests in flight`);
    const drained = await drain(env.SHUTDOWN_TIMEOUT_MS);
    if (!drained) logger.warn(`requests still in flight after SHUTDOWN_TIMEOUT_MS (${env.SHUTDOWN_TIMEOUT_MS} ms) were cut off`);
    try {
      await database.close();
    } catch (error) {
      logger.error({ err: error }, "closing the database failed");
      process.exit(1);
    }
    logger.info("stopped");
    process.exit(drained ? 0 : 1);
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  startServer().catch((error: unknown) => {
    console.error(`[threadline] could not start: ${(error as Error).message}`);
    process.exit(1);
  });
}
