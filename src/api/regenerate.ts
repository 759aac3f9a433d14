import { Hono } from "hono";
import { chatMessageRegenerateData, type ChatMessageRegenerate } from "../../inngest.config.js";
import { loadUserMessage } from "../history/store.js";
import { badRequest, eventNotSent, refusal } from "./errors.js";
import type { ApiDeps } from "./deps.js";

const messageParams = chatMessageRegenerateData.pick({ threadId: true, messageId: true });
const regenerateBody = chatMessageRegenerateData.pick({ userId: true, reason: true });

/**
 * POST /api/threads/:threadId/messages/:messageId/regenerate: checks that the message is a user
 * message of the user's thread (refusing with a 4xx and writing nothing otherwise), then sends
 * `chat/message.regenerate`; the new answer is generated in Inngest. Answers 202 with the ids.
 */
export function regenerateRoutes({ db, sendEvent }: ApiDeps) {
  return new Hono().post("/:threadId/messages/:messageId/regenerate", async (c) => {
    const params = messageParams.safeParse(c.req.param());
    if (!params.success) return badRequest(c, params.error);
    const body = regenerateBody.safeParse(await c.req.json().catch(() => null));
    if (!body.success) return badRequest(c, body.error);
    const data: ChatMessageRegenerate = { ...params.data, ...body.data };
    try {
      await loadUserMessage(db, data);
    } catch (error) {
      return refusal(c, error);
    }
    const sent = await sendEvent({ name: "chat/message.regenerate", data }).catch((error: unknown) => error as Error);
    if (sent instanceof Error) return eventNotSent(c, sent);
    return c.json({ threadId: data.threadId, messageId: data.messageId, eventId: sent.ids[0] }, 202);
  });
}
