import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { decodeCursor, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, readMessagePage } from "../history/message-pages.js";
import { agentContent, textContent } from "../history/messages.js";
import { listAnswerVariants, threadDebug } from "../history/store.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { validate } from "./validate.js";

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });

const cursor = (name: string, description: string) =>
  z
    .string({ error: `${name} must be a cursor (previous or next) from an earlier page` })
    .transform((value, ctx) => decodeCursor(value) ?? (ctx.addIssue({ code: "custom", message: `${name} must be a cursor (previous or next) from an earlier page` }), z.NEVER))
    .meta({ description });
const pageQuery = z
  .object({
    limit: z
      .string({ error: "limit must be a whole number" })
      .regex(/^\d+$/, "limit must be a whole number")
      .transform(Number)
      .pipe(z.number().min(1, "limit must be at least 1").max(MAX_PAGE_SIZE, `limit must be at most ${MAX_PAGE_SIZE}`))
      .default(DEFAULT_PAGE_SIZE)
      .meta({ description: `How many messages, at most (default ${DEFAULT_PAGE_SIZE}, at most ${MAX_PAGE_SIZE}).` }),
    before: cursor("before", "A page's `previous`: read the older messages before it.").optional(),
    after: cursor("after", "A page's `next`: read the newer messages after it. Never with `before`.").optional(),
  })
  .refine((query) => query.before === undefined || query.after === undefined, { path: ["after"], message: "send before or after, not both" });

const timestamp = z.iso.datetime();
/** A turn's state; `skipped` turns (a duplicate delivery that did nothing) are never shown. */
const turnStatus = z.enum(["running", "completed", "failed", "cancelled", "superseded"]);
const messageContent = z
  .union([textContent, agentContent])
  .meta({ description: "`{text}` for user, system and summary messages; an assistant answer's AgentKit output and tool calls." });

const threadMessage = z.object({
  id: z.string(),
  role: z.enum(["user", "assistant", "system", "summary"]),
  agentName: z.string(),
  content: messageContent,
  createdAt: timestamp,
  answers: z.uuid().optional().meta({ description: "An answer's user message." }),
  variant: z.int().optional().meta({ description: "An answer's variant (0 for the first answer, one more per regenerate)." }),
  variantCount: z.int().optional().meta({ description: "A user message's number of answer variants." }),
  turn: z
    .object({ status: turnStatus, runId: z.string(), error: z.string().nullable() })
    .nullable()
    .optional()
    .meta({ description: "A user message's latest turn (null before one started), with the failure's cause." }),
});

export const messagePageResponse = z.object({
  threadId: z.uuid(),
  messages: z.array(threadMessage).meta({ description: "In thread order (oldest first)." }),
  hasMore: z.boolean().meta({ description: "More messages lie beyond this page in the direction read." }),
  previous: z.string().meta({ description: "Send as `before` to read the older messages." }),
  next: z.string().meta({ description: "Send as `after` to read the newer messages (including those appended later)." }),
});

export const answerVariantsResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid(),
  variants: z.array(
    z.object({
      variant: z.int(),
      current: z.boolean().meta({ description: "The answer the thread's current path shows." }),
      createdAt: timestamp,
      results: z.array(z.object({ id: z.string(), agentName: z.string(), content: agentContent })),
    }),
  ),
});

export const threadDebugResponse = z.object({
  threadId: z.uuid(),
  latestTurn: z
    .object({
      runId: z.string(),
      messageId: z.uuid(),
      kind: z.enum(["chat", "regenerate"]),
      variant: z.int(),
      status: turnStatus,
      error: z.string().nullable(),
      context: z
        .record(z.string(), z.unknown())
        .nullable()
        .meta({ description: "What the turn's history was made of: `policy` (each setting and where it came from) and, once answered, `history` (where it was read from, messages read and sent, budgets)." }),
      startedAt: timestamp,
      finishedAt: timestamp.nullable(),
    })
    .nullable(),
  messages: z
    .partialRecord(z.enum(["user", "agent", "system", "summary"]), z.object({ onPath: z.int(), stored: z.int() }))
    .meta({ description: "Messages of each kind: on the current path, and stored in all (old variants included)." }),
});

/** Reads of a thread, scoped by the verified caller: another user's thread is not found. */
export function threadRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>()
    // The current path one page at a time: the newest page, or the page before or after a cursor.
    .get(
      "/:threadId/messages",
      describeRoute({
        operationId: "listMessages",
        tags: ["Threads"],
        summary: "A page of the thread's current path: the newest page, or the page before or after a cursor",
        responses: { 200: jsonResponse("The page.", messagePageResponse), ...apiErrors(400, 404) },
      }),
      validate("param", threadParams),
      validate("query", pageQuery),
      async (c) => {
        const { threadId } = c.req.valid("param");
        const page = await readMessagePage(db, { threadId, userId: callerId(c), ...c.req.valid("query") });
        return c.json({ threadId, ...page });
      },
    )
    // A user message's answers: the current one and every superseded variant.
    .get(
      "/:threadId/messages/:messageId/variants",
      describeRoute({
        operationId: "listAnswerVariants",
        tags: ["Threads"],
        summary: "Every answer variant of a user message, oldest first",
        responses: { 200: jsonResponse("The variants.", answerVariantsResponse), ...apiErrors(400, 404, 422) },
      }),
      validate("param", messageParams),
      async (c) => {
        const { threadId, messageId } = c.req.valid("param");
        const variants = await listAnswerVariants(db, { threadId, messageId, userId: callerId(c) });
        return c.json({ threadId, messageId, variants });
      },
    )
    // The history policy in force for the latest turn, where each setting came from, and counts.
    .get(
      "/:threadId/debug",
      describeRoute({
        operationId: "getThreadDebug",
        tags: ["Threads"],
        summary: "Why the model saw what it saw: the latest turn's history policy, its sources, and message counts",
        responses: { 200: jsonResponse("The thread's debug view.", threadDebugResponse), ...apiErrors(400, 404) },
      }),
      validate("param", threadParams),
      async (c) => c.json(await threadDebug(db, c.req.valid("param").threadId, callerId(c))),
    );
}
