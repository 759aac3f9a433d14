import { AgentResult } from "@inngest/agent-kit";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { chooseModel } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { execute, executeFailureHandler } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(async () => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
});

describe("a chat turn", () => {
  it("stores the user message, then asks the model with only the system prompt and that message, then stores the answer", async () => {
    bed.model.script({ text: "Hello! How can I help?" });
    const event = chatEvent({ content: "Hi there" });

    const run = await execute(chatTurn, event);

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({
      threadId: event.data.messageId,
      status: "completed",
      answer: "Hello! How can I help?",
    });
    expect(bed.model.requests).toHaveLength(1);
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "Hi there" },
    ]);
    const rows = await threadRows(bed.db.pool, event.data.messageId);
    expect(rows.map((r) => [r.seq, r.kind, r.agent_name])).toEqual([
      [1, "user", "user"],
      [2, "agent", "assistant"],
    ]);
    expect(rows[1]!.answers).toBe(event.data.messageId);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([
      { status: "completed", kind: "chat", variant: 1 },
    ]);
  });

  it("stores the user message before the model is called", async () => {
    const event = chatEvent({ content: "Is my message safe?" });
    let storedWhenModelCalled: string[] = [];
    bed.model.script({ text: "Yes.", delayMs: 0 });
    const original = bed.model.requests.push.bind(bed.model.requests);
    bed.model.requests.push = (...items) => {
      void threadRows(bed.db.pool, event.data.messageId).then(
        (rows) => (storedWhenModelCalled = rows.map((r) => r.kind)),
      );
      return original(...items);
    };
    const run = await execute(chatTurn, event);
    bed.model.requests.push = original;
    expect(run.error).toBeUndefined();
    expect(storedWhenModelCalled).toEqual(["user"]);
  });

  it("sends a second message after the first turn, in order, and the new message once", async () => {
    const first = chatEvent({ content: "My name is Ada." });
    bed.model.script({ text: "Nice to meet you, Ada." }, { text: "Your name is Ada." });
    await execute(chatTurn, first);
    const second = chatEvent({ content: "What is my name?", threadId: first.data.messageId });

    const run = await execute(chatTurn, second);

    expect(run.result).toMatchObject({ status: "completed", answer: "Your name is Ada." });
    expect(bed.model.requests[1]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "Nice to meet you, Ada." },
      { role: "user", content: "What is my name?" },
    ]);
    const rows = await threadRows(bed.db.pool, first.data.messageId);
    expect(rows.map((r) => [r.seq, r.kind])).toEqual([
      [1, "user"],
      [2, "agent"],
      [3, "user"],
      [4, "agent"],
    ]);
  });

  it("fails at the inference step when the model answers 500, and executing again with the memoized steps completes the turn once", async () => {
    const event = chatEvent({ content: "Flaky model, please answer." });
    bed.model.script({ status: 500 }, { text: "Here is the answer." });

    const failed = await execute(chatTurn, event);
    expect(String((failed.error as Error | undefined)?.message)).toMatch(/HTTP 500/);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user"]);

    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });

    expect(retried.error).toBeUndefined();
    expect(retried.result).toMatchObject({ status: "completed", answer: "Here is the answer." });
    const rows = await threadRows(bed.db.pool, event.data.messageId);
    expect(rows.map((r) => r.kind)).toEqual(["user", "agent"]);
    expect(bed.model.requests).toHaveLength(2);
    expect(bed.model.requests[1]!.messages).toEqual(bed.model.requests[0]!.messages);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([{ status: "completed" }]);
  });

  it("writes nothing new when the same event runs again as a fresh run after success", async () => {
    const event = chatEvent({ content: "Say this once." });
    bed.model.script({ text: "Once." });
    await execute(chatTurn, event);
    const before = await countRows(bed.db.pool);
    const requestsBefore = bed.model.requests.length;

    const rerun = await execute(chatTurn, { ...event });

    expect(rerun.result).toMatchObject({ status: "skipped" });
    const after = await countRows(bed.db.pool);
    expect({ threads: after.threads, messages: after.messages }).toEqual({
      threads: before.threads,
      messages: before.messages,
    });
    expect(bed.model.requests.length).toBe(requestsBefore);
    expect((await turnsOf(bed.db.pool, event.data.messageId)).map((t) => t.status)).toEqual(["completed", "skipped"]);
  });

  it("returns history steps as JSON that rebuilds into working AgentResults", async () => {
    const first = chatEvent({ content: "Remember 42." });
    bed.model.script({ text: "Remembered." }, { text: "It was 42." });
    await execute(chatTurn, first);
    const second = chatEvent({ content: "What number?", threadId: first.data.messageId });

    const run = await execute(chatTurn, second);

    // Every memoized step value went through JSON.stringify/parse; the engine replays them on re-entry.
    for (const step of run.memo) expect(JSON.parse(JSON.stringify(step.handler()))).toEqual(step.handler());
    // On an idle thread the message's step returns the window's rows (and how far the summary lags behind them).
    const getStep = run.memo
      .map((m) => (m.handler() as { history?: { rows?: unknown[] } } | null)?.history)
      .find((v) => Array.isArray(v?.rows));
    const { toAgentResults } = await import("../src/history/messages.js");
    const rebuilt = toAgentResults(getStep!.rows as Parameters<typeof toAgentResults>[0]);
    expect(rebuilt.every((r) => r instanceof AgentResult)).toBe(true);
    expect(rebuilt[1]!.createdAt).toBeInstanceOf(Date);
    expect(typeof rebuilt[1]!.checksum).toBe("string");
    expect(rebuilt.map((r) => r.export().output)).toEqual([
      [{ type: "text", role: "user", content: "Remember 42." }],
      [{ type: "text", role: "assistant", content: "Remembered.", stop_reason: "stop" }],
    ]);
    // A retry replays the same JSON: the turn still completes with the model seeing the same history.
    const retry = await execute(chatTurn, second, { memo: run.memo, runId: run.runId });
    expect(retry.result).toMatchObject({ status: "completed", answer: "It was 42." });
  });

  it("stores a tool call and its result, and sends them paired to the model on the next turn", async () => {
    const first = chatEvent({ content: "What time is it?" });
    bed.model.script(
      { toolCalls: [{ name: "current_time", id: "call_time_1" }] },
      { text: "It is noon." },
      { text: "You asked for the time." },
    );

    const run = await execute(chatTurn, first);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "It is noon." });
    // The second inference of the turn sees the call and its result after the user's message.
    const secondCall = bed.model.requests[1]!.messages;
    expect(secondCall.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(secondCall[2]!.tool_calls).toEqual([
      { id: "call_time_1", type: "function", function: { name: "current_time", arguments: "{}" } },
    ]);
    expect(secondCall[3]).toMatchObject({ tool_call_id: "call_time_1" });
    expect(JSON.parse(String(secondCall[3]!.content))).toMatchObject({ data: { now: expect.any(String) } });

    const rows = await threadRows(bed.db.pool, first.data.messageId);
    expect(rows.map((r) => [r.kind, r.variant])).toEqual([
      ["user", null],
      ["agent", 1],
      ["agent", 1],
    ]);

    await execute(chatTurn, chatEvent({ content: "What did I ask?", threadId: first.data.messageId }));
    const next = bed.model.requests[2]!.messages;
    expect(next.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
    expect(next[2]!.tool_calls?.[0]?.id).toBe("call_time_1");
    expect(next[3]!.tool_call_id).toBe("call_time_1");
    expect(next[4]).toMatchObject({ role: "assistant", content: "It is noon." });
    expect(next[5]).toMatchObject({ role: "user", content: "What did I ask?" });
  });

  it("refuses a message for another user's thread and changes nothing", async () => {
    const owned = chatEvent({ content: "Private thread.", userId: "alice" });
    bed.model.script({ text: "Noted." });
    await execute(chatTurn, owned);
    const before = await countRows(bed.db.pool);
    const requestsBefore = bed.model.requests.length;

    const intruder = await execute(
      chatTurn,
      chatEvent({ content: "Let me in.", userId: "mallory", threadId: owned.data.messageId }),
    );

    expect(intruder.error).toMatchObject({ name: "NonRetriableError" });
    expect(String((intruder.error as Error).message)).toMatch(/belongs to another user/);
    expect(await countRows(bed.db.pool)).toEqual(before);
    expect(bed.model.requests.length).toBe(requestsBefore);
  });

  it("refuses invalid event data before writing anything, naming the bad field", async () => {
    const before = await countRows(bed.db.pool);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ userId: "u", content: "no id" }, /messageId/],
      [{ messageId: "not-a-uuid", userId: "u", content: "x" }, /messageId/],
      [{ messageId: crypto.randomUUID(), content: "no user" }, /userId/],
      [{ messageId: crypto.randomUUID(), userId: "u", content: "   " }, /content/],
      [{ messageId: crypto.randomUUID(), userId: "u", content: "x".repeat(40_000) }, /content/],
      [{ messageId: crypto.randomUUID(), userId: "u", content: "x", threadId: "thread-1" }, /threadId/],
      [{ messageId: crypto.randomUUID(), userId: "u", content: "x", clientTimestamp: "yesterday" }, /clientTimestamp/],
    ];
    for (const [data, field] of cases) {
      const run = await execute(chatTurn, { name: "chat/message.sent", data });
      // The SDK's EventValidationError is a NonRetriableError: the run fails without retries.
      expect(run.error, JSON.stringify(data).slice(0, 80)).toMatchObject({ name: "EventValidationError" });
      expect(String((run.error as Error).message)).toMatch(field);
    }
    expect(await countRows(bed.db.pool)).toEqual(before);
  });

  it("fails without a model with a clear non-retriable error, keeps the user message, and records the failed turn", async () => {
    const unconfigured = createChatTurn({ db: bed.db.pool, model: chooseModel(readEnvironment({})) });
    const event = chatEvent({ content: "Anyone there?" });

    const run = await execute(unconfigured, event);

    expect(run.error).toMatchObject({ name: "NonRetriableError" });
    expect(String((run.error as Error).message)).toMatch(/No model is configured: set OPENAI_API_KEY/);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user"]);

    await executeFailureHandler(unconfigured, {
      runId: run.runId,
      event,
      error: { name: "NonRetriableError", message: (run.error as Error).message },
    });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([
      { run_id: run.runId, status: "failed", error: expect.stringMatching(/No model is configured/) },
    ]);
  });
});
