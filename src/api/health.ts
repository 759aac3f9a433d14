import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { checkDatabase } from "../history/store.js";
import type { EngineProbe } from "../platform/inngest-engine.js";
import { logger } from "../platform/logger.js";
import type { ApiDeps } from "./deps.js";
import type { AppEnv } from "./errors.js";
import { jsonResponse } from "./openapi.js";

const healthResponse = z.object({ status: z.literal("ok"), database: z.literal("ok") });
const unhealthyResponse = z.object({
  status: z.literal("unavailable"),
  database: z.literal("unreachable"),
  requestId: z.string(),
});
const reachability = z.enum(["ok", "unreachable"]);
const readyResponse = z.object({
  status: z.literal("ready"),
  database: z.literal("ok"),
  inngest: z.literal("ok"),
});
const notReadyResponse = z.object({
  status: z.literal("unavailable"),
  database: reachability,
  inngest: reachability,
  requestId: z.string(),
});

/**
 * GET /health (liveness): public; whether the database is reachable, never why not (that is
 * logged with the request id). GET /health/ready (readiness): the same, and whether the Inngest
 * server answers — from `engine`, which probes it at most once per interval however many probes
 * arrive — so a load balancer stops sending chat requests to an instance whose events cannot be
 * sent, without restarting it.
 */
export function healthRoutes({ db, engine }: Pick<ApiDeps, "db"> & { engine: EngineProbe }) {
  return new Hono<AppEnv>()
    .get(
      "/health",
      describeRoute({
        operationId: "getHealth",
        tags: ["Service"],
        summary: "Whether the service can reach its database",
        security: [],
        responses: {
          200: jsonResponse("The database answers.", healthResponse),
          503: jsonResponse("The database does not answer; the reason is logged under requestId.", unhealthyResponse),
        },
      }),
      async (c) => {
        try {
          await checkDatabase(db);
          return c.json({ status: "ok", database: "ok" } satisfies z.infer<typeof healthResponse>);
        } catch (error) {
          const requestId = c.get("requestId");
          logger.error({ requestId, err: error }, "health check: database unreachable");
          return c.json(
            { status: "unavailable", database: "unreachable", requestId } satisfies z.infer<typeof unhealthyResponse>,
            503,
          );
        }
      },
    )
    .get(
      "/health/ready",
      describeRoute({
        operationId: "getReadiness",
        tags: ["Service"],
        summary: "Whether the service can take requests: its database and its Inngest server answer",
        security: [],
        responses: {
          200: jsonResponse("The database and the Inngest server answer.", readyResponse),
          503: jsonResponse(
            "The database or the Inngest server does not answer; the reason is logged under requestId.",
            notReadyResponse,
          ),
        },
      }),
      async (c) => {
        const requestId = c.get("requestId");
        const [database, inngest] = await Promise.all([
          checkDatabase(db).then(
            () => "ok" as const,
            (error: unknown) => {
              logger.error({ requestId, err: error }, "readiness: database unreachable");
              return "unreachable" as const;
            },
          ),
          engine.check().then((probe) => {
            if (probe.reachable) return "ok" as const;
            logger.error({ requestId, reason: probe.reason }, "readiness: Inngest server unreachable");
            return "unreachable" as const;
          }),
        ]);
        if (database === "ok" && inngest === "ok")
          return c.json({ status: "ready", database, inngest } satisfies z.infer<typeof readyResponse>);
        return c.json(
          { status: "unavailable", database, inngest, requestId } satisfies z.infer<typeof notReadyResponse>,
          503,
        );
      },
    );
}
