import type { HttpBindings } from "@hono/node-server";
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
import type { FeedDelivery, FeedFollower } from "../stream/thread-feeds.js";
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
      // HEAD (which hono answers with this handler): what a GET would answer, with no stream to hold.
      if (c.req.method === "HEAD") {
        follower.close();
        slot.release();
        return c.body(null, 200, HEAD_HEADERS);
      }
      const events = eventSource(follower, slot, threadId, heartbeatMs);
      // Served by @hono/node-server: written to Node's response directly (writeEvents).
      const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
      if (!outgoing) return c.body(webStream(events), 200, SSE_HEADERS);
      writeEvents(events, c.body(null, 200, SSE_HEADERS).headers, outgoing);
      return alreadySent();
    },
  );
}

/** Headers as hono's streamSSE sends them: chunked, so each page is written as it comes. */
const SSE_HEADERS = {
  "Transfer-Encoding": "chunked",
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
};

/** What a HEAD of a stream route answers: the stream's headers, without those of its chunked body. */
export const HEAD_HEADERS = {
  "Content-Type": SSE_HEADERS["Content-Type"],
  "Cache-Control": SSE_HEADERS["Cache-Control"],
};

/** One Server-Sent Event as hono's writeSSE writes it (each line of `data` on its own data line). */
const sseFrame = (event: string, data: string) =>
  `event: ${event}\n${data
    .split(/\r\n|\r|\n/)
    .map((line) => `data: ${line}`)
    .join("\n")}\n\n`;

const HEARTBEAT = [Buffer.from(": heartbeat\n\n")];

/** What a client is told when the stream fails after its headers were sent. */
const STREAM_FAILED = "The event stream failed: reconnect with Last-Event-ID to resume where it stopped.";

/** What a delivery writes, in order. */
type Chunks = readonly Uint8Array[];

/**
 * A stream's body, delivery by delivery: `next` gives the next one's chunks, or null once it has
 * ended; `take` the same at once, undefined when nothing is ready (no delivery queued).
 */
type EventSource = {
  next: () => Promise<Chunks | null>;
  take: () => Chunks | null | undefined;
  end: () => void;
  /** Calls `listener` once the client fell too far behind (see FeedFollower.whenBehind). */
  whenBehind: (listener: () => void) => void;
};

/**
 * The follower's deliveries as the response body. It never ends on its own: the client, the
 * thread or the process ends it.
 * The follower and the slot are released once, when it ends or the client leaves (`end`).
 */
function eventSource(
  follower: FeedFollower,
  slot: { release: () => void },
  threadId: string,
  heartbeatMs: number,
): EventSource {
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    follower.close();
    slot.release();
  };
  const chunksOf = (delivery: FeedDelivery | null): Chunks | null => {
    if (ended) return null;
    try {
      if (delivery === null) return HEARTBEAT;
      // A page as the database built it (src/history/events.ts), each piece as a Buffer: Node writes
      // it as it is, a string into a buffer sized for 3 bytes a character (~0.02 ms a 1,000-row page).
      if ("frames" in delivery) return delivery.frames.frames.map((piece) => Buffer.from(piece));
      if ("deleted" in delivery) {
        end();
        return [Buffer.from(sseFrame(THREAD_DELETED, JSON.stringify({ threadId })))];
      }
      if ("failed" in delivery) throw delivery.failed;
      // Behind (a stalled client: it resumes with Last-Event-ID) or closed (shutdown).
      end();
      return null;
    } catch (error) {
      // Headers are sent: the client sees the stream end and resumes with Last-Event-ID.
      logger.error({ err: error, threadId }, "event stream failed");
      end();
      // The cause is logged, never sent: it may be the database's own words.
      return [Buffer.from(sseFrame("error", STREAM_FAILED))];
    }
  };
  return {
    end,
    whenBehind: (listener) => follower.whenBehind(listener),
    take: () => {
      if (ended) return null;
      const delivery = follower.take();
      return delivery === undefined ? undefined : chunksOf(delivery);
    },
    next: async () =>
      ended ? null : chunksOf(await follower.next(heartbeatMs).catch((error: unknown) => ({ failed: error }))),
  };
}

/**
 * Writes the stream to Node's response: a reconnect's first page (queued by the feed's first read)
 * with the headers, in one go, then each delivery as the socket takes it; with nothing queued, the
 * headers at once. Through a web stream, @hono/node-server would flush the headers alone first
 * (one more packet and wake-up of the client) and each chunk would cross the stream (~0.2 ms of a
 * reconnect, issue 19). A client that leaves ends the stream, even before the first write.
 */
function writeEvents(events: EventSource, headers: Headers, outgoing: HttpBindings["outgoing"]) {
  // Gone while the first page was read: its close came and went.
  if (outgoing.destroyed) return events.end();
  let closed = false;
  const left = () => {
    closed = true;
    events.end();
  };
  outgoing.once("close", left);
  // A client too far behind while the socket is full reads nothing: what waits for it is let go
  // (the socket's buffers too), and it resumes with Last-Event-ID. Otherwise the stream ends as
  // it comes to the behind delivery.
  events.whenBehind(() => {
    if (outgoing.writableNeedDrain) outgoing.destroy();
  });
  // Lowercase and in order, as @hono/node-server writes a Response's headers.
  const head: Record<string, string> = {};
  for (const [name, value] of headers) head[name] = value;
  outgoing.writeHead(200, head);
  // A reconnect's first page is written now, before the handler makes its answer (alreadySent).
  const first = events.take();
  if (first === undefined) outgoing.flushHeaders();
  const written = async () => {
    for (
      let chunks = first === undefined ? await events.next() : first;
      chunks !== null && !closed;
      chunks = await events.next()
    ) {
      let room = true;
      for (const chunk of chunks) room = outgoing.write(chunk);
      if (room || closed) continue;
      // Full: wait until the socket takes more, or the client leaves.
      await new Promise<void>((resolve) => {
        const go = () => {
          outgoing.off("drain", go);
          outgoing.off("close", go);
          resolve();
        };
        outgoing.on("drain", go);
        outgoing.on("close", go);
      });
    }
    if (closed) return;
    outgoing.off("close", left);
    outgoing.end();
  };
  written().catch((error: unknown) => {
    logger.error({ err: error }, "event stream failed");
    events.end();
    outgoing.destroy();
  });
}

/**
 * Tells @hono/node-server that the response is written (its RESPONSE_ALREADY_SENT: a bodiless
 * response with this header), made with the runtime's own Response class. Once the server has
 * replaced the global Response with its lightweight subclass, a lightweight one would be written
 * again (headers twice: an error in the body); RESPONSE_ALREADY_SENT is made on import, which may
 * be after that. Made once, on the first stream: the server and hono only read it, and building
 * it took ~0.04 ms of each reconnect (CPU profile, loaded machine; issue 19).
 */
let sent: Response | undefined;
function alreadySent(): Response {
  if (sent) return sent;
  const parent: unknown = Object.getPrototypeOf(Response);
  const Native = parent === Function.prototype ? Response : (parent as typeof Response);
  sent = new Native(null, { headers: { "x-hono-already-sent": "true" } });
  return sent;
}

/** The stream as a web stream (a response not served by Node's HTTP server, such as app.request's). */
const webStream = (events: EventSource) => {
  let cancelled = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunks = await events.next();
      if (cancelled) return;
      if (!chunks) return controller.close();
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    cancel: () => {
      cancelled = true;
      events.end();
    },
  });
};
