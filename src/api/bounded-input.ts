import type { Context, MiddlewareHandler } from "hono";
import { INNGEST_EVENT_LIMIT_BYTES, jsonBytes } from "../../inngest.config.js";
import { boundBody, declaredLength } from "../platform/body-bound.js";
import { EventTooLarge } from "./errors.js";

/**
 * Inngest's largest event on its free plan (256 KB; 3 MB on paid plans), the one limit the event
 * schemas are sized against. A request body is turned into one event, so no larger body can ever
 * be accepted: it is refused at the edge.
 */
export const MAX_EVENT_BYTES = INNGEST_EVENT_LIMIT_BYTES;

/** Room left in an event for the fields the Inngest SDK adds when sending it (id, ts, v). */
const SDK_FIELDS_BYTES = 1024;

/** The largest request body the API reads (a larger one could never make a valid event). */
export const MAX_BODY_BYTES = MAX_EVENT_BYTES;

/**
 * GET and HEAD never carry a body (the Fetch API gives them none, and so does @hono/node-server):
 * they pass the body checks untouched. Asking for their body would only build the request's
 * Fetch object (node-server defers it), ~0.15 ms of every event stream's reconnect.
 */
const bodiless = (method: string) => method === "GET" || method === "HEAD";

/**
 * Refuses a body over MAX_BODY_BYTES with 413: at once when its Content-Length says so, and for a
 * streamed body as soon as the bytes read pass the limit (the rest is never read).
 *
 * A body whose Content-Length decides is not touched here: a Node server discards a body the app
 * never opened once the answer is sent, keeping the connection, but one opened and left unread
 * stalls the connection until the server drops it, failing the client's next request on it.
 */
export const limitBody = (): MiddlewareHandler => {
  const tooLarge = (c: Context) =>
    c.json(
      {
        error: `Request body too large: at most ${MAX_BODY_BYTES} bytes are accepted (Inngest's event size limit). Send a shorter message or conversation.`,
      },
      413,
    );
  const bound = boundBody(MAX_BODY_BYTES, {
    declared: tooLarge,
    // A streamed body refused part-way is left unread: the connection cannot carry another request,
    // so the answer says so (Node then closes it) instead of promising keep-alive and dropping it.
    streamed: (c) => {
      c.header("Connection", "close");
      return tooLarge(c);
    },
  });
  return (c, next) => (bodiless(c.req.method) ? next() : bound(c, next));
};

/** A JSON media type: application/json, with or without parameters such as charset. */
const isJson = (contentType: string) => contentType.split(";")[0]!.trim().toLowerCase() === "application/json";

/**
 * The body stream of a request that declares no length, or null when it has none: no stream, or a
 * stream that ends before its first byte. A Node server hands a bodiless DELETE or POST (curl -X DELETE,
 * fetch without a body) a stream all the same, with neither a length nor a content type, and an
 * empty chunked body has no length either: only reading the first bytes tells. A body that is there
 * is given back whole (the bytes read, then the rest, unread).
 */
async function presentBody(request: Request): Promise<ReadableStream<Uint8Array> | null> {
  if (request.body === null) return null;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return null;
    if (value.byteLength === 0) continue;
    return new ReadableStream<Uint8Array>({
      start: (controller) => controller.enqueue(value),
      pull: async (controller) => {
        const next = await reader.read();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
  }
}

/** Reads a body to its end and drops it; past `limit` bytes it stops and cancels the rest. */
async function discard(body: ReadableStream<Uint8Array>, limit: number): Promise<void> {
  const reader = body.getReader();
  try {
    for (let read = 0; read <= limit; ) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The client went away: nothing left to discard.
  }
}

/** The request as it would be without a body: no stream, no content headers (a route reads `{}`). */
function withBody(request: Request, body: ReadableStream<Uint8Array> | null): Request {
  const headers = new Headers(request.headers);
  if (body === null) for (const name of ["content-type", "content-length", "transfer-encoding"]) headers.delete(name);
  return new Request(request.url, {
    method: request.method,
    headers,
    body,
    signal: request.signal,
    ...(body ? { duplex: "half" } : {}),
  } as RequestInit);
}

/**
 * A request without a body passes (a route whose body is optional reads it as `{}`, one that needs
 * fields names them in a 400), whatever its headers say; a body that is there must be declared as
 * JSON, or it is refused with 415 naming what was sent, instead of being read as an empty object
 * and answered that every field is missing.
 */
export const requireJsonBody = (): MiddlewareHandler => async (c, next) => {
  // Left as they came (an event stream keeps its request).
  if (bodiless(c.req.method)) return next();
  // A declared length tells without opening the body (see limitBody): one there is left to the
  // route, unopened, whether it reads it or not.
  const length = declaredLength(c);
  const body = length === undefined ? await presentBody(c.req.raw) : length > 0 ? "declared" : null;
  if (body === null) {
    if (length === 0 || c.req.raw.body !== null || c.req.raw.headers.has("content-type"))
      c.req.raw = withBody(c.req.raw, null);
    return next();
  }
  if (body !== "declared" && body !== c.req.raw.body) c.req.raw = withBody(c.req.raw, body);
  const contentType = c.req.header("content-type");
  if (contentType !== undefined && isJson(contentType)) return next();
  // Opened to learn it was there, so the server no longer discards it: read the rest away (up to
  // the body limit), or the connection stalls (see limitBody).
  if (body !== "declared") void discard(body, MAX_BODY_BYTES);
  const sent = contentType === undefined ? "no Content-Type header" : `Content-Type ${JSON.stringify(contentType)}`;
  return c.json(
    {
      error: `Unsupported media type: the body was sent with ${sent}; send it as JSON with "Content-Type: application/json".`,
    },
    415,
  );
};

/** The size of an event as sent to Inngest; throws EventTooLarge past Inngest's event size limit. */
export function checkEventSize(event: { name: string; data: Record<string, unknown> }): void {
  const bytes = jsonBytes(event);
  if (bytes > MAX_EVENT_BYTES - SDK_FIELDS_BYTES) throw new EventTooLarge(bytes, MAX_EVENT_BYTES - SDK_FIELDS_BYTES);
}
