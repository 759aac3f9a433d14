import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";

/**
 * The body's length as its Content-Length header declares it (the HTTP server holds a body to it),
 * or undefined when the length is only known by reading: no header, or a chunked body.
 */
export const declaredLength = (c: Context): number | undefined => {
  const length = c.req.header("content-length");
  if (length === undefined || c.req.header("transfer-encoding") !== undefined || !/^\d+$/.test(length))
    return undefined;
  return Number(length);
};

/**
 * Bounds a request's body to `maxSize` bytes. A declared length is judged from its header alone and
 * the body left unopened: Node's parser reads no more than it, and discards a body the app never
 * opened once the answer is sent, keeping the connection (bodyLimit would first build a Fetch
 * Request and a web stream over it). A streamed body is read through bodyLimit, refused as soon as
 * the bytes read pass the bound. `refuse` answers each case.
 */
export function boundBody(
  maxSize: number,
  refuse: { declared: (c: Context) => Response; streamed: (c: Context) => Response },
): MiddlewareHandler {
  const streamed = bodyLimit({ maxSize, onError: refuse.streamed });
  return async (c, next) => {
    const length = declaredLength(c);
    if (length === undefined) return streamed(c, next);
    return length > maxSize ? refuse.declared(c) : next();
  };
}
