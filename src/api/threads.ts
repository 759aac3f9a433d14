import { Hono } from "hono";
import { z } from "zod";
import { listAnswerVariants, listCurrentPath } from "../history/store.js";
import { badRequest, refusal } from "./errors.js";
import type { ApiDeps } from "./deps.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });
const userQuery = z.object({ userId: z.string({ error: "userId query parameter is required" }).min(1, "userId must not be empty") });

/** Reads of a thread, scoped by the user who asks (userId query parameter). */
export function threadRoutes({ db }: ApiDeps) {
  return new Hono()
    .get("/:threadId/messages", async (c) => {
      const params = threadParams.safeParse(c.req.param());
      if (!params.success) return badRequest(c, params.error);
      const query = userQuery.safeParse(c.req.query());
      if (!query.success) return badRequest(c, query.error);
      try {
        const messages = await listCurrentPath(db, params.data.threadId, query.data.userId);
        return c.json({ threadId: params.data.threadId, messages });
      } catch (error) {
        return refusal(c, error);
      }
    })
    // A user message's answers: the current one and every superseded variant.
    .get("/:threadId/messages/:messageId/variants", async (c) => {
      const params = messageParams.safeParse(c.req.param());
      if (!params.success) return badRequest(c, params.error);
      const query = userQuery.safeParse(c.req.query());
      if (!query.success) return badRequest(c, query.error);
      try {
        const variants = await listAnswerVariants(db, { ...params.data, userId: query.data.userId });
        return c.json({ threadId: params.data.threadId, messageId: params.data.messageId, variants });
      } catch (error) {
        return refusal(c, error);
      }
    });
}
