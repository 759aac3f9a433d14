import { pathToFileURL } from "node:url";
import { serve as serveHttp } from "@hono/node-server";
import { Hono } from "hono";
import { requestId } from "hono/request-id";
import type { InngestFunction } from "inngest";
import { serve as serveInngest } from "inngest/hono";
import { inngest } from "../inngest.config.js";
import { chooseModel } from "./agents/model.js";
import { chatRoutes } from "./api/chat.js";
import { checkEventSize, limitBody, requireJsonBody } from "./api/bounded-input.js";
import { answerError, EventNotSent, type AppEnv } from "./api/errors.js";
import type { ApiDeps } from "./api/deps.js";
import { regenerateRoutes } from "./api/regenerate.js";
import { threadRoutes } from "./api/threads.js";
import { historyEnvironment, readEnvironment } from "./config.js";
import { createFunctions } from "./functions/index.js";
import { openDatabase } from "./history/database.js";
import { migrate } from "./history/migrate.js";
import { checkDatabase } from "./history/store.js";
import { logger } from "./logger.js";

/**
 * The HTTP surface: Inngest's serve endpoint, the REST API and a health check. Every request gets
 * an id (X-Request-Id); API bodies are JSON and bounded by Inngest's event size limit.
 */
export function createApp({ functions, ...api }: ApiDeps & { functions: InngestFunction.Any[] }) {
  // An event Inngest would refuse for its size is refused here (413); one that cannot reach Inngest
  // means the request was not accepted (503).
  const sendEvent: ApiDeps["sendEvent"] = async (event) => {
    checkEventSize(event);
    return api.sendEvent(event).catch((error: unknown) => Promise.reject(new EventNotSent(error)));
  };
  const deps: ApiDeps = { ...api, sendEvent };
  const app = new Hono<AppEnv>();
  app.onError(answerError);
  app.notFound((c) => c.json({ error: `No route for ${c.req.method} ${c.req.path}: see the HTTP API in the README.` }, 404));
  app.use(requestId());
  app.on(["GET", "PUT", "POST"], "/api/inngest", serveInngest({ client: inngest, functions }));
  // Only the API's bodies are bounded: Inngest's own calls carry a run's state (up to 32 MB).
  app.use("/api/chat", requireJsonBody(), limitBody());
  app.use("/api/threads/*", requireJsonBody(), limitBody());
  app.route("/api/chat", chatRoutes(deps));
  app.route("/api/threads", threadRoutes(deps));
  app.route("/api/threads", regenerateRoutes(deps));
  // Answers whether the database is reachable, never why not: the reason is logged with the request id.
  app.get("/health", async (c) => {
    try {
      await checkDatabase(deps.db);
      return c.json({ status: "ok", database: "ok" });
    } catch (error) {
      const id = c.get("requestId");
      logger.error({ requestId: id, err: error }, "health check: database unreachable");
      return c.json({ status: "unavailable", database: "unreachable", requestId: id }, 503);
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
