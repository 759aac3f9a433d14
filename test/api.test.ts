import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { chatMessageEventId } from "../src/api/send-message.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel } from "./helpers/fixtures.js";
import { asUser, createTestApp, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let sent: SentEvent[];
let app: ReturnType<typeof createTestApp>["app"];

beforeAll(async () => {
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
  bed.model.reset();
});

const post = (body: unknown) => asUser(app, "u1").post("/api/chat", body);

describe("POST /api/chat", () => {
  it("accepts a valid message with 202, the new thread's id, the message id and the event id, and sends the event for the signed-in user", async () => {
    const messageId = randomUUID();
    const response = await post({ messageId, content: "Hello" });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ threadId: messageId, messageId, eventId: "evt-1" });
    expect(sent).toEqual([
      {
        id: chatMessageEventId("u1", messageId),
        name: "chat/message.sent",
        // The busy policy the route applied travels with the event (the default: enqueue).
        data: { messageId, userId: "u1", content: "Hello", busy: "enqueue" },
      },
    ]);
  });

  it("refuses invalid bodies with 400 naming the field, sending nothing and writing nothing", async () => {
    const before = await countRows(bed.db.pool);
    const cases: [unknown, string][] = [
      ["not json", "body"],
      [{ content: "no id" }, "messageId"],
      // The user comes from the credentials: a userId in the body is refused by name.
      [{ messageId: randomUUID(), userId: "u2", content: "acting as someone else" }, "userId"],
      [{ messageId: randomUUID(), content: "" }, "content"],
      [{ messageId: randomUUID(), content: "x", threadId: 42 }, "threadId"],
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
    const offline = createTestApp(bed.db.pool, { sendEvent: () => Promise.reject(new Error("fetch failed")) }).app;
    const response = await asUser(offline, "u1").post("/api/chat", { messageId: randomUUID(), content: "hi" });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: string }).error).toMatch(/inngest-cli@latest dev/);
  });
});

describe("GET /api/threads/:threadId/messages", () => {
  it("shows the stored conversation with each turn's status, only to its owner (anyone else: not found)", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "Hi", userId: "owner" });
    bed.model.script({ text: "Hello!" });
    const run = await execute(chatTurn, event);

    const response = await asUser(app, "owner").get(`/api/threads/${event.data.messageId}/messages`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { messages: Record<string, unknown>[] };
    expect(body.messages).toMatchObject([
      {
        id: event.data.messageId,
        role: "user",
        content: { text: "Hi" },
        variantCount: 1,
        turn: { status: "completed", runId: run.runId },
      },
      { role: "assistant", agentName: "assistant", answers: event.data.messageId, variant: 1 },
    ]);

    expect((await asUser(app, "someone-else").get(`/api/threads/${event.data.messageId}/messages`)).status).toBe(404);
    expect((await asUser(app, "owner").get(`/api/threads/${randomUUID()}/messages`)).status).toBe(404);
    expect((await asUser(app, "owner").get(`/api/threads/not-a-uuid/messages`)).status).toBe(400);
    expect((await app.request(`/api/threads/${event.data.messageId}/messages`)).status).toBe(401);
  });

  it("reports health with the database reachable", async () => {
    const response = await app.request("/health");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok", database: "ok" });
  });
});
