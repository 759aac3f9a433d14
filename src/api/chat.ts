import { Hono } from "hono";
import { chatMessageSentData } from "../../inngest.config.js";
import { checkSendable } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { validate } from "./validate.js";

/**
 * POST /api/chat: validates the message and sends `chat/message.sent`; the turn runs in Inngest.
 * Answers 202 with the ids the client needs to follow it (a new thread's id is the message id).
 */
export function chatRoutes({ db, sendEvent }: ApiDeps) {
  return new Hono().post("/", validate("json", chatMessageSentData), async (c) => {
    const data = c.req.valid("json");
    await checkSendable(db, data);
    const { ids } = await sendEvent({ name: "chat/message.sent", data });
    return c.json({ threadId: data.threadId ?? data.messageId, messageId: data.messageId, eventId: ids[0] }, 202);
  });
}
