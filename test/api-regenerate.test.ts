import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, conversation, countRows, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { asUser, createTestApp, type SentEvent } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;
let app: ReturnType<typeof createTestApp>["app"];
let sent: SentEvent[];

beforeAll(async () => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
  ({ app, sent } = createTestApp(bed.db.pool));
});
beforeEach(() => {
  sent.length = 0;
});

const postRegenerate = (threadId: string, messageId: string, body: unknown, userId = "user-1") =>
  asUser(app, userId).post(`/api/threads/${threadId}/messages/${messageId}/regenerate`, body);

type ShownMessage = { role: string; content: { output?: { content: string }[] }; variantCount?: number };

const answerTexts = (messages: ShownMessage[]) =>
  messages.filter((m) => m.role === "assistant").map((m) => m.content.output![0]!.content);

describe("POST /api/threads/:threadId/messages/:messageId/regenerate", () => {
  it("sends chat/message.regenerate and answers 202; the executed event makes the new answer the only one the messages API shows", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["Say hi", "Hi"]]);
    const before = await countRows(bed.db.pool);

    const response = await postRegenerate(threadId, messageIds[0]!, { reason: "try again" });

    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ threadId, messageId: messageIds[0], eventId: "evt-1" });
    expect(sent).toEqual([
      {
        name: "chat/message.regenerate",
        data: { threadId, messageId: messageIds[0], userId: "user-1", reason: "try again" },
      },
    ]);
    expect(await countRows(bed.db.pool)).toEqual(before);

    bed.model.script({ text: "Hello there" });
    expect((await execute(regenerate, sent[0]!)).result).toMatchObject({ status: "completed" });

    const messages = await asUser(app, "user-1").get(`/api/threads/${threadId}/messages`);
    const body = (await messages.json()) as { messages: ShownMessage[] };
    expect(answerTexts(body.messages)).toEqual(["Hello there"]);
    expect(body.messages[0]).toMatchObject({ role: "user", variantCount: 2, turn: { status: "completed" } });

    const variants = await asUser(app, "user-1").get(`/api/threads/${threadId}/messages/${messageIds[0]}/variants`);
    expect(variants.status).toBe(200);
    const listed = (await variants.json()) as {
      variants: { variant: number; current: boolean; results: { content: { output: { content: string }[] } }[] }[];
    };
    expect(listed.variants.map((v) => [v.variant, v.current, v.results[0]!.content.output[0]!.content])).toEqual([
      [1, false, "Hi"],
      [2, true, "Hello there"],
    ]);
  });

  it("refuses an unknown message, an assistant message, another user's thread (as not found), an unknown thread and a message off the path with a 4xx, sending and writing nothing", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["First", "One"],
      ["Second", "Two"],
    ]);
    const answerId = (await threadRows(bed.db.pool, threadId)).find((r) => r.kind === "agent")!.id;
    bed.model.script({ text: "Uno" });
    await execute(regenerate, {
      name: "chat/message.regenerate",
      data: { threadId, messageId: messageIds[0]!, userId: "user-1" },
    });
    const before = await countRows(bed.db.pool);
    const rowsBefore = await threadRows(bed.db.pool, threadId);

    const cases: [string, string, string, number, string][] = [
      [threadId, randomUUID(), "user-1", 404, "message_not_found"],
      [threadId, answerId, "user-1", 422, "not_a_user_message"],
      [threadId, messageIds[0]!, "someone-else", 404, "thread_not_found"],
      [randomUUID(), messageIds[0]!, "user-1", 404, "thread_not_found"],
      [threadId, messageIds[1]!, "user-1", 409, "message_not_on_path"],
    ];
    for (const [thread, message, user, status, code] of cases) {
      const response = await postRegenerate(thread, message, {}, user);
      expect(response.status, code).toBe(status);
      expect(await response.json()).toMatchObject({ code, error: expect.any(String) });
    }

    const invalid = await postRegenerate(threadId, "not-a-uuid", {});
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { error: string }).error).toContain("messageId");
    const otherUser = await postRegenerate(threadId, messageIds[0]!, { userId: "someone-else" });
    expect(otherUser.status).toBe(400);
    expect(((await otherUser.json()) as { error: string }).error).toContain("userId");
    const noCredentials = await app.request(`/api/threads/${threadId}/messages/${messageIds[0]}/regenerate`, {
      method: "POST",
      body: "{}",
    });
    expect(noCredentials.status).toBe(401);

    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);
    expect(await threadRows(bed.db.pool, threadId)).toEqual(rowsBefore);
  });
});

describe("GET /api/threads/:threadId/messages/:messageId/variants", () => {
  it("lists no variants for a message without an answer and answers another user not found", async () => {
    const threadId = randomUUID();
    const failed = await execute(chatTurn, chatEvent({ content: "Unanswered", messageId: threadId }));
    expect(failed.result).toBeUndefined();

    const own = await asUser(app, "user-1").get(`/api/threads/${threadId}/messages/${threadId}/variants`);
    expect(own.status).toBe(200);
    expect(await own.json()).toEqual({ threadId, messageId: threadId, variants: [] });

    const other = await asUser(app, "someone-else").get(`/api/threads/${threadId}/messages/${threadId}/variants`);
    expect(other.status).toBe(404);
    const noCredentials = await app.request(`/api/threads/${threadId}/messages/${threadId}/variants`);
    expect(noCredentials.status).toBe(401);
  });
});
