import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { stream } from "hono/streaming";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { exportUserData } from "../history/export.js";
import { EXPORT_VERSION, exportRecord } from "../history/export-format.js";
import { logger } from "../platform/logger.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors, jsonResponse } from "./openapi.js";

/** One line of GET /api/export (JSON Lines, versioned): src/history/export-format.ts, docs/security.md. */
export const exportLine = exportRecord;

/**
 * Exports one app instance streams at once. Each holds a pooled database connection for as long as
 * its client reads, so they are capped well below the pool's size: turns never wait behind exports.
 */
export const MAX_CONCURRENT_EXPORTS = 2;

/** Exports one user may stream at once on an instance: one user cannot take every slot. */
export const MAX_EXPORTS_PER_USER = 1;

/** 429 body when every export slot is taken. */
const exportBusyResponse = z.object({ error: z.string() });

/**
 * GET /api/export: everything stored about the caller (a subject-access export) as JSON Lines,
 * written as it is read (one snapshot, batch by batch: see src/history/export.ts), never built in
 * memory.
 */
export function exportRoutes({ db }: ApiDeps) {
  let running = 0;
  const runningFor = new Map<string, number>();
  const release = (userId: string) => {
    running -= 1;
    const left = (runningFor.get(userId) ?? 1) - 1;
    if (left > 0) runningFor.set(userId, left);
    else runningFor.delete(userId);
  };
  return new Hono<AuthEnv>().get(
    "/",
    describeRoute({
      operationId: "exportUserData",
      tags: ["Threads"],
      summary: "Everything stored about the caller (subject-access export) as versioned JSON Lines, streamed",
      responses: {
        200: {
          description: `One JSON object per line (format version ${EXPORT_VERSION}): a header (\`type: export\`); each thread followed by all its messages (replaced variants and stopped answers included), turns with status and failure cause, tool approvals with their decisions, summary, agent state, event log and feedback; the user's memories and API keys (never their secrets); the last line counts every kind (\`type: end\`). See docs/security.md.`,
          content: { "application/x-ndjson": { schema: { type: "string" } } },
        },
        429: jsonResponse(
          "An export of the caller's is still running, or too many are on this server; Retry-After says when to try again.",
          exportBusyResponse,
        ),
        ...apiErrors(),
      },
    }),
    (c) => {
      const userId = callerId(c);
      const own = runningFor.get(userId) ?? 0;
      if (own >= MAX_EXPORTS_PER_USER || running >= MAX_CONCURRENT_EXPORTS) {
        c.header("Retry-After", "30");
        const error =
          own >= MAX_EXPORTS_PER_USER
            ? "An export of yours is still running: let it finish, or try again in a minute."
            : "Too many exports are running on this server: try again in a minute.";
        return c.json({ error } satisfies z.infer<typeof exportBusyResponse>, 429);
      }
      running += 1;
      runningFor.set(userId, own + 1);
      c.header("Content-Type", "application/x-ndjson; charset=utf-8");
      c.header("Content-Disposition", 'attachment; filename="threadline-export.jsonl"');
      c.header("Cache-Control", "no-store");
      return stream(
        c,
        async (out) => {
          try {
            for await (const record of exportUserData(db, userId)) {
              if (out.aborted) break;
              await out.write(`${JSON.stringify(record satisfies z.infer<typeof exportLine>)}\n`);
            }
          } finally {
            release(userId);
          }
        },
        // The 200 and its headers are sent by then: the stream just ends early, and the fault is logged.
        async (error) => {
          logger.error({ err: error, userId }, "export failed mid-stream");
        },
      );
    },
  );
}
