import { Hono } from "hono";
import { z } from "zod";
import { listAnswerVariants, listCurrentPath, threadDebug } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { validate } from "./validate.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });
const userQuery = z.object({ userId: z.string({ error: "userId query parameter is required" }).min(1, "userId must not be empty") });

/** Reads of a thread, scoped by the user who asks (userId query parameter). */
export function threadRoutes({ db }: ApiDeps) {
  return new Hono()
    .get("/:threadId/messages", validate("param", threadParams), validate("query", userQuery), async (c) => {
      const { threadId } = c.req.valid("param");
      return c.json({ threadId, messages: await listCurrentPath(db, threadId, c.req.valid("query").userId) });
    })
    // A user message's answers: the current one and every superseded variant.
    .get("/:threadId/messages/:messageId/variants", validate("param", messageParams), validate("query", userQuery), async (c) => {
      const { threadId, messageId } = c.req.valid("param");
      const variants = await listAnswerVariants(db, { threadId, messageId, userId: c.req.valid("query").userId });
      return c.json({ threadId, messageId, variants });
    })
    // The history policy in force for the latest turn, where each setting came from, and counts.
    .get("/:threadId/debug", validate("param", threadParams), validate("query", userQuery), async (c) =>
      c.json(await threadDebug(db, c.req.valid("param").threadId, c.req.valid("query").userId)),
    );
}
