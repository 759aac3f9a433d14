import { Hono } from "hono";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { decodeCursor, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, readMessagePage } from "../history/message-pages.js";
import { listAnswerVariants, threadDebug } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { validate } from "./validate.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });

const cursor = (name: string) =>
  z
    .string({ error: `${name} must be a cursor (previous or next) from an earlier page` })
    .transform((value, ctx) => decodeCursor(value) ?? (ctx.addIssue({ code: "custom", message: `${name} must be a cursor (previous or next) from an earlier page` }), z.NEVER));
const pageQuery = z
  .object({
    limit: z
      .string({ error: "limit must be a whole number" })
      .regex(/^\d+$/, "limit must be a whole number")
      .transform(Number)
      .pipe(z.number().min(1, "limit must be at least 1").max(MAX_PAGE_SIZE, `limit must be at most ${MAX_PAGE_SIZE}`))
      .default(DEFAULT_PAGE_SIZE),
    before: cursor("before").optional(),
    after: cursor("after").optional(),
  })
  .refine((query) => query.before === undefined || query.after === undefined, { path: ["after"], message: "send before or after, not both" });

/** Reads of a thread, scoped by the verified caller: another user's thread is not found. */
export function threadRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>()
    // The current path one page at a time: the newest page, or the page before or after a cursor.
    .get("/:threadId/messages", validate("param", threadParams), validate("query", pageQuery), async (c) => {
      const { threadId } = c.req.valid("param");
      return c.json({ threadId, ...(await readMessagePage(db, { threadId, userId: callerId(c), ...c.req.valid("query") })) });
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
