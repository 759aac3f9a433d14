import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { checkDatabase } from "../history/store.js";
import { logger } from "../logger.js";
import type { ApiDeps } from "./deps.js";
import type { AppEnv } from "./errors.js";
import { jsonResponse } from "./openapi.js";

export const healthResponse = z.object({ status: z.literal("ok"), database: z.literal("ok") });
export const unhealthyResponse = z.object({ status: z.literal("unavailable"), database: z.literal("unreachable"), requestId: z.string() });

/** GET /health: public; whether the database is reachable, never why not (that is logged with the request id). */
export function healthRoutes({ db }: Pick<ApiDeps, "db">) {
  return new Hono<AppEnv>().get(
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
        return c.json({ status: "unavailable", database: "unreachable", requestId } satisfies z.infer<typeof unhealthyResponse>, 503);
      }
    },
  );
}
