import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { chatMessageRegenerateData, type ChatMessageRegenerate } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { sendRegenerate } from "./send-message.js";
import { validate } from "./validate.js";

const messageParams = chatMessageRegenerateData.pick({ threadId: true, messageId: true });
const regenerateBody = chatMessageRegenerateData
  .pick({ reason: true, requestId: true })
  .extend({ userId: userIdNotAccepted });

const regenerateAcceptedResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid().meta({ description: "The user message whose answer is generated again." }),
  eventId: z.string().meta({ description: "The id of the chat/message.regenerate event Inngest received." }),
});

/**
 * POST /api/threads/:threadId/messages/:messageId/regenerate: checks that the message is a user
 * message of the caller's thread (refusing with a 4xx and writing nothing otherwise), then sends
 * `chat/message.regenerate`; the new answer is generated in Inngest. Answers 202 with the ids.
 */
export function regenerateRoutes(deps: ApiDeps) {
  return new Hono<AuthEnv>().post(
    "/:threadId/messages/:messageId/regenerate",
    describeRoute({
      operationId: "regenerateAnswer",
      tags: ["Chat"],
      summary: "Generate a new answer to a user message; the previous answers stay listable as variants",
      responses: {
        202: jsonResponse("Accepted: the new answer is generated in Inngest.", regenerateAcceptedResponse),
        ...apiErrors(400, 404, 409, 413, 415, 422, 429),
      },
    }),
    validate("param", messageParams),
    validate("json", regenerateBody),
    async (c) => {
      const data: ChatMessageRegenerate = { ...c.req.valid("param"), ...c.req.valid("json"), userId: callerId(c) };
      return c.json((await sendRegenerate(deps, data)) satisfies z.infer<typeof regenerateAcceptedResponse>, 202);
    },
  );
}
