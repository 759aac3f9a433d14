import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { decodeMemoryCursor, encodeMemoryCursor, forget, forgetAll, listMemories } from "../history/memories.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { cursorParameter, pageLimit, validate } from "./validate.js";

const DEFAULT_MEMORY_PAGE = 50;
const MAX_MEMORY_PAGE = 200;

const memoryParams = z.object({
  memoryId: z.uuid({ error: "memoryId must be a UUID (an id from GET /api/memories)" }),
});

const listQuery = z.object({
  limit: pageLimit(DEFAULT_MEMORY_PAGE, MAX_MEMORY_PAGE),
  after: cursorParameter(decodeMemoryCursor, "after must be the next cursor of an earlier page").optional(),
});

const memory = z.object({
  id: z.uuid(),
  text: z.string(),
  /** remembered: the user had it remembered (kept until erased); extracted: proposed from a thread (deleted with it). */
  source: z.enum(["remembered", "extracted"]),
  threadId: z.uuid().nullable(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});

/** GET /api/memories: what is remembered about the caller, newest first, and the cursor of the next page. */
export const memoryListResponse = z.object({ memories: z.array(memory), next: z.string().nullable() });

/** DELETE /api/memories: how many memories were erased. */
export const memoriesDeletedResponse = z.object({ deleted: z.number().int().nonnegative() });

/** DELETE /api/memories/:memoryId: the memory erased. */
export const memoryDeletedResponse = z.object({ deleted: z.uuid() });

/** What is remembered about the verified caller: see it, erase one memory, erase all. */
export function memoryRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>()
    .get(
      "/",
      describeRoute({
        operationId: "listMemories",
        tags: ["Memory"],
        summary: "What is remembered about the caller, newest first, one page at a time",
        responses: { 200: jsonResponse("A page of memories.", memoryListResponse), ...apiErrors(400) },
      }),
      validate("query", listQuery),
      async (c) => {
        const { limit, after } = c.req.valid("query");
        const page = await listMemories(db, { userId: callerId(c), limit, after });
        return c.json({
          memories: page.memories,
          next: page.next ? encodeMemoryCursor(page.next) : null,
        } satisfies z.infer<typeof memoryListResponse>);
      },
    )
    .delete(
      "/",
      describeRoute({
        operationId: "forgetAllMemories",
        tags: ["Memory"],
        summary: "Erases everything remembered about the caller",
        responses: {
          200: jsonResponse("How many memories were erased.", memoriesDeletedResponse),
          ...apiErrors(413, 415),
        },
      }),
      async (c) =>
        c.json({ deleted: await forgetAll(db, callerId(c)) } satisfies z.infer<typeof memoriesDeletedResponse>),
    )
    .delete(
      "/:memoryId",
      describeRoute({
        operationId: "forgetMemory",
        tags: ["Memory"],
        summary: "Erases one memory",
        responses: {
          200: jsonResponse("The memory erased.", memoryDeletedResponse),
          ...apiErrors(400, 404, 413, 415),
        },
      }),
      validate("param", memoryParams),
      async (c) => {
        const { memoryId } = c.req.valid("param");
        // Another user's memory is not found, like one that never existed.
        if (!(await forget(db, { userId: callerId(c), id: memoryId }))) {
          return c.json(
            { error: `No memory ${memoryId}: list yours with GET /api/memories.`, code: "memory_not_found" as const },
            404,
          );
        }
        return c.json({ deleted: memoryId } satisfies z.infer<typeof memoryDeletedResponse>);
      },
    );
}
