import { randomUUID } from "node:crypto";
import http from "node:http";
import net from "node:net";
import pg from "pg";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { checkEventSize, MAX_BODY_BYTES, MAX_EVENT_BYTES } from "../src/api/bounded-input.js";
import { EventTooLarge } from "../src/api/errors.js";
import { logger } from "../src/platform/logger.js";
import { createApp } from "../src/server.js";
import { until } from "./helpers/deadline.js";
import { countRows } from "./helpers/fixtures.js";
import { testAuth, tokenFor, listen } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let sent: { name: string; data: Record<string, unknown> }[];
let app: ReturnType<typeof createApp>;
/** The caller's credentials: every API request is authenticated before its body is looked at. */
let auth: { authorization: string };
const appWith = (db: pg.Pool, sendEvent: Parameters<typeof createApp>[0]["sendEvent"]) =>
  createApp({ db, functions: [], sendEvent, auth: testAuth, serving: { mode: "dev" } });
beforeAll(async () => {
  app = appWith(bed.db.pool, async (event) => (sent.push(event), { ids: ["evt-1"] }));
  auth = { authorization: `Bearer ${await tokenFor("u1")}` };
});
beforeEach(() => {
  sent = [];
});
afterEach(() => {
  vi.restoreAllMocks();
});

const chatBody = (content = "Hello") => JSON.stringify({ messageId: randomUUID(), content });
const errorOf = async (response: Response) => ((await response.json()) as { error: string }).error;

/** A database server that is not there: what the app sees while PostgreSQL is down. */
const unreachableDatabase = () =>
  new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/none", connectionTimeoutMillis: 2_000 });

describe("content type", () => {
  it("refuses a body not sent as JSON with 415 naming the content type, sending and writing nothing", async () => {
    const before = await countRows(bed.db.pool);
    const cases: [string, RequestInit, RegExp][] = [
      ["/api/chat", { headers: { ...auth, "content-type": "text/plain" }, body: chatBody() }, /"text\/plain"/],
      [
        "/api/chat",
        { headers: { ...auth, "content-type": "application/x-www-form-urlencoded" }, body: "messageId=x&content=hi" },
        /"application\/x-www-form-urlencoded"/,
      ],
      ["/api/chat", { headers: auth, body: new TextEncoder().encode(chatBody()) }, /no Content-Type header/],
      [
        `/api/threads/${randomUUID()}/messages/${randomUUID()}/regenerate`,
        { headers: { ...auth, "content-type": "multipart/form-data; boundary=x" }, body: "--x--" },
        /multipart\/form-data/,
      ],
    ];
    for (const [path, init, named] of cases) {
      const response = await app.request(path, { method: "POST", ...init });
      expect(response.status, path).toBe(415);
      const error = await errorOf(response);
      expect(error).toMatch(named);
      expect(error).toContain("application/json");
    }
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("accepts application/json with parameters, in any case", async () => {
    const response = await app.request("/api/chat", {
      method: "POST",
      headers: { ...auth, "content-type": "Application/JSON; charset=utf-8" },
      body: chatBody(),
    });
    expect(response.status).toBe(202);
  });
});

describe("body size", () => {
  it("refuses a streamed body over the limit with 413 after reading just past the limit, never the whole body", async () => {
    const chunk = new Uint8Array(16 * 1024).fill(0x20);
    const chunks = 4_096; // 64 MiB in all
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 1;
        if (pulled === 1) controller.enqueue(new TextEncoder().encode('{"content":"'));
        else if (pulled > chunks) controller.close();
        else controller.enqueue(chunk);
      },
    });
    const response = await app.request(
      new Request("http://localhost/api/chat", {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body,
        duplex: "half",
      } as RequestInit),
    );
    expect(response.status).toBe(413);
    expect(await errorOf(response)).toContain(`at most ${MAX_BODY_BYTES} bytes`);
    expect(pulled * chunk.length).toBeLessThan(MAX_BODY_BYTES + 4 * chunk.length);
    expect(sent).toEqual([]);
  });

  it("over real HTTP, answers 413 on a Content-Length over the limit while the client has sent only its first bytes", async () => {
    const { port, close } = await listen(app.fetch);
    try {
      const declared = 64 * 1024 * 1024;
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = http.request({
          host: "127.0.0.1",
          port,
          path: "/api/chat",
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "content-length": declared },
        });
        request.on("response", (response) => {
          let body = "";
          response.on("data", (data: Buffer) => (body += data.toString()));
          response.on("end", () => {
            request.destroy();
            resolve({ status: response.statusCode ?? 0, body });
          });
        });
        request.on("error", reject);
        // 64 KiB of the declared 64 MiB, and never the rest.
        request.write(Buffer.alloc(64 * 1024, 0x20));
      });
      expect(answer.status).toBe(413);
      expect(answer.body).toContain("too large");
      expect(sent).toEqual([]);
    } finally {
      await close();
    }
  });

  it("refuses a body within the limit whose event Inngest would refuse for its size: 413 naming the size, before sending, never a 503 inviting a resend", async () => {
    // Within the body limit, but over Inngest's event limit once made an event: the event schemas
    // refuse the conversation's size first (413 naming the field); the measured event backs them up.
    const body = JSON.stringify({
      messageId: randomUUID(),
      content: "Hello",
      conversation: [{ type: "text", role: "user", content: "x".repeat(MAX_BODY_BYTES - 200) }],
    });
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(MAX_BODY_BYTES);
    const response = await app.request("/api/chat", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body,
    });
    expect(response.status).toBe(413);
    expect(await errorOf(response)).toMatch(/\d+ bytes/);
    expect(sent).toEqual([]);
  });

  it("measures an event as sent: one over Inngest's event size limit is refused, naming its size and the limit", () => {
    const event = (bytes: number) => ({ name: "chat/message.sent", data: { content: "x".repeat(bytes) } });
    expect(() => checkEventSize(event(MAX_EVENT_BYTES - 2_000))).not.toThrow();
    expect(() => checkEventSize(event(MAX_EVENT_BYTES))).toThrow(EventTooLarge);
    expect(() => checkEventSize(event(MAX_EVENT_BYTES))).toThrow(
      /event of \d+ bytes, over the \d+ bytes Inngest accepts/,
    );
    // Measured in UTF-8 bytes, not characters: 100,000 three-byte characters are 300,000 bytes.
    expect(() => checkEventSize({ name: "x", data: { content: "€".repeat(100_000) } })).toThrow(EventTooLarge);
  });
});

/**
 * Two requests written byte for byte on one keep-alive connection, back to back as a client
 * pipelines them: the first whole (head and body, with its Content-Length or in `chunks`), then the second. The statuses of the answers
 * the connection gave, and whether it was still open a second after them (Node keeps an idle
 * keep-alive connection 5 s).
 */
async function twoOnOneConnection(
  port: number,
  first: { head: string; body: string; chunks?: number },
  second: string,
) {
  const socket = net.connect(port, "127.0.0.1");
  let received = "";
  let closed = false;
  socket.on("data", (data: Buffer) => (received += data.toString("latin1")));
  socket.on("close", () => (closed = true));
  socket.on("error", () => undefined);
  const statuses = () => [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
  try {
    if (!first.chunks)
      socket.write(`${first.head}Content-Length: ${Buffer.byteLength(first.body)}\r\n\r\n${first.body}`);
    else {
      // Sent as a client streams it: in chunks, its length unknown until the end.
      const size = Math.ceil(first.body.length / first.chunks);
      const chunks = Array.from({ length: first.chunks }, (_, i) => first.body.slice(i * size, (i + 1) * size));
      socket.write(
        `${first.head}Transfer-Encoding: chunked\r\n\r\n${chunks.map((chunk) => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join("")}0\r\n\r\n`,
      );
    }
    socket.write(second);
    await until(() => statuses().length === 2 || closed, "the second answer, or the connection closing");
    const closedSoon = await until(() => closed, "the server closing the connection", 1_000).then(
      () => true,
      () => false,
    );
    return { statuses: statuses(), closedSoon };
  } finally {
    socket.destroy();
  }
}

describe("a refused or unread body leaves the connection usable", () => {
  it("over real HTTP, the request after a 413, a 415 or a route that reads no body is answered on the same keep-alive connection, which stays open", async () => {
    const { port, close } = await listen(app.fetch);
    const head = (method: string, path: string, contentType = "application/json") =>
      `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth.authorization}\r\nContent-Type: ${contentType}\r\n`;
    const next = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    // Bodies larger than a socket's buffers: one left unread stalls the connection.
    const tooLarge = JSON.stringify({ messageId: randomUUID(), content: "x".repeat(4 * MAX_BODY_BYTES) });
    const large = JSON.stringify({ note: "y".repeat(MAX_BODY_BYTES - 1_000) });
    try {
      const cases: [string, { head: string; body: string; chunks?: number }, number][] = [
        ["a message over the body limit", { head: head("POST", "/api/chat"), body: tooLarge }, 413],
        ["a large body not sent as JSON", { head: head("POST", "/api/chat", "text/plain"), body: large }, 415],
        [
          "a large chunked body not sent as JSON",
          { head: head("POST", "/api/chat", "text/plain"), body: large, chunks: 16 },
          415,
        ],
        [
          "a large chunked body on a DELETE",
          { head: head("DELETE", `/api/threads/${randomUUID()}`), body: large, chunks: 16 },
          404,
        ],
        ["a large body on a DELETE", { head: head("DELETE", `/api/threads/${randomUUID()}`), body: large }, 404],
        ["a large body to no route", { head: head("POST", "/api/no-such-route"), body: large }, 404],
      ];
      for (const [name, first, status] of cases)
        expect(await twoOnOneConnection(port, first, next), name).toEqual({
          statuses: [status, 200],
          closedSoon: false,
        });
      expect(sent).toEqual([]);
    } finally {
      await close();
    }
  });
});

describe("a streamed body over the limit", () => {
  it("over real HTTP, is answered 413 with Connection: close, and the connection closes (the rest is never read)", async () => {
    const { port, close } = await listen(app.fetch);
    const socket = net.connect(port, "127.0.0.1");
    let received = "";
    let closed = false;
    socket.on("data", (data: Buffer) => (received += data.toString("latin1")));
    socket.on("close", () => (closed = true));
    socket.on("error", () => undefined);
    try {
      const chunk = "x".repeat(64 * 1024);
      socket.write(
        `POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      // Twice the limit, streamed: the client learns from the answer not to reuse the connection.
      for (let sent = 0; sent < 2 * MAX_BODY_BYTES && !closed; sent += chunk.length)
        socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      await until(() => closed, "the server closing the connection after its answer");
      const head = received.slice(0, received.indexOf("\r\n\r\n"));
      expect(head).toMatch(/^HTTP\/1\.1 413 /);
      expect(head).toMatch(/\r\nconnection: close\r\n/i);
      expect(sent).toEqual([]);
    } finally {
      socket.destroy();
      await close();
    }
  });
});

describe("errors carry a request id, never internals", () => {
  it("answers every request with an X-Request-Id, keeping a well-formed one the caller sent", async () => {
    const fresh = await app.request("/health");
    expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const traced = await app.request("/health", { headers: { "x-request-id": "trace-42" } });
    expect(traced.headers.get("x-request-id")).toBe("trace-42");
  });

  it("503 for an unsent event: says what to do and gives the request id; Inngest's error is logged, not returned", async () => {
    const logged = vi.spyOn(logger, "error");
    const offline = appWith(bed.db.pool, () =>
      Promise.reject(new Error("connect ECONNREFUSED 10.1.2.3:8288 (event key evt_SECRET)")),
    );
    const response = await offline.request("/api/chat", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: chatBody(),
    });
    expect(response.status).toBe(503);
    const requestId = response.headers.get("x-request-id");
    const body = (await response.json()) as { error: string; requestId: string };
    expect(body.requestId).toBe(requestId);
    expect(body.error).toMatch(/send the same request again/);
    expect(body.error).toContain(requestId);
    expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|10\.1\.2\.3|SECRET/);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(logged).toHaveBeenCalledWith(
      expect.objectContaining({
        requestId,
        err: expect.objectContaining({ message: expect.stringContaining("ECONNREFUSED") }),
      }),
      expect.any(String),
    );
  });

  it("/health with the database down: 503 {status, database} and the request id, the PostgreSQL error only in the log", async () => {
    const logged = vi.spyOn(logger, "error");
    const db = unreachableDatabase();
    try {
      const response = await appWith(db, async () => ({ ids: [] })).request("/health");
      expect(response.status).toBe(503);
      const requestId = response.headers.get("x-request-id");
      expect(await response.json()).toEqual({ status: "unavailable", database: "unreachable", requestId });
      expect(logged).toHaveBeenCalledWith(
        expect.objectContaining({ requestId, err: expect.any(Error) }),
        expect.any(String),
      );
    } finally {
      await db.end();
    }
  });

  it("a 500 answers a generic message with the request id; the fault is logged with it", async () => {
    const logged = vi.spyOn(logger, "error");
    const db = unreachableDatabase();
    try {
      const response = await appWith(db, async () => ({ ids: [] })).request(`/api/threads/${randomUUID()}/messages`, {
        headers: auth,
      });
      expect(response.status).toBe(500);
      const requestId = response.headers.get("x-request-id")!;
      const body = (await response.json()) as { error: string; requestId: string };
      expect(body).toEqual({ error: expect.stringContaining(requestId), requestId });
      expect(body.error).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres/i);
      const [fields] = logged.mock.calls.at(-1)!;
      expect(fields).toMatchObject({ requestId, err: { message: expect.stringMatching(/ECONNREFUSED/) } });
    } finally {
      await db.end();
    }
  });
});
