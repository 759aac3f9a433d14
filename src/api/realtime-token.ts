import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { subscriptionToken } from "../stream/realtime-publisher.js";
import type { ApiDeps } from "./deps.js";
import { RealtimeUnavailable } from "./errors.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { validate } from "./validate.js";

const realtimeTokenResponse = subscriptionToken;

/** use-agent's token request: it may name a thread or a channel key; the channel is always the caller's own. */
const tokenBody = z.looseObject({
  userId: userIdNotAccepted,
  threadId: z
    .uuid({ error: "threadId must be a UUID" })
    .optional()
    .meta({ description: "Ignored: the token covers every thread of the caller." }),
});

/**
 * POST /api/realtime/token: a subscription token for @inngest/use-agent, for the caller's channel
 * (user:<caller>) and topic agent_stream only. 404 when realtime is off (REALTIME unset), 503 when
 * Inngest cannot issue one.
 */
export function realtimeTokenRoutes({ realtime }: ApiDeps) {
  return new Hono<AuthEnv>().post(
    "/token",
    describeRoute({
      operationId: "getRealtimeToken",
      tags: ["Chat"],
      summary: "A realtime subscription token for @inngest/use-agent: the caller's channel, topic agent_stream",
      description:
        "Needs REALTIME=inngest and Inngest realtime (the dev server or Inngest Cloud). 404 (code realtime_off) when realtime is off; " +
        "503 when Inngest cannot issue a token. The token never covers another user's channel, whatever the body says.",
      responses: {
        200: jsonResponse("The subscription token.", realtimeTokenResponse),
        ...apiErrors(400, 404, 413, 415),
      },
    }),
    validate("json", tokenBody),
    async (c) => {
      if (!realtime) {
        return c.json(
          {
            error:
              "Realtime is off on this server (REALTIME=inngest turns it on): follow the thread with GET /api/threads/:threadId/events instead.",
            code: "realtime_off" as const,
          },
          404,
        );
      }
      const token = await realtime
        .subscriptionToken(callerId(c))
        .catch((error: unknown) => Promise.reject(new RealtimeUnavailable(error)));
      return c.json(token satisfies z.infer<typeof realtimeTokenResponse>, 200);
    },
  );
}
