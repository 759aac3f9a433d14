import { Hono } from "hono";
import { chatMessageSentData } from "../../inngest.config.js";
import { badRequest, eventNotSent } from "./errors.js";
import type { ApiDeps } from "./deps.js";

/**
 * POST /api/chat: validates the message and sends `chat/message.sent`; the turn runs in Inngest.
 * Answers 202 with the ids the client needs to follow it (a new thread's id is the message id).
 */
export function chatRoutes({ sendEvent }: ApiDeps) {
  return new Hono().post("/", async (c) => {
    const body = await c.req.json().catch(() => null);
    const parsed = chatMessageSentData.safeParse(body);
    if (!parsed.success) return badRequest(c, parsed.error);
    const data = parsed.data;
    const sent = await sendEvent({ name: "chat/message.sent", data }).catch((error: unknown) => error as Error);
    if (sent instanceof Error) return eventNotSent(c, sent);
    return c.json({ threadId: data.threadId ?? data.messageId, messageId: data.messageId, eventId: sent.ids[0] }, 202);
  });
}
