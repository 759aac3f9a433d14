import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { chatMessageSentData } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { sendChatMessage } from "./send-message.js";
import { validate } from "./validate.js";

/** The message as a client sends it: everything the event carries except the user, who is the caller. */
const chatBody = chatMessageSentData
  .omit({ userId: true, edits: true, resentAfter: true })
  .extend({ userId: userIdNotAccepted });

const chatAcceptedResponse = z.object({
  threadId: z.uuid().meta({ description: "The thread the message belongs to (a new thread's id is the message id)." }),
  messageId: z.uuid(),
  eventId: z.string().meta({ description: "The id of the chat/message.sent event Inngest received." }),
});

/**
 * POST /api/chat: validates the message and sends `chat/message.sent` for the calling user; the
 * turn runs in Inngest. Answers 202 with the ids the client needs to follow it (a new thread's id
 * is the message id).
 */
export function chatRoutes(deps: ApiDeps) {
  return new Hono<AuthEnv>().post(
    "/",
    describeRoute({
      operationId: "sendChatMessage",
      tags: ["Chat"],
      summary: "Send a message; the answer is generated in Inngest",
      responses: {
        202: jsonResponse("Accepted: the turn runs in Inngest.", chatAcceptedResponse),
        ...apiErrors(400, 404, 409, 413, 415, 429),
      },
    }),
    validate("json", chatBody),
    async (c) => {
      const sent = await sendChatMessage(deps, { ...c.req.valid("json"), userId: callerId(c) });
      return c.json(sent satisfies z.infer<typeof chatAcceptedResponse>, 202);
    },
  );
}
