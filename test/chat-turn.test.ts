import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { execute } from "./helpers/engine.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { chatEvent, countRows, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";

let db: TestDatabase;
let model: ModelServer;
let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(async () => {
  [db, model] = await Promise.all([createTestDatabase(), startModelServer()]);
  chatTurn = createChatTurn({ db: db.pool, model: scriptedModel(model) });
});
afterAll(async () => {
  await model.close();
  await db.drop();
});
beforeEach(() => model.reset());

describe("a chat turn", () => {
  it("stores the user message, then asks the model with only the system prompt and that message, then stores the answer", async () => {
    model.script({ text: "Hello! How can I help?" });
    const event = chatEvent({ content: "Hi there" });

    const run = await execute(chatTurn, event);

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ threadId: event.data.messageId, status: "completed", answer: "Hello! How can I help?" });
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "Hi there" },
    ]);
    const rows = await threadRows(db.pool, event.data.messageId);
    expect(rows.map((r) => [r.seq, r.kind, r.agent_name])).toEqual([
      [1, "user", "user"],
      [2, "agent", "assistant"],
    ]);
    expect(rows[1]!.answers).toBe(event.data.messageId);
    expect(await turnsOf(db.pool, event.data.messageId)).toMatchObject([{ status: "completed", kind: "chat", variant: 1 }]);
  });
});
