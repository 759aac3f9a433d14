import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { countTokens } from "../src/history/token-budget.js";
import type { MemoryComponent, ThreadMessage } from "../src/memory/component.js";
import { memoryContextText } from "../src/memory/user-memory.js";
import { execute, memoBefore } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import type { ChatRequest } from "./helpers/model-server.js";
import { rememberFact } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const withUserMemory = (contextTokens = 500) => ({
  network: "assistant" as const,
  memory: { agents: { assistant: ["user-memory" as const] }, contextTokens },
});

let chatTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), agents: withUserMemory() });
});

const memoriesOf = async (userId: string) =>
  (
    await bed.db.pool.query<{ text: string; source: string }>(
      "SELECT text, source FROM user_memories WHERE user_id = $1 ORDER BY text",
      [userId],
    )
  ).rows;

/** Every tool call of a request is answered by a tool message after it, and every tool message answers an earlier call. */
function expectToolCallsPaired(request: ChatRequest) {
  const called = new Set<string>();
  const answered = new Set<string>();
  for (const m of request.messages) {
    for (const call of m.tool_calls ?? []) called.add(call.id);
    if (m.role === "tool") {
      expect(called.has(m.tool_call_id!)).toBe(true);
      answered.add(m.tool_call_id!);
    }
  }
  expect([...answered].sort()).toEqual([...called].sort());
}

describe("user memory", () => {
  it("a fact remembered in one thread reaches the model in the user's next thread, never another user's", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script(
      { toolCalls: [{ name: "remember", arguments: { fact: "Prefers metric units" } }] },
      { text: "Noted: metric it is." },
    );
    const first = await execute(
      chatTurn,
      chatEvent({ userId, content: "Please remember that I prefer metric units." }),
    );
    expect(first.error).toBeUndefined();
    expect(await memoriesOf(userId)).toEqual([{ text: "Prefers metric units", source: "remembered" }]);
    // The remember tool was offered, and its call answered, in the same turn.
    expect(bed.model.requests[0]!.tools?.length).toBeGreaterThan(1);
    expectToolCallsPaired(bed.model.requests[1]!);

    bed.model.reset();
    bed.model.script({ text: "About 1.8 m." });
    const second = await execute(
      chatTurn,
      chatEvent({ userId, content: "How tall is a typical door in metric units?" }),
    );
    expect(second.error).toBeUndefined();
    expect(bed.model.requests[0]!.messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      { role: "user", content: memoryContextText(["Prefers metric units"]) },
      { role: "user", content: "How tall is a typical door in metric units?" },
    ]);

    bed.model.reset();
    bed.model.script({ text: "About 6 ft 8 in." });
    const other = await execute(
      chatTurn,
      chatEvent({ userId: `other-${randomUUID()}`, content: "How tall is a typical door in metric units?" }),
    );
    expect(other.error).toBeUndefined();
    expect(JSON.stringify(bed.model.requests)).not.toContain("Prefers metric units");
    expect(bed.model.requests[0]!.messages.map((m) => m.role)).toEqual(["system", "user"]);
  });

  it("a fact the model writes with a NUL is remembered with U+FFFD in its place, and the turn completes", async () => {
    const userId = `user-${randomUUID()}`;
    bed.model.script(
      { toolCalls: [{ name: "remember", arguments: { fact: "Likes \u0000 tea" } }] },
      { text: "Noted." },
    );
    const run = await execute(chatTurn, chatEvent({ userId, content: "Remember that I like tea." }));
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed" });
    expect(await memoriesOf(userId)).toEqual([{ text: "Likes \uFFFD tea", source: "remembered" }]);

    // Forgotten by the same words: the NUL names the same memory it was stored as.
    bed.model.reset();
    bed.model.script({ toolCalls: [{ name: "forget", arguments: { fact: "Likes \u0000 tea" } }] }, { text: "Gone." });
    expect((await execute(chatTurn, chatEvent({ userId, content: "Forget it." }))).error).toBeUndefined();
    expect(await memoriesOf(userId)).toEqual([]);
  });

  it("recall of a topic the model writes with a NUL finds the memories, and the turn completes", async () => {
    const userId = `user-${randomUUID()}`;
    await rememberFact(bed.db.pool, userId, "Likes green tea");
    bed.model.script(
      { toolCalls: [{ name: "recall", arguments: { topic: "tea\u0000" } }] },
      { text: "You like green tea." },
    );
    const run = await execute(chatTurn, chatEvent({ userId, content: "What do I drink?" }));
    expect(run.error).toBeUndefined();
    expect(JSON.stringify(bed.model.requests[1]!.messages.at(-1))).toContain("Likes green tea");
  });

  it("forget removes the memory: later requests no longer carry it", async () => {
    const userId = `user-${randomUUID()}`;
    await rememberFact(bed.db.pool, userId, "Is allergic to peanuts");
    await rememberFact(bed.db.pool, userId, "Lives in Lisbon");
    bed.model.script(
      { toolCalls: [{ name: "forget", arguments: { fact: "is ALLERGIC to  peanuts" } }] },
      { text: "Forgotten." },
    );
    const run = await execute(chatTurn, chatEvent({ userId, content: "Forget my peanut allergy." }));
    expect(run.error).toBeUndefined();
    expect(JSON.parse(bed.model.requests[1]!.messages.at(-1)!.content as string)).toEqual({
      data: { forgotten: true },
    });
    expect(await memoriesOf(userId)).toEqual([{ text: "Lives in Lisbon", source: "remembered" }]);

    bed.model.reset();
    bed.model.script({ text: "Sure." });
    await execute(chatTurn, chatEvent({ userId, content: "Suggest a snack with peanuts." }));
    expect(bed.model.requests[0]!.messages[1]).toEqual({
      role: "user",
      content: memoryContextText(["Lives in Lisbon"]),
    });
  });

  it("a retried step, a retried run and a re-run of the event store a remembered fact once", async () => {
    const userId = `user-${randomUUID()}`;
    const event = chatEvent({ userId, content: "Remember: my cat is called Miso." });
    bed.model.script(
      { toolCalls: [{ name: "remember", arguments: { fact: "Has a cat called Miso" } }] },
      { status: 500 },
    );
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(await memoriesOf(userId)).toHaveLength(1);

    // Killed after the remember step did its work, before Inngest stored its result: it runs again.
    const rememberStep = failed.stepIds.find((id) => id.startsWith("memory.remember."))!;
    bed.model.script({ status: 500 });
    const again = await execute(chatTurn, event, { memo: memoBefore(failed, rememberStep), runId: failed.runId });
    expect(again.error).toBeDefined();
    expect(await memoriesOf(userId)).toHaveLength(1);

    bed.model.script({ text: "Miso, noted." });
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    const rerun = await execute(chatTurn, event);
    expect(rerun.result).toMatchObject({ status: "skipped" });
    expect(await memoriesOf(userId)).toEqual([{ text: "Has a cat called Miso", source: "remembered" }]);
  });

  it("the memory context stays within its token budget, most relevant first, in the order [system, memory, history, current message once]", async () => {
    const userId = `user-${randomUUID()}`;
    const budgeted = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model), agents: withUserMemory(120) });
    await rememberFact(bed.db.pool, userId, "Favourite colour is green");
    for (let i = 0; i < 30; i += 1)
      await rememberFact(bed.db.pool, userId, `Unrelated preference number ${i} about something else entirely`);

    bed.model.script({ text: "Hello!" });
    const first = await execute(budgeted, chatEvent({ userId, content: "Hi" }));
    const threadId = (first.result as { threadId: string }).threadId;
    bed.model.reset();
    bed.model.script({ text: "Green." });
    const run = await execute(budgeted, chatEvent({ userId, threadId, content: "What is my favourite colour?" }));
    expect(run.error).toBeUndefined();

    const messages = bed.model.requests[0]!.messages;
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "user", "assistant", "user"]);
    const context = messages[1]!.content as string;
    expect(countTokens(context)).toBeLessThanOrEqual(120);
    // Ranked by the words it shares with the question, the relevant memory comes first, although the others are newer.
    expect(context).toContain("- Favourite colour is green\n- Unrelated");
    expect(messages.slice(2)).toEqual([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "What is my favourite colour?" },
    ]);
    expect(messages.filter((m) => m.content === "What is my favourite colour?")).toHaveLength(1);
  });
});

describe("memory component hooks", () => {
  it("thread created, each new message and before each model call run once each as steps, also when the run is retried", async () => {
    const heard: string[] = [];
    const recorder: MemoryComponent = {
      name: "recorder",
      threadCreated: async ({ threadId }) => void heard.push(`created ${threadId}`),
      newMessage: async (_scope, message: ThreadMessage) =>
        void heard.push(`${message.role} ${message.agentName}: ${message.text}`),
      beforeModelCall: async () => {
        heard.push("before call");
        return {
          component: "recorder",
          text: "Context from the recorder.",
          tokens: countTokens("Context from the recorder."),
        };
      },
    };
    const turn = createChatTurn({
      db: bed.db.pool,
      model: scriptedModel(bed.model),
      agents: { network: "assistant", memory: { agents: { assistant: [recorder] }, contextTokens: 500 } },
    });
    const event = chatEvent({ content: "Hello recorder" });
    bed.model.script({ toolCalls: [{ name: "current_time" }] }, { status: 500 });
    const failed = await execute(turn, event);
    expect(failed.error).toBeDefined();
    bed.model.script({ text: "Hi." });
    const retried = await execute(turn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();

    expect(heard).toEqual([
      `created ${event.data.messageId}`,
      "user user: Hello recorder",
      "before call",
      "before call",
      "assistant assistant: Hi.",
    ]);
    expect(bed.model.requests.at(-1)!.messages[1]).toEqual({ role: "user", content: "Context from the recorder." });
  });
});
