import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { inngestClient } from "../src/platform/inngest-serve.js";
import { keepAliveFetch } from "../src/platform/keep-alive-fetch.js";

// The fetch the app's Inngest client calls Inngest with, against a real loopback HTTP server whose
// routes answer as Inngest (or a proxy in front of it) may: statuses, headers, bodies, redirects,
// compression, a dropped connection, a slow answer.

type Seen = { method: string; path: string; headers: IncomingMessage["headers"]; body: string; socket: Socket };
let server: Server;
let base: string;
const seen: Seen[] = [];
const fetch = keepAliveFetch();
/** Resolves the slow route's pending answers (each answered when a test says so). */
const slow: ServerResponse[] = [];

const routes: Record<string, (req: IncomingMessage, res: ServerResponse, body: string) => void> = {
  "/json": (_req, res) =>
    res
      .writeHead(201, "Made", [
        ["content-type", "application/json"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
        ["x-reply", "yes"],
      ])
      .end(JSON.stringify({ ids: ["evt-1"], status: 200 })),
  "/echo": (req, res, body) =>
    res.writeHead(200, { "content-type": "text/plain" }).end(`${req.method} ${body} ${req.headers["content-length"]}`),
  "/missing": (_req, res) => res.writeHead(404, { "content-type": "text/plain" }).end("no such thing"),
  "/empty": (_req, res) => res.writeHead(204).end(),
  "/gzip": (_req, res) =>
    res.writeHead(200, { "content-type": "text/plain", "content-encoding": "gzip" }).end(gzipSync("unzipped")),
  "/see-other": (_req, res) => res.writeHead(303, { location: "/echo" }).end(),
  "/temporary": (_req, res) => res.writeHead(307, { location: `${base}/echo` }).end(),
  "/loop": (_req, res) => res.writeHead(302, { location: "/loop" }).end(),
  "/cut": (req) => req.socket.destroy(),
  "/half": (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain", "content-length": "100" });
    res.write("only part");
    setImmediate(() => res.socket?.destroy());
  },
  "/slow": (_req, res) => {
    slow.push(res);
  },
  "/e/test-key": (_req, res) =>
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ids: ["evt-42"], status: 200 })),
};

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const url = new URL(req.url ?? "/", "http://x");
    seen.push({ method: req.method ?? "", path: url.pathname, headers: req.headers, body, socket: req.socket });
    const route = routes[url.pathname];
    if (route) route(req, res, body);
    else res.writeHead(500).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  seen.length = 0;
  for (const res of slow.splice(0)) res.end();
});
afterAll(async () => {
  fetch.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("keepAliveFetch", () => {
  it("answers a response with its status, status text, every header and its JSON body", async () => {
    const response = await fetch(`${base}/json`);
    expect(response.status).toBe(201);
    expect(response.ok).toBe(true);
    expect(response.statusText).toBe("Made");
    expect(response.url).toBe(`${base}/json`);
    expect(response.redirected).toBe(false);
    expect(response.headers.get("x-reply")).toBe("yes");
    expect(response.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    // The SDK reads a clone's text when the JSON does not parse.
    expect(await response.clone().text()).toBe('{"ids":["evt-1"],"status":200}');
    expect(await response.json()).toEqual({ ids: ["evt-1"], status: 200 });
  });

  it("sends the method, the headers in any form and a string or byte body with its length", async () => {
    const text = await fetch(new URL(`${base}/echo`), {
      method: "post",
      body: "héllo",
      headers: new Headers({ "X-Inngest-Sdk": "js", Authorization: "Bearer k" }),
    });
    expect(await text.text()).toBe("POST héllo 6");
    expect(seen[0]?.headers).toMatchObject({ "x-inngest-sdk": "js", authorization: "Bearer k", accept: "*/*" });

    const bytes = await fetch(`${base}/echo`, {
      method: "PUT",
      body: new TextEncoder().encode("bytes"),
      headers: [["content-type", "application/octet-stream"]],
    });
    expect(await bytes.text()).toBe("PUT bytes 5");
    expect(seen[1]?.headers["content-type"]).toBe("application/octet-stream");
  });

  it("answers an error status as a response, not a rejection, and a 204 with no body", async () => {
    const missing = await fetch(`${base}/missing`);
    expect(missing.status).toBe(404);
    expect(missing.ok).toBe(false);
    expect(await missing.text()).toBe("no such thing");

    const empty = await fetch(`${base}/empty`, { method: "POST", body: "{}" });
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
  });

  it("decodes a compressed body", async () => {
    expect(await (await fetch(`${base}/gzip`)).text()).toBe("unzipped");
  });

  it("keeps the connection open between requests", async () => {
    await (await fetch(`${base}/echo`, { method: "POST", body: "1" })).text();
    await (await fetch(`${base}/echo`, { method: "POST", body: "2" })).text();
    expect(seen).toHaveLength(2);
    expect(seen[1]?.socket).toBe(seen[0]?.socket);
  });

  it("sends a request again on a new connection when the server closed the kept one", async () => {
    await (await fetch(`${base}/echo`, { method: "POST", body: "1" })).text();
    const first = seen[0]!.socket;
    // The server drops the idle connection without the client noticing first.
    first.destroy();
    const again = await fetch(`${base}/echo`, { method: "POST", body: "2" });
    expect(await again.text()).toBe("POST 2 1");
    expect(seen.at(-1)?.socket).not.toBe(first);
  });

  it("follows redirects as fetch does: a 303 with a GET, a 307 with the same method and body", async () => {
    const seeOther = await fetch(`${base}/see-other`, { method: "POST", body: "x" });
    expect(await seeOther.text()).toBe("GET  undefined");
    expect(seeOther.redirected).toBe(true);
    expect(seeOther.url).toBe(`${base}/echo`);

    const temporary = await fetch(`${base}/temporary`, { method: "POST", body: "kept", redirect: "follow" });
    expect(await temporary.text()).toBe("POST kept 4");

    const manual = await fetch(`${base}/temporary`, { method: "POST", body: "kept", redirect: "manual" });
    expect(manual.status).toBe(307);
    expect(manual.headers.get("location")).toBe(`${base}/echo`);

    await expect(fetch(`${base}/temporary`, { redirect: "error" })).rejects.toThrow("fetch failed");
    await expect(fetch(`${base}/loop`)).rejects.toMatchObject({
      message: "fetch failed",
      cause: { message: "more than 20 redirects" },
    });
  });

  it("rejects with TypeError('fetch failed') when there is no server, or the connection breaks", async () => {
    const closed = createServer();
    closed.listen(0, "127.0.0.1");
    await once(closed, "listening");
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));

    const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TypeError);
    expect(refused).toMatchObject({ message: "fetch failed", cause: { code: "ECONNREFUSED" } });

    await expect(fetch(`${base}/cut`, { method: "POST", body: "x" })).rejects.toThrow("fetch failed");
    await expect(fetch(`${base}/half`)).rejects.toThrow("fetch failed");
  });

  it("rejects with the signal's reason when aborted before or while waiting for the answer", async () => {
    const aborted = new AbortController();
    aborted.abort(new Error("gave up early"));
    await expect(fetch(`${base}/echo`, { signal: aborted.signal })).rejects.toThrow("gave up early");

    const controller = new AbortController();
    const pending = fetch(`${base}/slow`, { method: "POST", body: "x", signal: controller.signal });
    await expect.poll(() => slow.length).toBe(1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });

  it("leaves a streamed body to the global fetch", async () => {
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("streamed"));
        controller.close();
      },
    });
    const response = await fetch(`${base}/echo`, { method: "POST", body, duplex: "half" } as RequestInit);
    expect(await response.text()).toBe("POST streamed undefined");
  });
});

describe("the app's Inngest client", () => {
  it("sends events through it to the configured Inngest server", async () => {
    const previous = { key: process.env.INNGEST_EVENT_KEY, url: process.env.INNGEST_BASE_URL };
    process.env.INNGEST_EVENT_KEY = "test-key";
    process.env.INNGEST_BASE_URL = base;
    try {
      const client = inngestClient({ mode: "dev" });
      await expect(client.send({ name: "test/sent", data: { n: 1 } })).resolves.toEqual({ ids: ["evt-42"] });
      const request = seen.find((s) => s.path === "/e/test-key");
      expect(request?.method).toBe("POST");
      expect(JSON.parse(request?.body ?? "[]")).toMatchObject([{ name: "test/sent", data: { n: 1 } }]);
      expect(request?.headers["x-inngest-sdk"]).toMatch(/^inngest-js:v/);
      // Node's global fetch (undici) would have sent its browser-style fetch metadata.
      expect(request?.headers["sec-fetch-mode"]).toBeUndefined();
    } finally {
      for (const [name, value] of [
        ["INNGEST_EVENT_KEY", previous.key],
        ["INNGEST_BASE_URL", previous.url],
      ] as const)
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
    }
  });
});
