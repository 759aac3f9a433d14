import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { INNGEST_EVENT_LIMIT_BYTES } from "../../inngest.config.js";
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
 * Refuses a body over MAX_BODY_BYTES with 413: at once when its Content-Length says so, and for a
 * streamed body as soon as the bytes read pass the limit (the rest is never read).
 */
export const limitBody = (): MiddlewareHandler =>
  bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) =>
      c.json({ error: `Request body too large: at most ${MAX_BODY_BYTES} bytes are accepted (Inngest's event size limit). Send a shorter message or conversation.` }, 413),
  });

/** A JSON media type: application/json, with or without parameters such as charset. */
const isJson = (contentType: string) => contentType.split(";")[0]!.trim().toLowerCase() === "application/json";

/**
 * Refuses a request body that is not declared as JSON with 415 naming what was sent, instead of
 * reading it as an empty object and answering that every field is missing.
 */
export const requireJsonBody = (): MiddlewareHandler => async (c, next) => {
  if (c.req.raw.body === null || c.req.header("content-length") === "0") return next();
  const contentType = c.req.header("content-type");
  if (contentType !== undefined && isJson(contentType)) return next();
  const sent = contentType === undefined ? "no Content-Type header" : `Content-Type ${JSON.stringify(contentType)}`;
  return c.json({ error: `Unsupported media type: the body was sent with ${sent}; send it as JSON with "Content-Type: application/json".` }, 415);
};

/** The size of an event as sent to Inngest; throws EventTooLarge past Inngest's event size limit. */
export function checkEventSize(event: { name: string; data: Record<string, unknown> }): void {
  const bytes = Buffer.byteLength(JSON.stringify(event), "utf8");
  if (bytes > MAX_EVENT_BYTES - SDK_FIELDS_BYTES) throw new EventTooLarge(bytes, MAX_EVENT_BYTES - SDK_FIELDS_BYTES);
}
