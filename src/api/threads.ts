import { Hono } from "hono";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { listAnswerVariants, listCurrentPath, threadDebug } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { validate } from "./validate.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });

/** Reads of a thread, scoped by the verified caller: another user's thread is not found. */
export function threadRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>()
    .get("/:threadId/messages", validate("param", threadParams), async (c) => {
      const { threadId } = c.req.valid("param");
      return c.json({ threadId, messages: await listCurrentPath(db, threadId, callerId(c)) });
    })
    // A user message's answers: the current one and every superseded variant.
    .get("/:threadId/messages/:messageId/variants", validate("param", messageParams), async (c) => {
      const { threadId, messageId } = c.req.valid("param");
      const variants = await listAnswerVariants(db, { threadId, messageId, userId: callerId(c) });
      return c.json({ threadId, messageId, variants });
    })
    // The history policy in force for the latest turn, where each setting came from, and counts.
    .get("/:threadId/debug", validate("param", threadParams), async (c) =>
      c.json(await threadDebug(db, c.req.valid("param").threadId, callerId(c))),
    );
}
