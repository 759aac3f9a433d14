import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readEnvironment } from "../src/config.js";
import { hasChromium, launchChromium, reportMissingChromium } from "./helpers/chromium.js";
import { createTestApp, headersFor, listen, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A browser app on another origin (a web app using useChat with Threadline's URL) may call the API
 * when its origin is listed in CORS_ORIGINS: the preflight is answered without credentials, and
 * every answer (errors and event streams included) names the origin. Unlisted origins, and every
 * origin when nothing is listed, get no CORS headers, as before. Over real HTTP, and in chromium.
 */
const bed = useTestBed();
const userId = "user-1";

/** The web app's own origin: a server answering one blank page. */
let webApp: Server;
let webOrigin: string;
let open: Listening;
let closed: Listening;
let browser: Browser | undefined;

beforeAll(async () => {
  webApp = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html>"));
  await new Promise<void>((resolve) => webApp.listen(0, "127.0.0.1", resolve));
  webOrigin = `http://127.0.0.1:${(webApp.address() as AddressInfo).port}`;
  open = await listen(createTestApp(bed.db.pool, { corsOrigins: [webOrigin] }).app.fetch);
  closed = await listen(createTestApp(bed.db.pool).app.fetch);
  if (hasChromium) browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await open?.close();
  await closed?.close();
  await new Promise((resolve) => webApp?.close(resolve));
});

/** A request as a browser sends it from `origin`; the answer's status and headers (the body is drained). */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
      res.destroy();
    });
    req.once("error", reject);
    req.end();
  });
}

const preflight = (base: string, origin: string) =>
  send(base, "OPTIONS", "/api/ui/chat", {
    origin,
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization,content-type",
  });

describe("CORS_ORIGINS", () => {
  it("reads a comma-separated list of origins, refusing what a browser never sends as one", () => {
    expect(readEnvironment({ CORS_ORIGINS: "https://app.example.com, http://localhost:3000" }).CORS_ORIGINS).toEqual([
      "https://app.example.com",
      "http://localhost:3000",
    ]);
    expect(readEnvironment({}).CORS_ORIGINS).toBeUndefined();
    for (const value of ["https://app.example.com/", "https://app.example.com/chat", "*", "app.example.com"])
      expect(() => readEnvironment({ CORS_ORIGINS: value }), value).toThrow(/CORS_ORIGINS/);
  });

  it("a listed origin's preflight is answered without credentials, naming the methods and headers the API takes", async () => {
    const answer = await preflight(open.url, webOrigin);
    expect(answer.status).toBe(204);
    expect(answer.headers["access-control-allow-origin"]).toBe(webOrigin);
    expect(String(answer.headers["access-control-allow-methods"]).split(",")).toEqual(
      expect.arrayContaining(["GET", "POST", "PATCH", "DELETE"]),
    );
    expect(String(answer.headers["access-control-allow-headers"]).toLowerCase().split(",")).toEqual(
      expect.arrayContaining(["authorization", "content-type", "last-event-id"]),
    );
  });

  it("every answer to a listed origin names it, a refusal and an event stream included", async () => {
    const auth = await headersFor(userId);
    const list = await send(open.url, "GET", "/api/threads", { origin: webOrigin, authorization: auth.authorization! });
    expect(list.status).toBe(200);
    expect(list.headers["access-control-allow-origin"]).toBe(webOrigin);
    expect(String(list.headers["access-control-expose-headers"]).toLowerCase()).toContain("x-request-id");
    const refused = await send(open.url, "GET", "/api/threads", { origin: webOrigin });
    expect(refused.status).toBe(401);
    expect(refused.headers["access-control-allow-origin"]).toBe(webOrigin);
    const unknown = await send(open.url, "GET", `/api/threads/${randomUUID()}/events`, {
      origin: webOrigin,
      authorization: auth.authorization!,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.headers["access-control-allow-origin"]).toBe(webOrigin);

    const created = await fetch(`${open.url}/api/threads`, { method: "POST", headers: auth, body: "{}" });
    const { id } = (await created.json()) as { id: string };
    const stream = await send(open.url, "GET", `/api/threads/${id}/events?after=0`, {
      origin: webOrigin,
      authorization: auth.authorization!,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers["content-type"]).toContain("text/event-stream");
    expect(stream.headers["access-control-allow-origin"]).toBe(webOrigin);
  });

  it("a method a path does not take is a 405 that names a listed origin, and a preflight asking for any method is still answered", async () => {
    const path = `/api/threads/${randomUUID()}`;
    const signedIn = { origin: webOrigin, authorization: (await headersFor(userId)).authorization! };
    for (const headers of [signedIn, { origin: webOrigin }] as Record<string, string>[]) {
      const refused = await send(open.url, "PUT", path, headers);
      expect(refused.status).toBe(405);
      expect(refused.headers.allow).toBe("GET, HEAD, PATCH, DELETE");
      expect(refused.headers["access-control-allow-origin"]).toBe(webOrigin);
    }
    for (const method of ["PUT", "PATCH"]) {
      const answer = await send(open.url, "OPTIONS", path, {
        origin: webOrigin,
        "access-control-request-method": method,
      });
      expect(answer.status, method).toBe(204);
      expect(answer.headers["access-control-allow-origin"], method).toBe(webOrigin);
    }
  });

  it("an unlisted origin, and any origin when none is listed, gets no CORS headers", async () => {
    for (const [base, origin] of [
      [open.url, "https://elsewhere.example"],
      [closed.url, webOrigin],
    ] as const) {
      expect((await preflight(base, origin)).headers["access-control-allow-origin"], base).toBeUndefined();
      const list = await send(base, "GET", "/api/threads", {
        origin,
        authorization: (await headersFor(userId)).authorization!,
      });
      expect(list.headers["access-control-allow-origin"], base).toBeUndefined();
    }
  });
});

describe("a web app on another origin, in chromium", () => {
  if (!hasChromium) return reportMissingChromium("a web app on another origin, in chromium");

  it("lists the user's threads from its page when its origin is listed, and is refused by the browser when not", async () => {
    const authorization = (await headersFor(userId)).authorization!;
    const page = await browser!.newPage();
    await page.goto(`${webOrigin}/`);
    const call = (base: string) =>
      page.evaluate(
        async ({ base, authorization }) => {
          try {
            const answer = await fetch(`${base}/api/threads`, {
              method: "POST",
              headers: { authorization, "content-type": "application/json" },
              body: JSON.stringify({ title: "From the web app" }),
            });
            return { status: answer.status, requestId: answer.headers.get("x-request-id") !== null };
          } catch (error) {
            return { failed: String(error) };
          }
        },
        { base, authorization },
      );
    // A JSON POST with a bearer token: the browser sends a preflight first.
    expect(await call(open.url)).toEqual({ status: 201, requestId: true });
    expect(await call(closed.url)).toEqual({ failed: expect.stringContaining("Failed to fetch") });
    await page.close();
  });
});
