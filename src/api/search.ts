import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { safeString } from "../history/safe-text.js";
import {
  decodeSearchCursor,
  DEFAULT_SEARCH_PAGE_SIZE,
  MAX_SEARCH_PAGE_SIZE,
  MAX_SEARCH_QUERY_LENGTH,
  searchMessages,
} from "../history/search.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";
import { cursorParameter, pageLimit, validate } from "./validate.js";

const searchQuery = z.object({
  q: safeString({ error: "q must be the text to search for" })
    .trim()
    .min(1, "q must not be empty")
    .max(MAX_SEARCH_QUERY_LENGTH, `q must be at most ${MAX_SEARCH_QUERY_LENGTH} characters`),
  limit: pageLimit(DEFAULT_SEARCH_PAGE_SIZE, MAX_SEARCH_PAGE_SIZE),
  cursor: cursorParameter(decodeSearchCursor, "cursor must be the nextCursor of an earlier page").optional(),
  include: z
    .enum(["current", "all"], {
      error: 'include must be "current" (the threads\' current paths) or "all" (also replaced answers)',
    })
    .default("current"),
});

const searchHit = z.object({
  threadId: z.uuid(),
  messageId: z.uuid(),
  role: z.enum(["user", "assistant"]),
  createdAt: z.iso.datetime(),
  rank: z.number(),
  snippet: z.string().meta({ description: "The matching passage, HTML-escaped, each match inside <mark>…</mark>" }),
  onPath: z.boolean(),
});

export const searchResponse = z.object({
  query: z.string(),
  results: z.array(searchHit),
  hasMore: z.boolean(),
  nextCursor: z.string().nullable(),
});

/** Full-text search over the verified caller's messages, across their threads. */
export function searchRoutes({ db }: ApiDeps) {
  return new Hono<AuthEnv>().get(
    "/",
    describeRoute({
      operationId: "searchMessages",
      tags: ["Search"],
      summary: "Full-text search over the caller's messages across their threads, best matches first",
      responses: { 200: jsonResponse("A page of matches.", searchResponse), ...apiErrors(400) },
    }),
    validate("query", searchQuery),
    async (c) => {
      const { q, limit, cursor, include } = c.req.valid("query");
      const page = await searchMessages(db, {
        userId: callerId(c),
        query: q,
        limit,
        includeOffPath: include === "all",
        after: cursor,
      });
      return c.json({ query: q, ...page } satisfies z.input<typeof searchResponse>);
    },
  );
}
