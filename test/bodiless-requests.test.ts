import { randomUUID } from "node:crypto";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { ensureThread } from "../src/history/store.js";
import { remember } from "../src/history/memories.js";
import { scriptedModel, threadWithRunningTurn, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, tokenFor, listen, type Listening } from "./helpers/http.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * Requests without a body, as real clients send them to a listening server: a Node server hands
 * the app a body stream even then, so an in-process `app.request` with a null body proves nothing.
 */
const bed = useTestBed();

let server: Listening;
let chatTurn: ReturnType<typeof createChatTurn>;
beforeAll(async () => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  const { app } = createTestApp(bed.db.pool);
  server = await listen(app.fetch);
});
afterAll(() => server.close());

type Answer = { status: number; body: string };

/**
 * One HTTP/1.1 request written byte for byte on a socket, as curl writes it: `curl -X DELETE url`
 * sends neither Content-Length nor Transfer-Encoding; `chunked` adds an empty chunked body.
 */
function rawRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: "none" | "empty-chunked" = "none",
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.port, "127.0.0.1");
    let received = "";
    socket.on("data", (data) => (received += data.toString()));
    socket.on("error", reject);
    socket.on("end", () => {
      const [head = "", ...rest] = received.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      resolve({ status, body: rest.join("\r\n\r\n") });
    });
    const lines = [
      `${method} ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${server.port}`,
      "User-Agent: curl/8.5.0",
      "Accept: */*",
      "Connection: close",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    if (body === "empty-chunked") lines.push("Transfer-Encoding: chunked");
    socket.write(`${lines.join("\r\n")}\r\n\r\n${body === "empty-chunked" ? "0\r\n\r\n" : ""}`);
  });
}

const url = (path: string) => `${server.url}${path}`;
const bearer = async (userId: string) => ({ authorization: `Bearer ${await tokenFor(userId)}` });

/** A user with one thread and one memory, both there to be deleted. */
async function userWithThreadAndMemory() {
  const userId = `user-${randomUUID()}`;
  const threadId = randomUUID();
  await ensureThread(bed.db.pool, threadId, userId);
  await remember(bed.db.pool, { userId, threadId, text: "Likes tea" });
  return { userId, threadId };
}

describe("requests without a body, over real HTTP", () => {
  it("curl -X DELETE (no length, no content type) deletes the thread (200) and the memories (200), never 415", async () => {
    const { userId, threadId } = await userWithThreadAndMemory();
    const auth = await bearer(userId);
    const thread = await rawRequest("DELETE", `/api/threads/${threadId}`, auth);
    expect(thread.status, thread.body).toBe(200);
    expect(JSON.parse(thread.body)).toMatchObject({ threadId, deleted: true });
    const memories = await rawRequest("DELETE", "/api/memories", auth);
    expect(memories.status, memories.body).toBe(200);
    expect(JSON.parse(memories.body)).toEqual({ deleted: 1 });
    expect((await rawRequest("GET", `/api/threads/${threadId}`, auth)).status).toBe(404);
  });

  it("an empty chunked body counts as no body, whatever its content type says", async () => {
    const { userId, threadId } = await userWithThreadAndMemory();
    const auth = await bearer(userId);
    expect((await rawRequest("DELETE", "/api/memories", auth, "empty-chunked")).status).toBe(200);
    const thread = await rawRequest(
      "DELETE",
      `/api/threads/${threadId}`,
      { ...auth, "Content-Type": "application/json" },
      "empty-chunked",
    );
    expect(thread.status, thread.body).toBe(200);
  });

  it("fetch DELETE and POST without a body (with or without a JSON content type) → 200 and 409 as documented, never 415", async () => {
    const { userId, threadId } = await userWithThreadAndMemory();
    const auth = await bearer(userId);
    const stop = await fetch(url(`/api/threads/${threadId}/stop`), { method: "POST", headers: auth });
    expect(stop.status).toBe(409);
    expect(await stop.json()).toMatchObject({ code: "no_running_turn" });
    // A client that sets the JSON content type on every request, body or not.
    const stopJson = await fetch(url(`/api/threads/${threadId}/stop`), {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
    });
    expect(stopJson.status).toBe(409);
    const memories = await fetch(url("/api/memories"), {
      method: "DELETE",
      headers: { ...auth, "content-type": "application/json" },
    });
    expect(memories.status).toBe(200);
    expect(await memories.json()).toEqual({ deleted: 1 });
    const thread = await fetch(url(`/api/threads/${threadId}`), { method: "DELETE", headers: auth });
    expect(thread.status).toBe(200);
  });

  it("curl -X DELETE …/messages/:answerId/feedback removes the rating (200), never 415", async () => {
    const { userId, threadId } = await userWithThreadAndMemory();
    const { answerId } = await storeAnsweredTurn(bed.db.pool, { threadId, userId, question: "Hi?", answer: "Hello." });
    const auth = await bearer(userId);
    const path = `/api/threads/${threadId}/messages/${answerId}/feedback`;
    const given = await fetch(url(path), {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ rating: "up" }),
    });
    expect(given.status).toBe(200);
    const removed = await rawRequest("DELETE", path, auth);
    expect(removed.status, removed.body).toBe(200);
    expect(JSON.parse(removed.body)).toEqual({ threadId, answerId, deleted: true });
    const again = await fetch(url(path), {
      method: "DELETE",
      headers: { ...auth, "content-type": "application/json" },
    });
    expect(await again.json()).toEqual({ threadId, answerId, deleted: false });
  });

  it("curl -X POST …/stop on a running turn stops it (202)", async () => {
    const { threadId, event } = await threadWithRunningTurn(bed.db.pool, chatTurn, bed.model, "Tell me a long story.");
    const stop = await rawRequest("POST", `/api/threads/${threadId}/stop`, await bearer(event.data.userId));
    expect(stop.status, stop.body).toBe(202);
    expect(JSON.parse(stop.body)).toMatchObject({ threadId, messageId: event.data.messageId, stopped: true });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "stopped" }]);
  });

  it("a body that is there still needs JSON: 415 without a content type, chunked or with a length; read as JSON when declared", async () => {
    const { userId, threadId } = await userWithThreadAndMemory();
    const auth = await bearer(userId);
    const body = JSON.stringify({ messageId: randomUUID() });
    const chunked = await fetch(url(`/api/threads/${threadId}/stop`), {
      method: "POST",
      headers: auth,
      body: new Blob([body]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(415);
    expect(((await chunked.json()) as { error: string }).error).toContain("no Content-Type header");
    const sized = await fetch(url(`/api/threads/${threadId}/stop`), {
      method: "POST",
      headers: { ...auth, "content-type": "text/plain" },
      body,
    });
    expect(sized.status).toBe(415);
    // A chunked JSON body is read whole after its first bytes were looked at.
    const chunkedJson = await fetch(url(`/api/threads/${threadId}/stop`), {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: new Blob([body]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(chunkedJson.status).toBe(409);
    const bad = await fetch(url(`/api/threads/${threadId}/stop`), {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: '{"messageId": 1}',
    });
    expect(bad.status).toBe(400);
  });
});
