import type { Server } from "node:http";
import { serve as serveHttp } from "@hono/node-server";
import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { requestId } from "hono/request-id";
import type { InngestFunction } from "inngest";
import { chooseStartModel, MODEL_SETUP_STEPS } from "./agents/model.js";
import { streamingRefusal } from "./agents/streamed-completion.js";
import { branchRoutes } from "./api/branches.js";
import { crossOrigin } from "./api/cors.js";
import { chatRoutes } from "./api/chat.js";
import { checkEventSize, limitBody, requireJsonBody } from "./api/bounded-input.js";
import { answerError, EventNotSent, type AppEnv } from "./api/errors.js";
import { healthRoutes } from "./api/health.js";
import { allowedMethods, methodNotAllowed, refuseOtherMethods } from "./api/methods.js";
import { apiReferenceRoutes } from "./api/openapi.js";
import type { ApiDeps } from "./api/deps.js";
import { eventRoutes } from "./api/events.js";
import { exportRoutes } from "./api/export.js";
import { feedbackRoutes } from "./api/feedback.js";
import { memoryRoutes } from "./api/memories.js";
import { playgroundRoutes, serviceInfoRoutes, type ServiceInfo } from "./api/playground.js";
import { realtimeTokenRoutes } from "./api/realtime-token.js";
import { regenerateRoutes } from "./api/regenerate.js";
import { searchRoutes } from "./api/search.js";
import { approvalRoutes } from "./api/approvals.js";
import { stopRoutes } from "./api/stop.js";
import { threadRoutes } from "./api/threads.js";
import { usageRoutes } from "./api/usage.js";
import { uiChatRoutes } from "./api/ui-chat.js";
import type { AuthEnv } from "./auth/identity.js";
import { authenticate } from "./auth/middleware.js";
import type { AuthSettings } from "./auth/settings.js";
import { agentsConfig, authSettings, budgetDefaults, historyEnvironment, readEnvironment } from "./config.js";
import { createFunctions } from "./functions/index.js";
import { openDatabase } from "./platform/database.js";
import { migrate } from "./history/migrate.js";
import { drainable } from "./platform/graceful-shutdown.js";
import {
  devServerEngine,
  engineAdvice,
  engineProbe,
  inngestEngine,
  type EngineProbe,
  type InngestEngine,
} from "./platform/inngest-engine.js";
import { inngestClient, inngestHandler, inngestServing, type InngestServing } from "./platform/inngest-serve.js";
import { logger } from "./platform/logger.js";
import { startupRefusals } from "./platform/production.js";
import { inngestRealtime } from "./stream/realtime-publisher.js";
import { startRealtimeRelay } from "./stream/realtime-relay.js";
import { createEventNotifier } from "./stream/notifier.js";
import { createStreamSlots } from "./stream/stream-slots.js";
import { createThreadFeeds } from "./stream/thread-feeds.js";

/** What the app is built from: the API's dependencies, the functions it serves and how it checks callers. */
export type AppDeps = ApiDeps & {
  functions: InngestFunction.Any[];
  auth: AuthSettings;
  serving: InngestServing;
  /** The Inngest server events go to (default: the local dev server), named by the 503 of an unsent event. */
  engine?: InngestEngine;
  /** Readiness's probe of that server (default: one probe per 10 s). */
  engineProbe?: EngineProbe;
  service?: ServiceInfo;
  /** Browser origins allowed to call the API from another origin (CORS_ORIGINS). */
  corsOrigins?: readonly string[] | undefined;
};

/**
 * The HTTP surface: Inngest's serve endpoint (signed requests unless serving the dev server), the
 * REST API (a verified caller on every route; JSON bodies bounded by Inngest's event size limit),
 * a health check, the API's OpenAPI description (/openapi.json, rendered at /docs), generated
 * from the routes themselves, and the playground page (/). Every request gets an id (X-Request-Id).
 */
export function createApp({
  functions,
  auth,
  serving,
  service,
  engine = devServerEngine(),
  engineProbe: probe,
  corsOrigins,
  ...api
}: AppDeps) {
  // An event Inngest would refuse for its size is refused here (413); one that cannot reach Inngest
  // means the request was not accepted (503).
  const advice = engineAdvice(engine);
  const sendEvent: ApiDeps["sendEvent"] = async (event) => {
    checkEventSize(event);
    return api.sendEvent(event).catch((error: unknown) => Promise.reject(new EventNotSent(error, advice)));
  };
  const events = api.events ?? createEventNotifier(api.db);
  const streams = { events, feeds: createThreadFeeds({ db: api.db, events }), slots: createStreamSlots(api.streams) };
  const deps = { ...api, sendEvent, ...streams };
  const app = new Hono<AppEnv>();
  app.onError(answerError);
  const allowed = allowedMethods(app);
  // Paths outside /api (the health checks, the reference, the playground) are told their methods here.
  app.notFound(
    (c) =>
      methodNotAllowed(c, allowed(c.req.path)) ??
      c.json(
        { error: `No route for ${c.req.method} ${c.req.path}: see /docs (the API reference) or /openapi.json.` },
        404,
      ),
  );
  app.use(requestId());
  app.on(
    ["GET", "PUT", "POST"],
    "/api/inngest",
    describeRoute({
      tags: ["Service"],
      summary: "Inngest's serve endpoint: called by Inngest, not by clients",
      description:
        "Registers and runs the app's Inngest functions. Requests must be signed with INNGEST_SIGNING_KEY unless INNGEST_DEV chose the dev server: an unsigned POST (and in production an unsigned PUT) is refused with 401 before its body is read, a body larger than Inngest's largest request with 413.",
      security: [],
      responses: { default: { description: "The Inngest SDK's answer, in Inngest's own protocol." } },
    }),
    ...inngestHandler(functions, serving),
  );
  // The caller is checked before the body is looked at, and the body is bounded by the largest
  // event (the serve endpoint above bounds Inngest's calls by a run's state, up to 32 MB). A
  // method a path does not take is refused after CORS (a browser reads the 405) and before the caller.
  const routes = new Hono<AuthEnv>()
    .use(crossOrigin(corsOrigins))
    .use(refuseOtherMethods(allowed))
    .use(authenticate(auth, deps.db))
    .use(requireJsonBody(), limitBody())
    .route("/chat", chatRoutes(deps))
    .route("/search", searchRoutes(deps))
    .route("/threads", threadRoutes(deps))
    .route("/threads", regenerateRoutes(deps))
    .route("/threads", eventRoutes(deps))
    .route("/threads", stopRoutes(deps))
    .route("/threads", feedbackRoutes(deps))
    .route("/threads", approvalRoutes(deps))
    .route("/threads", branchRoutes(deps))
    .route("/ui/chat", uiChatRoutes(deps))
    .route("/realtime", realtimeTokenRoutes(deps))
    .route("/export", exportRoutes(deps))
    .route("/memories", memoryRoutes(deps))
    .route("/usage", usageRoutes(deps))
    .route("/info", serviceInfoRoutes(service));
  app.route("/api", routes);
  app.route("/", healthRoutes({ db: deps.db, engine: probe ?? engineProbe(engine, { intervalMs: 10_000 }) }));
  app.route("/", playgroundRoutes());
  // The description is generated on its first request, from every route the app has by then.
  app.route("/", apiReferenceRoutes(app));
  return app;
}

/** Process start-up: configuration, database (migrated), model, functions, HTTP server. */
export async function startServer() {
  const env = readEnvironment();
  const refusals = startupRefusals(env);
  if (refusals.length > 0) throw new Error(`refusing to start:\n  ${refusals.join("\n  ")}`);
  const { choice: model, note: modelNote } = await chooseStartModel(env);
  // A configuration refusal, made before a database is started for nothing.
  const unstreamable = env.INFERENCE === "stream" && model.configured ? streamingRefusal(model) : undefined;
  if (unstreamable) throw new Error(`refusing to start: ${unstreamable}`);
  const database = await openDatabase({
    databaseUrl: env.DATABASE_URL,
    dataDir: env.DATA_DIR,
    embeddedPort: env.EMBEDDED_POSTGRES_PORT,
    timeouts: {
      statementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS,
      idleInTransactionTimeoutMs: env.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
  });
  logger.info(
    `database: ${database.source === "embedded" ? `embedded PostgreSQL, data in ${database.dataDir} (delete it, with the app stopped, to start afresh)` : "DATABASE_URL"}`,
  );
  const applied = await migrate(database.url);
  if (applied.length > 0) logger.info(`migrations applied: ${applied.join(", ")}`);

  if (model.configured) logger.info(`model: ${model.provider} ${model.name}${modelNote ? `: ${modelNote}` : ""}`);
  else
    logger.warn(
      `${model.reason} Until then every chat turn fails (the user's message is still stored)${modelNote ? `; ${modelNote}` : ""}. To configure one:\n  - ${MODEL_SETUP_STEPS.join("\n  - ")}`,
    );
  logger.info(
    `inference: ${env.INFERENCE === "stream" ? "in this process, streamed to the event log" : "through the Inngest server (step.ai.infer)"}`,
  );

  const history = historyEnvironment(env);
  if (Object.keys(history).length > 0) logger.info({ history }, "history settings fixed by the environment");
  if (env.RETENTION_DAYS !== undefined)
    logger.info(`retention: threads inactive for more than ${env.RETENTION_DAYS} days are deleted hourly`);
  const agents = agentsConfig(env);
  logger.info({ network: agents.network, memory: agents.memory.agents }, "agents");
  const engine = inngestEngine(env);
  logger.info(
    `Inngest: ${engine.kind === "cloud" ? "Inngest Cloud" : engine.kind === "dev" ? "the dev server" : "self-hosted"} (events ${engine.eventUrl}, API ${engine.apiUrl}); a turn whose run is lost is recorded failed within ${env.LOST_RUN_DEADLINE_MINUTES} minutes`,
  );
  const functions = createFunctions({
    db: database.pool,
    model,
    historyEnvironment: history,
    agents,
    retentionDays: env.RETENTION_DAYS,
    eventRetentionHours: env.EVENT_LOG_RETENTION_HOURS,
    tombstoneDays: env.THREAD_TOMBSTONE_DAYS,
    eventLog: env.EVENT_LOG_CHUNKS === true,
    inference: env.INFERENCE,
    busyPolicy: env.BUSY_POLICY,
    prices: env.MODEL_PRICES,
    engine,
    lostRunDeadlineMinutes: env.LOST_RUN_DEADLINE_MINUTES,
  });
  const events = createEventNotifier(database.pool);
  const serving = inngestServing(env);
  // Built now, from the configuration: see inngestClient.
  const client = inngestClient(serving);
  const realtime = env.REALTIME === "inngest" ? inngestRealtime(client) : undefined;
  const relay = realtime ? await startRealtimeRelay({ db: database.pool, events, publisher: realtime }) : undefined;
  if (relay) logger.info("realtime: the event log is published to Inngest realtime (topic agent_stream)");
  const app = createApp({
    db: database.pool,
    sendEvent: (event) => client.send(event),
    events,
    realtime,
    functions,
    auth: authSettings(env),
    corsOrigins: env.CORS_ORIGINS,
    serving,
    engine,
    engineProbe: engineProbe(engine, { intervalMs: env.READINESS_ENGINE_INTERVAL_SECONDS * 1_000 }),
    service: { model, inference: env.INFERENCE },
    streams: { perUser: env.STREAM_MAX_PER_USER, perProcess: env.STREAM_MAX_PER_PROCESS },
    busyPolicy: env.BUSY_POLICY,
    budgets: budgetDefaults(env),
  });
  const server = serveHttp({ fetch: app.fetch, port: env.PORT, hostname: env.HOST });
  logger.info(
    `listening on http://${env.HOST}:${env.PORT} (Inngest endpoint: /api/inngest; liveness /health, readiness /health/ready)`,
  );

  // SIGTERM/SIGINT: no new connections, requests in flight finish (up to SHUTDOWN_TIMEOUT_MS), then
  // the pool and the embedded database close. Exit 1 when the timeout cut requests off. A second
  // signal ends the process at once (an embedded database left running is stopped on the next start).
  const { drain } = drainable(server as Server);
  const shutdown = async (signal: NodeJS.Signals) => {
    logger.info(
      `${signal}: not accepting connections; waiting up to ${env.SHUTDOWN_TIMEOUT_MS} ms for requests in flight`,
    );
    // Event streams never finish on their own: closing the notifier ends them (clients resume elsewhere).
    const draining = drain(env.SHUTDOWN_TIMEOUT_MS);
    await relay?.close();
    await events.close();
    const drained = await draining;
    if (!drained)
      logger.warn(`requests still in flight after SHUTDOWN_TIMEOUT_MS (${env.SHUTDOWN_TIMEOUT_MS} ms) were cut off`);
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
