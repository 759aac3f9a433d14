import http from "node:http";
import https from "node:https";
import zlib from "node:zlib";

/**
 * The fetch the app's Inngest client calls Inngest with (events, checkpoints, syncs): node:http
 * and node:https over keep-alive agents, the response body read whole into a standard Response.
 * Node's global fetch (undici) costs 0.5–0.9 ms of CPU per call in its WHATWG streams and request
 * machinery; this path is about half of that, and a checkpointed turn makes two or more such calls.
 *
 * It is a fetch for what the SDK sends: a string or byte body (or none), a URL or string, headers
 * in any form, redirects (the sync asks to follow them), an AbortSignal. Anything else (a Request,
 * a streamed body) goes to the global fetch unchanged. Failures reject with TypeError("fetch
 * failed", { cause }) as undici's do: the SDK reports other errors as a misconfigured fetch.
 */
export type KeepAliveFetch = typeof fetch & {
  /** Closes the idle connections (open ones close when their request ends). */
  close(): void;
};

/** Idle connections close after this long: below the 5 s idle timeout servers commonly use, as undici's 4 s default is. */
const IDLE_SOCKET_MS = 4_000;
/** How long a request may wait for its response's headers and then for each piece of its body: undici's defaults. */
const RESPONSE_TIMEOUT_MS = 300_000;
/** Fetch's limit on redirects followed. */
const MAX_REDIRECTS = 20;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** The methods fetch writes in upper case whatever the caller's case; others are sent as given. */
const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);

type Body = Buffer | undefined;

/** A keep-alive fetch with agents of its own (see KeepAliveFetch). */
export function keepAliveFetch(): KeepAliveFetch {
  const agents = {
    "http:": new http.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS }),
    "https:": new https.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS }),
  };

  const leanFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const body = bodyBytes(init.body);
    if (input instanceof Request || body === false) return globalThis.fetch(input, init);
    let url = new URL(input instanceof URL ? input.href : input);
    if (url.protocol !== "http:" && url.protocol !== "https:") return globalThis.fetch(input, init);
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();

    const upper = (init.method ?? "GET").toUpperCase();
    let method = NORMALIZED_METHODS.has(upper) ? upper : (init.method as string);
    const headers = headerRecord(init, body, method);
    let sent = body;
    for (let redirects = 0; ; redirects += 1) {
      const answer = await exchange(agents, url, method, headers, sent, signal);
      const location = answer.headers.location;
      if (!REDIRECT_STATUSES.has(answer.status) || location === undefined || init.redirect === "manual")
        return toResponse(answer, url, redirects > 0);
      if (init.redirect === "error") throw fetchFailed(new Error(`redirected (${answer.status}) to ${location}`));
      if (redirects === MAX_REDIRECTS) throw fetchFailed(new Error(`more than ${MAX_REDIRECTS} redirects`));
      const next = new URL(location, url);
      if (next.protocol !== "http:" && next.protocol !== "https:")
        throw fetchFailed(new Error(`redirected to a ${next.protocol} URL`));
      // As fetch does: a 303, or a 301/302 after a POST, is followed with a GET and no body.
      if (
        (answer.status === 303 && method !== "GET" && method !== "HEAD") ||
        ([301, 302].includes(answer.status) && method === "POST")
      ) {
        method = "GET";
        sent = undefined;
        for (const name of [
          "content-type",
          "content-length",
          "content-encoding",
          "content-language",
          "content-location",
        ])
          delete headers[name];
      }
      // Credentials are not carried to another origin.
      if (next.origin !== url.origin) {
        delete headers.authorization;
        delete headers.cookie;
        delete headers["proxy-authorization"];
      }
      url = next;
    }
  };

  return Object.assign(leanFetch as typeof fetch, {
    close: () => {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  });
}

/** The body as bytes; undefined for none; false for a kind this fetch leaves to the global one (streams, forms, blobs). */
function bodyBytes(body: RequestInit["body"]): Body | false {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  return false;
}

/** The request's headers by lower-case name, with what fetch adds: Accept, a body's length, a string body's type. */
function headerRecord(init: RequestInit, body: Body, method: string): Record<string, string> {
  const headers: Record<string, string> = {};
  // Headers validates names and values and joins repeated ones, as fetch does.
  for (const [name, value] of new Headers(init.headers)) headers[name] = value;
  headers.accept ??= "*/*";
  if (typeof init.body === "string") headers["content-type"] ??= "text/plain;charset=UTF-8";
  if (body !== undefined) headers["content-length"] = String(body.length);
  else if (method === "POST" || method === "PUT") headers["content-length"] = "0";
  return headers;
}

type Answer = { status: number; statusText: string; headers: http.IncomingHttpHeaders; raw: string[]; body: Body };

/** One request and its whole response; a request on a reused connection the server had closed is sent once more. */
async function exchange(
  agents: Record<"http:" | "https:", http.Agent>,
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: Body,
  signal: AbortSignal | undefined,
): Promise<Answer> {
  try {
    return await send(agents, url, method, headers, body, signal);
  } catch (error) {
    // A keep-alive connection the server closed while idle fails before any answer: the request was never read.
    if (!(error instanceof StaleConnection)) throw error;
    return send(agents, url, method, headers, body, signal);
  }
}

class StaleConnection extends Error {}

function send(
  agents: Record<"http:" | "https:", http.Agent>,
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: Body,
  signal: AbortSignal | undefined,
): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const request = (url.protocol === "https:" ? https : http).request(url, {
      method,
      headers,
      agent: agents[url.protocol as "http:" | "https:"],
      timeout: RESPONSE_TIMEOUT_MS,
    });
    let answered = false;
    const onAbort = () => {
      request.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const settle = () => signal?.removeEventListener("abort", onAbort);
    request.on("timeout", () => request.destroy(new Error(`no answer within ${RESPONSE_TIMEOUT_MS} ms`)));
    request.on("error", (error: NodeJS.ErrnoException) => {
      settle();
      if (signal?.aborted) return;
      if (!answered && request.reusedSocket && error.code === "ECONNRESET") reject(new StaleConnection());
      else reject(fetchFailed(error));
    });
    request.on("response", (response) => {
      answered = true;
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("error", (error) => {
        settle();
        if (!signal?.aborted) reject(fetchFailed(error));
      });
      response.on("close", () => {
        settle();
        if (!response.complete && !signal?.aborted)
          reject(fetchFailed(new Error("the connection closed before the response ended")));
      });
      response.on("end", () => {
        settle();
        try {
          resolve({
            status: response.statusCode ?? 0,
            statusText: response.statusMessage ?? "",
            headers: response.headers,
            raw: response.rawHeaders,
            body: method === "HEAD" ? undefined : decode(Buffer.concat(chunks), response.headers["content-encoding"]),
          });
        } catch (error) {
          reject(fetchFailed(error));
        }
      });
    });
    request.end(body);
  });
}

/** A body as fetch hands it over: decoded when the server compressed it (this fetch does not ask it to). */
function decode(body: Buffer, encoding: string | undefined): Buffer {
  switch (encoding?.trim().toLowerCase()) {
    case undefined:
    case "":
    case "identity":
      return body;
    case "gzip":
    case "x-gzip":
      return zlib.gunzipSync(body);
    case "deflate":
      return zlib.inflateSync(body);
    case "br":
      return zlib.brotliDecompressSync(body);
    default:
      throw new Error(`unsupported content-encoding ${encoding}`);
  }
}

function toResponse(answer: Answer, url: URL, redirected: boolean): Response {
  const headers = new Headers();
  for (let i = 0; i < answer.raw.length; i += 2) headers.append(answer.raw[i]!, answer.raw[i + 1]!);
  let response: Response;
  try {
    response = new Response(
      NULL_BODY_STATUSES.has(answer.status) ? null : ((answer.body as Uint8Array<ArrayBuffer> | undefined) ?? null),
      {
        status: answer.status,
        statusText: answer.statusText,
        headers,
      },
    );
  } catch (error) {
    // A status outside 200–599 or a malformed status text: undici fails such a response too.
    throw fetchFailed(error);
  }
  // What fetch's response says about where it came from (a constructed Response has neither).
  Object.defineProperties(response, { url: { value: url.href }, redirected: { value: redirected } });
  return response;
}

const fetchFailed = (cause: unknown) => new TypeError("fetch failed", { cause });
