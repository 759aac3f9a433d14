import { InngestExecutionEngine } from "inngest/internals";
import { describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import * as sql from "../src/history/store-sql.js";
import { countingPool } from "./helpers/counting-pool.js";
import { type Execution, execute } from "./helpers/engine.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { chatEvent, countRows, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { expectedMessages, seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** What a client keeps of a conversation: a question answered after a tool call. */
const clientConversation = [
  { type: "text", role: "user", content: "What time is it?" },
  {
    type: "tool_call",
    role: "assistant",
    stop_reason: "tool",
    tools: [{ type: "tool", id: "call_client_1", name: "current_time", input: {} }],
  },
  {
    type: "tool_result",
    role: "tool_result",
    stop_reason: "tool",
    tool: { type: "tool", id: "call_client_1", name: "current_time", input: {} },
    content: { data: { now: "2026-05-01T12:00:00.000Z" } },
  },
  { type: "text", role: "assistant", content: "It is noon (UTC)." },
];

const clientConversationAsSent = [
  { role: "user", content: "What time is it?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_client_1", type: "function", function: { name: "current_time", arguments: "{}" } }],
  },
  {
    role: "tool",
    tool_call_id: "call_client_1",
    content: JSON.stringify({ data: { now: "2026-05-01T12:00:00.000Z" } }),
  },
  { role: "assistant", content: "It is noon (UTC)." },
];

const readsHistory = (queries: string[]) => queries.filter((q) => q === sql.selectHistoryWindow).length;
const BEGIN = InngestExecutionEngine._internals.hashId("history.append-user-message");
/** Whether the statement storing the message read the history window too (a turn with none ahead). */
const windowWithMessage = (run: Execution) =>
  (run.memo.find((step) => step.id === BEGIN)!.handler() as { history?: unknown }).history !== undefined;

describe("client-authoritative and hybrid modes", () => {
  it("hybrid: with the client's conversation no history query is issued, the model sees the client's messages, and the new rows are stored", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 3 });
    const counting = countingPool(bed.db.pool);
    const chatTurn = createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) });

    // The session's first request is server-authoritative: history comes from the database.
    bed.model.script({ text: "answer 4" });
    const first = await execute(chatTurn, chatEvent({ content: "question 4", threadId: thread.threadId }));
    expect(first.error).toBeUndefined();
    // No turn ahead: read by the statement that stored the message.
    expect(readsHistory(counting.queries)).toBe(0);
    expect(windowWithMessage(first)).toBe(true);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      ...expectedMessages(thread.entries),
      { role: "user", content: "question 4" },
    ]);

    // Later requests carry the conversation the client holds.
    counting.queries.length = 0;
    bed.model.reset();
    bed.model.script({ text: "Still noon." });
    const event = chatEvent({ content: "And now?", threadId: thread.threadId });
    const run = await execute(chatTurn, { ...event, data: { ...event.data, conversation: clientConversation } });

    expect(run.error).toBeUndefined();
    expect(readsHistory(counting.queries)).toBe(0);
    expect(windowWithMessage(run)).toBe(false);
    expect(counting.queries.length).toBeGreaterThan(0);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      ...clientConversationAsSent,
      { role: "user", content: "And now?" },
    ]);
    expect(run.result).toMatchObject({ status: "completed", history: { from: "client", read: 0, sent: 4 } });
    const rows = await threadRows(bed.db.pool, thread.threadId);
    expect(rows.slice(-2).map((r) => [r.id, r.kind, r.content])).toEqual([
      [event.data.messageId, "user", { text: "And now?" }],
      [
        expect.any(String),
        "agent",
        { output: [{ type: "text", role: "assistant", content: "Still noon.", stop_reason: "stop" }], toolCalls: [] },
      ],
    ]);
    expect(rows).toHaveLength(3 * 2 + 2 + 2);
  });

  it("client-authoritative from the first message: a new thread is created and stored, nothing is read", async () => {
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "Noted." });
    const event = chatEvent({ content: "Remember that." });
    const run = await execute(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, conversation: clientConversation },
    });
    expect(run.error).toBeUndefined();
    expect(readsHistory(counting.queries)).toBe(0);
    expect(bed.model.requests[0]!.messages.slice(1, -1)).toEqual(clientConversationAsSent);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user", "agent"]);
  });

  it("an empty conversation is the client's word too: the stored history is not read", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "Fresh start." });
    const event = chatEvent({ content: "Forget the rest.", threadId: thread.threadId });
    const run = await execute(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, conversation: [] },
    });
    expect(run.error).toBeUndefined();
    expect(readsHistory(counting.queries)).toBe(0);
    expect(windowWithMessage(run)).toBe(false);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "Forget the rest." },
    ]);
  });

  it("a conversation with a tool call but no result is refused before anything is stored", async () => {
    const before = await countRows(bed.db.pool);
    const broken = clientConversation.filter((m) => m.type !== "tool_result");
    const event = chatEvent({ content: "And now?" });
    const run = await execute(createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, conversation: broken },
    });
    expect(String((run.error as Error).message)).toMatch(/conversation\.1: tool call call_client_1 has no tool_result/);

    const { app, sent } = createTestApp(bed.db.pool);
    const { userId: _user, ...body } = event.data;
    const response = await asUser(app, event.data.userId).post("/api/chat", {
      ...body,
      conversation: [{ type: "text", role: "wizard", content: "hi" }],
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toMatch(/conversation\.0/);
    expect(sent).toHaveLength(0);
    expect(await countRows(bed.db.pool)).toEqual(before);
    expect(bed.model.requests).toHaveLength(0);
  });

  it("POST /api/chat passes the conversation and history settings on in the event", async () => {
    const { app, sent } = createTestApp(bed.db.pool);
    const { userId, ...message } = chatEvent({ content: "hi" }).data;
    const body = {
      ...message,
      conversation: clientConversation,
      history: { policy: "lastN", length: 3, maxTokens: 2000 },
    };
    const response = await asUser(app, userId).post("/api/chat", body);
    expect(response.status).toBe(202);
    expect(sent[0]!.data).toMatchObject({
      conversation: clientConversation,
      history: { policy: "lastN", length: 3, maxTokens: 2000 },
    });
  });
});
