import { randomUUID } from "node:crypto";
import { createState } from "@inngest/agent-kit";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { chatMessageSent, inngest } from "../inngest.config.js";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import type { ModelChoice } from "../src/agents/model.js";
import { createChatNetwork } from "../src/agents/network.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createTurnHistory } from "../src/history/adapter.js";
import { AGENT_HISTORY_DEFAULTS, resolveHistoryPolicy } from "../src/history/policy.js";
import * as sql from "../src/history/store-sql.js";
import { countingPool } from "./helpers/counting-pool.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { expectedMessages, seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/**
 * The four rows of AgentKit's thread-id table (reference/agentkit-history-adapter.txt), against
 * Threadline's adapter (which has createThread) and against the same adapter with createThread
 * removed, so AgentKit's own initializeThread fallbacks decide.
 */

/** A chat turn whose adapter has no createThread (otherwise Threadline's own). */
function chatTurnWithoutCreateThread(pool: pg.Pool, choice: ModelChoice) {
  return inngest.createFunction(
    { id: "chat-turn-without-create-thread", triggers: [chatMessageSent], retries: 0 },
    async ({ event, runId }) => {
      const history = createTurnHistory(pool, {
        userId: event.data.userId,
        messageId: event.data.messageId,
        runId,
        kind: "chat",
        policy: resolveHistoryPolicy({ defaults: AGENT_HISTORY_DEFAULTS }),
      });
      delete (history as { createThread?: unknown }).createThread;
      const network = createChatNetwork({ model: choice, history });
      const run = await network.run(
        { id: event.data.messageId, content: event.data.content, role: "user" },
        { state: createState({}, event.data.threadId ? { threadId: event.data.threadId } : {}) },
      );
      return { threadId: run.state.threadId };
    },
  );
}

// The thread is created or checked by the statement that stores the user message: no statement of its own.
const threadStatements = (queries: string[]) =>
  queries.filter((q) => q === sql.insertThread || q === sql.selectThreadOwner).length;
const userMessageStatements = (queries: string[]) => queries.filter((q) => q === sql.beginTurn).length;
const historyReads = (queries: string[]) => queries.filter((q) => q === sql.selectHistoryWindow).length;

describe("thread ids, as AgentKit's table says", () => {
  it("resume with createThread: the given thread is checked with the user message (no statement of its own), then history is loaded (with it: no turn is ahead)", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "answer 3" });
    const event = chatEvent({ content: "question 3", threadId: thread.threadId });
    const run = await execute(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), event);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ threadId: thread.threadId });
    expect(threadStatements(counting.queries)).toBe(0);
    expect(userMessageStatements(counting.queries)).toBe(1);
    // No turn ahead: the history window came with the user message, no read of its own.
    expect(historyReads(counting.queries)).toBe(0);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      ...expectedMessages(thread.entries),
      { role: "user", content: "question 3" },
    ]);
  });

  it("resume without createThread: the given thread id is used directly (no upsert), history is loaded with the user message", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "answer 3" });
    const event = chatEvent({ content: "question 3", threadId: thread.threadId });
    const run = await execute(chatTurnWithoutCreateThread(counting.pool, scriptedModel(bed.model)), event);
    expect(run.error).toBeUndefined();
    expect(run.result).toEqual({ threadId: thread.threadId });
    expect(threadStatements(counting.queries)).toBe(0);
    expect(userMessageStatements(counting.queries)).toBe(1);
    expect(historyReads(counting.queries)).toBe(0);
    expect(bed.model.requests[0]!.messages.slice(1, -1)).toEqual(expectedMessages(thread.entries));
    expect((await threadRows(bed.db.pool, thread.threadId)).slice(-2).map((r) => r.kind)).toEqual(["user", "agent"]);
  });

  it("a thread id the client chose (useAgent makes its own): the first message creates that thread for the sender; a re-run finds it and stores nothing new", async () => {
    const threadId = randomUUID();
    bed.model.script({ text: "Hello!" });
    const event = chatEvent({ content: "Hi", threadId });
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ threadId, status: "completed" });
    expect((await threadRows(bed.db.pool, threadId)).map((r) => r.kind)).toEqual(["user", "agent"]);
    expect((await bed.db.pool.query("SELECT user_id FROM threads WHERE id = $1", [threadId])).rows).toEqual([
      { user_id: "user-1" },
    ]);

    const rerun = await execute(chatTurn, event);
    expect(rerun.result).toMatchObject({ threadId, status: "skipped" });
    expect(await threadRows(bed.db.pool, threadId)).toHaveLength(2);
  });

  it("new conversation with createThread: createThread names the thread after the first message, which creates it when stored; nothing is read", async () => {
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "Hello!" });
    const event = chatEvent({ content: "Hi" });
    const run = await execute(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), event);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ threadId: event.data.messageId });
    expect(threadStatements(counting.queries)).toBe(0);
    expect(userMessageStatements(counting.queries)).toBe(1);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user", "agent"]);
    expect(historyReads(counting.queries)).toBe(0);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "Hi" },
    ]);
  });

  it("new conversation without createThread: AgentKit's random UUID differs on every re-entry, so the message lands in a thread nobody knows and the answer cannot be stored", async () => {
    const before = await countRows(bed.db.pool);
    const counting = countingPool(bed.db.pool);
    const event = chatEvent({ content: "Hi" });
    bed.model.script({ text: "Hello!" });
    const run = await execute(chatTurnWithoutCreateThread(counting.pool, scriptedModel(bed.model)), event);
    // AgentKit generated a thread id outside any step: the memoized user-message step created a
    // thread under the first one, a later re-entry generated another, and storing the answer under
    // that one is refused. createThread (naming a new thread after its first message) prevents this.
    expect(String((run.error as Error).message)).toMatch(/^Thread [0-9a-f-]{36} does not exist/);
    const { rows } = await bed.db.pool.query<{ id: string }>("SELECT thread_id AS id FROM messages WHERE id = $1", [
      event.data.messageId,
    ]);
    expect(rows[0]!.id).not.toBe(event.data.messageId);
    expect((run.error as Error).message).not.toContain(rows[0]!.id);
    expect(historyReads(counting.queries)).toBe(0);
    expect(await countRows(bed.db.pool)).toEqual({
      threads: before.threads + 1,
      messages: before.messages + 1,
      turns: before.turns + 1,
    });
  });
});
