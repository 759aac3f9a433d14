import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { SUMMARIZER_SYSTEM_PROMPT } from "../src/agents/summarizer.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { resultId } from "../src/history/ids.js";
import { beginTurn, ensureThread, storeAnswer } from "../src/history/store.js";
import { createTestDatabase, type TestDatabase } from "./helpers/database.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";

let db: TestDatabase;
let model: ModelServer;
let chatTurn: ReturnType<typeof createChatTurn>;
let summarize: ReturnType<typeof createSummarizeThread>;

beforeAll(async () => {
  [db, model] = await Promise.all([createTestDatabase(), startModelServer()]);
  const deps = { db: db.pool, model: scriptedModel(model) };
  chatTurn = createChatTurn(deps);
  summarize = createSummarizeThread(deps);
});
afterAll(async () => {
  await model.close();
  await db.drop();
});
beforeEach(() => model.reset());

const USER = "user-1";

/** Stores turns `from`..`to` ("message i" answered by "answer i") through the same storage calls a chat turn makes. */
async function seedTurns(threadId: string, from: number, to: number) {
  await ensureThread(db.pool, threadId, USER);
  for (let i = from; i <= to; i++) {
    const messageId = randomUUID();
    const runId = `seed-${messageId}`;
    const start = await beginTurn(db.pool, { threadId, userId: USER, message: { id: messageId, text: `message ${i}` }, turn: { runId, kind: "chat" } });
    await storeAnswer(db.pool, {
      threadId, userId: USER, runId, messageId, messageSeq: start.messageSeq, variant: start.variant, detachLaterTurns: false,
      results: [{ id: resultId(messageId, start.variant, 0), agentName: "assistant", content: { output: [{ type: "text", role: "assistant", content: `answer ${i}` }], toolCalls: [] } }],
    });
  }
}

async function chat(threadId: string, content: string) {
  model.script({ text: `reply to ${content}` });
  const run = await execute(chatTurn, chatEvent({ threadId, content, userId: USER }));
  expect(run.error).toBeUndefined();
  return { run, request: model.requests.at(-1)! };
}

const userSeq = async (threadId: string, text: string) =>
  Number((await db.pool.query("SELECT seq FROM messages WHERE thread_id = $1 AND kind = 'user' AND content->>'text' = $2", [threadId, text])).rows[0].seq);

const storedSummary = async (threadId: string) =>
  (await db.pool.query("SELECT covers_through_turn_seq::int AS covers, text FROM thread_summaries WHERE thread_id = $1", [threadId])).rows[0];

describe("progressive summarization", () => {
  it("probe", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 30);
    const { run } = await chat(threadId, "message 31");
    console.log(JSON.stringify(run.result), run.memo.length);
  });
});
