import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { jsonBytes, threadDeleted, TOO_LARGE, type ThreadDeleted, turnUsageData } from "../../inngest.config.js";
import { callerId, userIdNotAccepted, type AuthEnv } from "../auth/identity.js";
import { decodeCursor, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, readMessagePage } from "../history/message-pages.js";
import { agentContent, textContent } from "../history/messages.js";
import { refuseUnsafeJson, safeString } from "../history/safe-text.js";
import { listAnswerVariants, threadDebug } from "../history/store.js";
import {
  createThread,
  deleteThread,
  listThreads,
  readThread,
  updateThread,
  type ThreadCursor,
} from "../history/threads.js";
import { logger } from "../platform/logger.js";
import type { ApiDeps } from "./deps.js";
import { answerFeedback } from "./feedback.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { cursorParameter, pageLimit, validate, withinYears } from "./validate.js";

/* ---- The thread list and each thread's details ---- */

const DEFAULT_THREAD_PAGE_SIZE = 20;
const MAX_THREAD_PAGE_SIZE = 100;
/** Largest metadata object accepted, in bytes of its JSON: metadata is for labels and ids, not content. */
const MAX_METADATA_BYTES = 4_096;
const MAX_TITLE_LENGTH = 200;

/** A thread as every thread route returns it: GET and PATCH /api/threads/:threadId, the list's items. */
export const threadResponse = z.object({
  id: z.uuid(),
  /** null: untitled (no user title, and no model title yet). */
  title: z.string().nullable(),
  titleSource: z.enum(["user", "model"]).nullable(),
  metadata: z.record(z.string(), z.unknown()),
  /** Messages on the thread's current path. */
  messageCount: z.number().int().nonnegative(),
  /** The newest message's time; null while the thread has none. */
  lastMessageAt: z.iso.datetime().nullable(),
  /** The list's order: the newest message's time, or the creation time before any message. */
  lastActivityAt: z.iso.datetime(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  /** The latest turn's status (running, completed, failed, cancelled, superseded, stopped); null before any turn. */
  latestTurnStatus: z.string().nullable(),
});

/** GET /api/threads: one page, most recently active first. */
export const threadListResponse = z.object({
  threads: z.array(threadResponse),
  hasMore: z.boolean(),
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: z.string().nullable(),
  /** The same position as use-agent's transport names it (cursorTimestamp + cursorId). */
  nextCursorTimestamp: z.iso.datetime().nullable(),
  nextCursorId: z.uuid().nullable(),
});

/** POST /api/threads: the thread, plus `threadId` as use-agent's createThread reads it. */
export const threadCreatedResponse = threadResponse.extend({ threadId: z.uuid() });

/** DELETE /api/threads/:threadId. `announced`: thread/deleted was handed to Inngest. */
export const threadDeletedResponse = z.object({ threadId: z.uuid(), deleted: z.literal(true), announced: z.boolean() });

const encodeThreadCursor = ({ lastActivityAt, id }: ThreadCursor) =>
  Buffer.from(`${lastActivityAt}|${id}`).toString("base64url");

const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function decodeThreadCursor(cursor: string): ThreadCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,120}$/.test(cursor)) return undefined;
  const [lastActivityAt, id, extra] = Buffer.from(cursor, "base64url").toString("latin1").split("|");
  if (extra !== undefined || !lastActivityAt || !id || !ISO_MILLIS.test(lastActivityAt) || !UUID.test(id))
    return undefined;
  return withinYears(new Date(lastActivityAt)) ? { lastActivityAt, id } : undefined;
}

const threadListQuery = z
  .object({
    limit: pageLimit(DEFAULT_THREAD_PAGE_SIZE, MAX_THREAD_PAGE_SIZE),
    cursor: cursorParameter(
      decodeThreadCursor,
      "cursor must be the nextCursor of an earlier page",
      z.string(),
    ).optional(),
    /** use-agent's transport sends the position as two fields. */
    cursorTimestamp: z.iso
      .datetime({ offset: true, error: "cursorTimestamp must be the nextCursorTimestamp of an earlier page" })
      .refine(
        (value) => withinYears(new Date(value)),
        "cursorTimestamp must be the nextCursorTimestamp of an earlier page",
      )
      .optional(),
    cursorId: z.uuid({ error: "cursorId must be the nextCursorId of an earlier page" }).optional(),
    // Refused, not ignored: a client asking for page 2 by offset would silently get page 1 again.
    offset: z.never({ error: "offset is not supported: pass the previous page's nextCursor as cursor" }).optional(),
  })
  .refine((q) => (q.cursorTimestamp === undefined) === (q.cursorId === undefined), {
    path: ["cursorId"],
    message: "send cursorTimestamp and cursorId together",
  })
  .refine((q) => q.cursor === undefined || q.cursorId === undefined, {
    path: ["cursor"],
    message: "send cursor, or cursorTimestamp and cursorId, not both",
  })
  .transform(({ limit, cursor, cursorTimestamp, cursorId }) => ({
    limit,
    after:
      cursor ??
      (cursorTimestamp && cursorId
        ? { lastActivityAt: new Date(cursorTimestamp).toISOString(), id: cursorId }
        : undefined),
  }));

const title = safeString({ error: "title must be a string, or null for untitled" })
  .trim()
  .min(1, "title must not be empty (send null to make the thread untitled)")
  .max(MAX_TITLE_LENGTH, `title must be at most ${MAX_TITLE_LENGTH} characters`);

const metadata = z
  .record(z.string(), z.unknown(), { error: "metadata must be a JSON object" })
  .superRefine((value, ctx) => {
    if (!refuseUnsafeJson(value, ctx)) return;
    const bytes = jsonBytes(value);
    if (bytes > MAX_METADATA_BYTES) {
      ctx.addIssue({
        code: "custom",
        params: TOO_LARGE,
        message: `metadata is ${bytes} bytes as JSON, over the ${MAX_METADATA_BYTES}-byte limit: keep labels and ids there, not content`,
      });
    }
  });

const createThreadBody = z.object({
  /** The client's id for the thread (use-agent generates one); absent: the server makes one. */
  id: z.uuid({ error: "id must be a UUID (or omit it and the server generates one)" }).optional(),
  title: title.nullable().optional(),
  metadata: metadata.optional(),
  userId: userIdNotAccepted,
});

const updateThreadBody = z
  .object({ title: title.nullable().optional(), metadata: metadata.optional(), userId: userIdNotAccepted })
  .refine((body) => body.title !== undefined || body.metadata !== undefined, {
    message: "send title and/or metadata to change",
  });

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const messageParams = threadParams.extend({ messageId: z.uuid({ error: "messageId must be a UUID" }) });

const cursor = (name: string, description: string) =>
  cursorParameter(decodeCursor, `${name} must be a cursor (previous or next) from an earlier page`).meta({
    description,
  });
const pageQuery = z
  .object({
    limit: pageLimit(DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE).meta({
      description: `How many messages, at most (default ${DEFAULT_PAGE_SIZE}, at most ${MAX_PAGE_SIZE}).`,
    }),
    before: cursor("before", "A page's `previous`: read the older messages before it.").optional(),
    after: cursor("after", "A page's `next`: read the newer messages after it. Never with `before`.").optional(),
  })
  .refine((query) => query.before === undefined || query.after === undefined, {
    path: ["after"],
    message: "send before or after, not both",
  });

const timestamp = z.iso.datetime();
/** A turn's state; `skipped` turns (a duplicate delivery that did nothing) are never shown. */
const turnStatus = z.enum(["running", "completed", "failed", "cancelled", "superseded", "stopped"]);
/**
 * A message's turn as the messages page shows it: a running turn between attempts is `retrying`;
 * one whose tool call awaits the owner's approval is `awaiting_approval`.
 */
const messageTurnStatus = z.enum([...turnStatus.options, "retrying", "awaiting_approval"]);
const pendingToolCall = z.object({
  approvalId: z.uuid().meta({ description: "Decide it with POST /api/threads/{threadId}/approvals/{approvalId}." }),
  toolCallId: z.string(),
  toolName: z.string(),
  arguments: z.unknown(),
  status: z.literal("pending"),
  expiresAt: z.string(),
});
const messageContent = z.union([textContent, agentContent]).meta({
  description: "`{text}` for user, system and summary messages; an assistant answer's AgentKit output and tool calls.",
});

const threadMessage = z.object({
  id: z.string(),
  role: z.enum(["user", "assistant", "system", "summary"]),
  agentName: z.string(),
  content: messageContent,
  createdAt: timestamp,
  answers: z.uuid().optional().meta({ description: "An answer's user message." }),
  variant: z
    .int()
    .optional()
    .meta({ description: "An answer's variant (1 for the first answer, one more per regenerate)." }),
  stopped: z
    .literal(true)
    .optional()
    .meta({ description: "An answer the user stopped: what the model had streamed by then." }),
  feedback: answerFeedback
    .nullable()
    .optional()
    .meta({ description: "An answer's rating by the thread's owner (PUT …/messages/:answerId/feedback); null: none." }),
  turnUsage: turnUsageData.nullable().optional().meta({
    description:
      "An answer's turn usage: tokens and cost summed over the model calls of the turn that wrote this variant (billed failed attempts included; every result of one turn shows the same); null when none was reported.",
  }),
  variantCount: z.int().optional().meta({ description: "A user message's number of answer variants." }),
  turn: z
    .object({
      status: messageTurnStatus,
      runId: z.string(),
      error: z.string().nullable(),
      approvals: z
        .array(pendingToolCall)
        .optional()
        .meta({ description: "`awaiting_approval`: the tool calls that await the owner's decision." }),
    })
    .nullable()
    .optional()
    .meta({
      description:
        "A user message's latest turn (null before one started), with the failure's cause; `retrying`: running, a failed attempt is being retried (`error`: its cause); `awaiting_approval`: running, waiting for the owner's decision on `approvals`.",
    }),
  siblings: z
    .object({ count: z.int(), position: z.int(), ids: z.array(z.uuid()) })
    .optional()
    .meta({
      description:
        "The conversation tree: a user message's edits (the user messages that follow the same message), or an answer's variants (each named by its first result's id), oldest first; `position` (from 1) is this one's. PUT /api/threads/:threadId/messages/:id/current switches to another.",
    }),
});

const messagePageResponse = z.object({
  threadId: z.uuid(),
  messages: z.array(threadMessage).meta({ description: "In thread order (oldest first)." }),
  hasMore: z.boolean().meta({ description: "More messages lie beyond this page in the direction read." }),
  previous: z.string().meta({ description: "Send as `before` to read the older messages." }),
  next: z
    .string()
    .meta({ description: "Send as `after` to read the newer messages (including those appended later)." }),
});

const answerVariantsResponse = z.object({
  threadId: z.uuid(),
  messageId: z.uuid(),
  variants: z.array(
    z.object({
      variant: z.int(),
      current: z.boolean().meta({ description: "The answer the thread's current path shows." }),
      stopped: z
        .literal(true)
        .optional()
        .meta({ description: "The user stopped this answer: what the model had streamed by then." }),
      createdAt: timestamp,
      results: z.array(z.object({ id: z.string(), agentName: z.string(), content: agentContent })),
    }),
  ),
});

const threadDebugResponse = z.object({
  threadId: z.uuid(),
  latestTurn: z
    .object({
      runId: z.string(),
      messageId: z.uuid(),
      kind: z.enum(["chat", "regenerate"]),
      variant: z.int(),
      status: turnStatus,
      error: z.string().nullable(),
      context: z.record(z.string(), z.unknown()).nullable().meta({
        description:
          "What the turn's history was made of: `policy` (each setting and where it came from), `model` (the provider and model its agents call) and, once answered, `history` (where it was read from, messages read and sent, budgets).",
      }),
      startedAt: timestamp,
      finishedAt: timestamp.nullable(),
    })
    .nullable(),
  messages: z
    .partialRecord(z.enum(["user", "agent", "system", "summary"]), z.object({ onPath: z.int(), stored: z.int() }))
    .meta({ description: "Messages of each kind: on the current path, and stored in all (old variants included)." }),
});

/**
 * The caller's threads: list, create, read, rename, delete, and the reads of one thread's
 * messages. Another user's thread is answered exactly like one that does not exist (404).
 */
export function threadRoutes({ db, sendEvent }: ApiDeps) {
  return (
    new Hono<AuthEnv>()
      // Most recently active first, keyset-paged (docs/clients.md, "Threads", says what stays stable).
      .get(
        "/",
        describeRoute({
          operationId: "listThreads",
          tags: ["Threads"],
          summary: "The caller's threads, most recently active first, one page at a time",
          responses: { 200: jsonResponse("The page.", threadListResponse), ...apiErrors(400) },
        }),
        validate("query", threadListQuery),
        async (c) => {
          const page = await listThreads(db, { userId: callerId(c), ...c.req.valid("query") });
          return c.json({
            threads: page.threads,
            hasMore: page.hasMore,
            nextCursor: page.next ? encodeThreadCursor(page.next) : null,
            nextCursorTimestamp: page.next?.lastActivityAt ?? null,
            nextCursorId: page.next?.id ?? null,
          } satisfies z.infer<typeof threadListResponse>);
        },
      )
      // 201 for a new thread; 200 with the thread unchanged when the caller already holds the id.
      .post(
        "/",
        describeRoute({
          operationId: "createThread",
          tags: ["Threads"],
          summary:
            "Creates a thread (the client may give its id); the caller's existing thread with that id is answered unchanged",
          responses: {
            200: jsonResponse(
              "The caller already holds a thread with this id: it is unchanged.",
              threadCreatedResponse,
            ),
            201: jsonResponse("The new thread.", threadCreatedResponse),
            ...apiErrors(400, 404, 409, 413, 415),
          },
        }),
        validate("json", createThreadBody),
        async (c) => {
          const body = c.req.valid("json");
          const { thread, created } = await createThread(db, {
            threadId: body.id ?? crypto.randomUUID(),
            userId: callerId(c),
            title: body.title ?? null,
            metadata: body.metadata ?? {},
          });
          return c.json(
            { ...thread, threadId: thread.id } satisfies z.infer<typeof threadCreatedResponse>,
            created ? 201 : 200,
          );
        },
      )
      .get(
        "/:threadId",
        describeRoute({
          operationId: "getThread",
          tags: ["Threads"],
          summary: "One of the caller's threads",
          responses: { 200: jsonResponse("The thread.", threadResponse), ...apiErrors(400, 404) },
        }),
        validate("param", threadParams),
        async (c) =>
          c.json(
            (await readThread(db, c.req.valid("param").threadId, callerId(c))) satisfies z.infer<typeof threadResponse>,
          ),
      )
      // A title set here is the user's: the titles function never overwrites it. null: untitled again.
      .patch(
        "/:threadId",
        describeRoute({
          operationId: "updateThread",
          tags: ["Threads"],
          summary: "Renames a thread (null: untitled again) or replaces its metadata",
          responses: { 200: jsonResponse("The thread as changed.", threadResponse), ...apiErrors(400, 404, 413, 415) },
        }),
        validate("param", threadParams),
        validate("json", updateThreadBody),
        async (c) => {
          const thread = await updateThread(db, {
            threadId: c.req.valid("param").threadId,
            userId: callerId(c),
            ...c.req.valid("json"),
          });
          return c.json(thread satisfies z.infer<typeof threadResponse>);
        },
      )
      // Deleted first (one transaction), announced after: the deletion stands even when Inngest is
      // unreachable, and the answer says whether other components were told.
      .delete(
        "/:threadId",
        describeRoute({
          operationId: "deleteThread",
          tags: ["Threads"],
          summary: "Deletes a thread and everything kept for it, then announces thread/deleted",
          responses: { 200: jsonResponse("Deleted.", threadDeletedResponse), ...apiErrors(400, 404, 413, 415) },
        }),
        validate("param", threadParams),
        async (c) => {
          const { threadId } = c.req.valid("param");
          const userId = callerId(c);
          await deleteThread(db, threadId, userId);
          const announced = await sendEvent({
            id: `thread-deleted-${threadId}`,
            name: threadDeleted.name,
            data: { threadId, userId, reason: "user" } satisfies ThreadDeleted,
          }).then(
            () => true,
            (error: unknown) => {
              logger.error({ threadId, err: error }, "thread deleted, but thread/deleted could not be sent");
              return false;
            },
          );
          return c.json({ threadId, deleted: true as const, announced } satisfies z.infer<
            typeof threadDeletedResponse
          >);
        },
      )
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
      )
  );
}
