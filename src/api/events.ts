import { Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { HistoryRefusal } from "../history/errors.js";
import { ownsThread, readEventsAfter } from "../history/events.js";
import { logger } from "../logger.js";
import { followThread } from "../stream/follow.js";
import type { EventNotifier } from "../stream/notifier.js";
import type { ApiDeps } from "./deps.js";
import { apiErrors } from "./openapi.js";
import { validate } from "./validate.js";

/** Events one database read sends at most; a longer backlog is read page by page. */
export const EVENT_PAGE_SIZE = 500;

/** A comment line this often keeps proxies from closing a quiet stream. */
export const HEARTBEAT_MS = 15_000;

/** The stream as documented: Server-Sent Events, one per log row (id, event name, JSON data). */
export const threadEventStream = z.string();

const eventId = (name: string) =>
  z
    .string({ error: `${name} must be an event id (a whole number)` })
    .regex(/^\d{1,15}$/, `${name} must be an event id (a whole number)`)
    .transform(Number);

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const eventsQuery = z.object({ after: eventId("after").optional() });
const eventsHeaders = z.object({ "last-event-id": eventId("Last-Event-ID").optional() });

/**
 * GET /api/threads/:threadId/events: the thread's event log as Server-Sent Events. Replays the
 * rows after Last-Event-ID (or ?after=; a reconnecting EventSource sends the header, which wins),
 * then follows live: woken by the process's shared LISTEN connection, it re-reads the log after
 * the last id it sent, so every row is sent once and in id order, whoever wrote it.
 */
export function eventRoutes({ db, events }: ApiDeps & { events: EventNotifier }, heartbeatMs = HEARTBEAT_MS) {
  return new Hono<AuthEnv>().get(
    "/:threadId/events",
    describeRoute({
      operationId: "streamThreadEvents",
      tags: ["Threads"],
      summary: "Watch a thread: its event log, replayed after Last-Event-ID, then live (Server-Sent Events)",
      description:
        "Each event is one row of the thread's log: `id` (per thread, increasing), `event` (AgentKit's chunk names: run.started, " +
        "part.created, text.delta, part.completed, run.completed; and turn.retrying {attempt, maxAttempts, cause}, turn.failed, turn.cancelled, turn.stopped, turn.skipped, stream.ended, title.changed) and " +
        "`data` (JSON). stream.ended is written with the stored answer or the recorded failure. To resume, reconnect with " +
        "Last-Event-ID (EventSource does) or ?after=<id>. Comment lines are heartbeats. The stream stays open across turns.",
      responses: {
        200: { description: "An endless text/event-stream.", content: { "text/event-stream": { schema: { type: "string" } } } },
        ...apiErrors(400, 404),
      },
    }),
    validate("param", threadParams),
    validate("query", eventsQuery),
    validate("header", eventsHeaders),
    async (c) => {
      const { threadId } = c.req.valid("param");
      if (!(await ownsThread(db, threadId, callerId(c)))) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
      const after = c.req.valid("header")["last-event-id"] ?? c.req.valid("query").after ?? 0;
      // Listening before the first read: whatever commits after it wakes this stream.
      const follower = await followThread(events, threadId);
      return streamSSE(c, async (stream) => {
        let last = after;
        // Never complete: the stream stays open across turns until the client or the notifier ends it.
        await follower.follow(stream, heartbeatMs, async () => {
          last = await sendEventsAfter(stream, threadId, last);
          return false;
        });
      }, async (error) => {
        // Headers are sent: the client sees the stream end and resumes with Last-Event-ID.
        logger.error({ err: error, threadId }, "event stream failed");
      });

      async function sendEventsAfter(stream: SSEStreamingApi, thread: string, from: number): Promise<number> {
        let sent = from;
        for (;;) {
          const rows = await readEventsAfter(db, thread, sent, EVENT_PAGE_SIZE);
          for (const row of rows) {
            if (stream.aborted) return sent;
            await stream.writeSSE({ id: String(row.id), event: row.event, data: JSON.stringify(row.data) });
            sent = row.id;
          }
          if (rows.length < EVENT_PAGE_SIZE) return sent;
        }
      }
    },
  );
}
