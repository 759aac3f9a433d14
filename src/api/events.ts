import { Hono } from "hono";
import { describeRoute, resolver } from "hono-openapi";
import { z } from "zod";
import { callerId, type AuthEnv } from "../auth/identity.js";
import { HistoryRefusal } from "../history/errors.js";
import {
  CLIENT_KINDS,
  THREAD_DELETED,
  THREAD_LOG_KINDS,
  threadDeletedEvent,
  threadLogEvent,
} from "../history/thread-log.js";
import { logger } from "../platform/logger.js";
import { STREAM_RETRY_AFTER_SECONDS, type StreamSlots } from "../stream/stream-slots.js";
import type { FeedFollower } from "../stream/thread-feeds.js";
import type { ApiDeps, StreamDeps } from "./deps.js";
import { TooManyStreams } from "./errors.js";
import { apiErrors } from "./openapi.js";
import { validate } from "./validate.js";

/**
 * Events one database read of a UI message stream (ui-chat.ts) sends at most; a longer backlog is
 * read page by page. This route's pages are the feeds' (src/stream/thread-feeds.ts).
 */
export const EVENT_PAGE_SIZE = 500;

/** A comment line this often keeps proxies from closing a quiet stream. */
export const HEARTBEAT_MS = 15_000;

/**
 * The stream as documented, generated from the log's vocabulary: one Server-Sent Event per log row
 * (`id` the row's id, `event` its kind, `data` its payload as JSON), and thread.deleted at the end.
 */
const threadEventStream = z.union([
  ...threadLogEvent.options.map((kind) =>
    z
      .object({
        id: z.string().meta({ description: "The row's id (per thread, increasing): resume after it." }),
        event: kind.shape.event,
        data: kind.shape.data,
      })
      .meta({ ...kind.meta() }),
  ),
  threadDeletedEvent,
]);

const eventId = (name: string) =>
  z
    .string({ error: `${name} must be an event id (a whole number)` })
    .regex(/^\d{1,15}$/, `${name} must be an event id (a whole number)`)
    .transform(Number);

const threadParams = z.object({ threadId: z.uuid({ error: "threadId must be a UUID" }) });
const eventsQuery = z.object({ after: eventId("after").optional() });
const eventsHeaders = z.object({ "last-event-id": eventId("Last-Event-ID").optional() });

/** A slot for the caller's new stream (release it when the stream ends, or when the request is refused after all), or the 429 that refuses it. */
export function takeStreamSlot(slots: StreamSlots, userId: string): { release: () => void } {
  const slot = slots.acquire(userId);
  if ("refused" in slot) throw new TooManyStreams(slot.refused, STREAM_RETRY_AFTER_SECONDS);
  return slot;
}

/**
 * GET /api/threads/:threadId/events: the thread's event log as Server-Sent Events. Replays the
 * rows after Last-Event-ID (or ?after=; a reconnecting EventSource sends the header, which wins),
 * then follows live through the thread's shared follow loop (thread-feeds.ts): every row is sent
 * once and in id order, whoever wrote it, and every read is scoped by the caller and the thread's
 * incarnation. When the thread is deleted the stream ends with a `thread.deleted` event; a stream
 * beyond the caller's or the process's share of streams is refused (429).
 */
export function eventRoutes({ feeds, slots }: ApiDeps & StreamDeps, heartbeatMs = HEARTBEAT_MS) {
  return new Hono<AuthEnv>().get(
    "/:threadId/events",
    describeRoute({
      operationId: "streamThreadEvents",
      tags: ["Threads"],
      summary: "Watch a thread: its event log, replayed after Last-Event-ID, then live (Server-Sent Events)",
      description:
        "Each event is one row of the thread's log: `id` (per thread, increasing), `event` (its kind: " +
        `${THREAD_LOG_KINDS.join(", ")}) and \`data\` (its payload, JSON; the response schema gives each kind's). ` +
        `A client that shows the thread live needs only ${CLIENT_KINDS.join(", ")}. AgentKit's chunks (run.*, part.*, ` +
        "tool_call.*, and text.delta without a step) are logged only under EVENT_LOG_CHUNKS=1. stream.ended is written with " +
        "the stored answer or the recorded failure. To resume, reconnect with Last-Event-ID (EventSource does) or " +
        "?after=<id>. Comment lines are heartbeats. The stream stays open across turns; it ends with " +
        `\`${THREAD_DELETED}\` (no id) when the thread is deleted. 429 beyond the caller's share of open streams.`,
      responses: {
        200: {
          description: "An endless text/event-stream.",
          content: { "text/event-stream": { schema: resolver(threadEventStream, { options: { io: "output" } }) } },
        },
        ...apiErrors(400, 404, 429),
      },
    }),
    validate("param", threadParams),
    validate("query", eventsQuery),
    validate("header", eventsHeaders),
    async (c) => {
      const { threadId } = c.req.valid("param");
      const userId = callerId(c);
      const after = c.req.valid("header")["last-event-id"] ?? c.req.valid("query").after ?? 0;
      // The slot first: a caller over their share is refused without a database read.
      const slot = takeStreamSlot(slots, userId);
      let follower: FeedFollower;
      try {
        // One read checks the thread is the caller's and brings the first page to replay.
        const followed = await feeds.follow({ threadId, userId, afterId: after });
        if (!followed) throw new HistoryRefusal("thread_not_found", `Thread ${threadId} does not exist.`);
        follower = followed;
      } catch (error) {
        slot.release();
        throw error;
      }
      // Headers as hono's streamSSE sends them: chunked, so @hono/node-server writes each page as it comes.
      for (const [name, value] of Object.entries(SSE_HEADERS)) c.header(name, value);
      return c.body(eventStream(follower, slot, threadId, heartbeatMs));
    },
  );
}

const SSE_HEADERS = {
  "Transfer-Encoding": "chunked",
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
};

/** One Server-Sent Event as hono's writeSSE writes it (each line of `data` on its own data line). */
const sseFrame = (event: string, data: string) =>
  `event: ${event}\n${data
    .split(/\r\n|\r|\n/)
    .map((line) => `data: ${line}`)
    .join("\n")}\n\n`;

/** What a client is told when the stream fails after its headers were sent. */
const STREAM_FAILED = "The event stream failed: reconnect with Last-Event-ID to resume where it stopped.";

/**
 * The follower's deliveries as the response body, one chunk each (a page is the database's string,
 * encoded once): one web stream, pulled by @hono/node-server as the socket takes it. It never
 * completes on its own: the client, the thread or the process ends it. The follower and the slot
 * are released once, when it ends or the client leaves.
 */
function eventStream(
  follower: FeedFollower,
  slot: { release: () => void },
  threadId: string,
  heartbeatMs: number,
): ReadableStream<Uint8Array> {
  let ended = false;
  const end = (controller?: ReadableStreamDefaultController<Uint8Array>) => {
    if (ended) return;
    ended = true;
    follower.close();
    slot.release();
    controller?.close();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const delivery = await follower.next(heartbeatMs);
        if (ended) return;
        if (delivery === null) controller.enqueue(Buffer.from(": heartbeat\n\n"));
        else if ("frames" in delivery) {
          // A page as the database built it (src/history/events.ts): one chunk.
          controller.enqueue(Buffer.from(delivery.frames.frames));
        } else if ("deleted" in delivery) {
          controller.enqueue(Buffer.from(sseFrame(THREAD_DELETED, JSON.stringify({ threadId }))));
          end(controller);
        } else if ("failed" in delivery) throw delivery.failed;
        // Behind (a stalled client: it resumes with Last-Event-ID) or closed (shutdown).
        else end(controller);
      } catch (error) {
        // Headers are sent: the client sees the stream end and resumes with Last-Event-ID.
        logger.error({ err: error, threadId }, "event stream failed");
        // The cause is logged, never sent: it may be the database's own words.
        controller.enqueue(Buffer.from(sseFrame("error", STREAM_FAILED)));
        end(controller);
      }
    },
    cancel: () => end(),
  });
}
