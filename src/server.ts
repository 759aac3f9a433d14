import { pathToFileURL } from "node:url";
import { serve as serveHttp } from "@hono/node-server";
import { Hono } from "hono";
import type { InngestFunction } from "inngest";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "./agents/model.js";
import { chatRoutes } from "./api/chat.js";
import { answerError, EventNotSent } from "./api/errors.js";
import type { ApiDeps } from "./api/deps.js";
import { regenerateRoutes } from "./api/regenerate.js";
import { threadRoutes } from "./api/threads.js";
import type { AuthEnv } from "./auth/identity.js";
import { authenticate } from "./auth/middleware.js";
import type { AuthSettings } from "./auth/settings.js";
import { authSettings, historyEnvironment, readEnvironment } from "./config.js";
import { createFunctions } from "./functions/index.js";
import { openDatabase } from "./history/database.js";
import { migrate } from "./history/migrate.js";
import { checkDatabase } from "./history/store.js";
import { inngestHandler, inngestServing, type InngestServing } from "./inngest-serve.js";
import { startupRefusals } from "./production.js";

/** What the app is built from: the API's dependencies, the functions it serves and how it checks callers. */
export type AppDeps = ApiDeps & { functions: InngestFunction.Any[]; auth: AuthSettings; serving: InngestServing };

/**
 * The HTTP surface: Inngest's serve endpoint (signed requests unless serving the dev server), the
 * REST API (a verified caller on every route) and a health check.
 */
export function createApp({ functions, auth, serving, ...api }: AppDeps) {
  // An event that cannot reach Inngest means the request was not accepted: answered 503.
  const deps: ApiDeps = { ...api, sendEvent: (event) => api.sendEvent(event).catch((error: unknown) => Promise.reject(new EventNotSent(error))) };
  const app = new Hono();
  app.onError(answerError);
  app.on(["GET", "PUT", "POST"], "/api/inngest", inngestHandler(functions, serving));
  const routes = new Hono<AuthEnv>()
    .use(authenticate(auth, deps.db))
    .route("/chat", chatRoutes(deps))
    .route("/threads", threadRoutes(deps))
    .route("/threads", regenerateRoutes(deps));
  app.route("/api", routes);
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
  const refusals = startupRefusals(env);
  if (refusals.length > 0) throw new Error(`refusing to start:\n  ${refusals.join("\n  ")}`);
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
  const app = createApp({ db: database.pool, sendEvent: (event) => inngest.send(event), functions, auth: authSettings(env), serving: inngestServing(env) });
  const server = serveHttp({ fetch: app.fetch, port: env.PORT });
  console.info(`[threadline] listening on http://localhost:${env.PORT} (Inngest endpoint: /api/inngest)`);

  const shutdown = async () => {
    server.close();
    await database.close();
    process.exit(0);
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
