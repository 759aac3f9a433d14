import { Hono } from "hono";
import { chatMessageSentData } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { checkSendable } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { validate } from "./validate.js";

/** The message as a client sends it: everything the event carries except the user, who is the caller. */
const chatBody = chatMessageSentData.omit({ userId: true }).extend({ userId: userIdNotAccepted });

/**
 * POST /api/chat: validates the message and sends `chat/message.sent` for the calling user; the
 * turn runs in Inngest. Answers 202 with the ids the client needs to follow it (a new thread's id
 * is the message id).
 */
export function chatRoutes({ db, sendEvent }: ApiDeps) {
  return new Hono<AuthEnv>().post("/", validate("json", chatBody), async (c) => {
    const data = { ...c.req.valid("json"), userId: callerId(c) };
    // Refused here (404 / 409) rather than accepted and refused inside the run, where the sender cannot see it.
    await checkSendable(db, data);
    const { ids } = await sendEvent({ id: `chat-message-${data.messageId}`, name: "chat/message.sent", data });
    return c.json({ threadId: data.threadId ?? data.messageId, messageId: data.messageId, eventId: ids[0] }, 202);
  });
}
