import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createApp } from "../src/server.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let sent: { name: string; data: Record<string, unknown> }[];
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  app = createApp({
    db: bed.db.pool,
    functions: [],
    sendEvent: async (event) => {
      sent.push(event);
      return { ids: [`evt-${sent.length}`] };
    },
  });
});
beforeEach(() => {
  sent = [];
  bed.model.reset();
});

const post = (body: unknown) =>
  app.request("/api/chat", { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });

describe("POST /api/chat", () => {
  it("accepts a valid message with 202, the new thread's id, the message id and the event id, and sends the event", async () => {
    const messageId = randomUUID();
    const response = await post({ messageId, userId: "u1", content: "Hello" });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ threadId: messageId, messageId, eventId: "evt-1" });
    expect(sent).toEqual([{ id: `chat-message-${messageId}`, name: "chat/message.sent", data: { messageId, userId: "u1", content: "Hello" } }]);
  });

  it("refuses invalid bodies with 400 naming the field, sending nothing and writing nothing", async () => {
    const before = await countRows(bed.db.pool);
    const cases: [unknown, string][] = [
      ["not json", "body"],
      [{ userId: "u1", content: "no id" }, "messageId"],
      [{ messageId: randomUUID(), content: "no user" }, "userId"],
      [{ messageId: randomUUID(), userId: "u1", content: "" }, "content"],
      [{ messageId: randomUUID(), userId: "u1", content: "x", threadId: 42 }, "threadId"],
    ];
    for (const [body, field] of cases) {
      const response = await post(body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      const answer = (await response.json()) as { error: string; issues: { field: string }[] };
      expect(answer.issues.map((issue) => issue.field)).toContain(field);
      expect(answer.error).toContain(field);
    }
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("answers 503 with what to do when the event cannot reach Inngest", async () => {
    const offline = createApp({ db: bed.db.pool, functions: [], sendEvent: () => Promise.reject(new Error("fetch failed")) });
    const response = await offline.request("/api/chat", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messageId: randomUUID(), userId: "u1", content: "hi" }),
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: string }).error).toMatch(/inngest-cli@latest dev/);
  });
});

describe("GET /api/threads/:threadId/messages", () => {
  it("shows the stored conversation with each turn's status, only to its owner", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "Hi", userId: "owner" });
    bed.model.script({ text: "Hello!" });
    const run = await execute(chatTurn, event);

    const response = await app.request(`/api/threads/${event.data.messageId}/messages?userId=owner`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { messages: Record<string, unknown>[] };
    expect(body.messages).toMatchObject([
      { id: event.data.messageId, role: "user", content: { text: "Hi" }, variantCount: 1, turn: { status: "completed", runId: run.runId } },
      { role: "assistant", agentName: "assistant", answers: event.data.messageId, variant: 1 },
    ]);

    expect((await app.request(`/api/threads/${event.data.messageId}/messages?userId=someone-else`)).status).toBe(403);
    expect((await app.request(`/api/threads/${randomUUID()}/messages?userId=owner`)).status).toBe(404);
    expect((await app.request(`/api/threads/not-a-uuid/messages?userId=owner`)).status).toBe(400);
    expect((await app.request(`/api/threads/${event.data.messageId}/messages`)).status).toBe(400);
  });

  it("reports health with the database reachable", async () => {
    const response = await app.request("/health");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok", database: "ok" });
  });
});
