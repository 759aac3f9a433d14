import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { REVIEWER_SYSTEM_PROMPT } from "../src/agents/reviewer.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { NO_MEMORY } from "../src/memory/components.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows } from "./helpers/fixtures.js";
import type { ChatRequest } from "./helpers/model-server.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let pairTurn: ReturnType<typeof createChatTurn>;

beforeAll(() => {
  pairTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    agents: { network: "pair", memory: NO_MEMORY },
  });
});

const agentStates = async (threadId: string) =>
  (
    await bed.db.pool.query<{ agent_name: string; data: unknown }>(
      "SELECT agent_name, data FROM agent_thread_state WHERE thread_id = $1 ORDER BY agent_name",
      [threadId],
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

const systemOf = (request: ChatRequest) => request.messages[0]!.content as string;

/** A first turn of the pair: the assistant calls current_time, answers, and the reviewer checks the answer. */
async function firstPairTurn(userId = "user-1") {
  bed.model.script(
    { toolCalls: [{ name: "current_time", id: "call_time_1" }] },
    { text: "It is noon." },
    { text: "OK" },
  );
  const event = chatEvent({ userId, content: "What time is it?" });
  const run = await execute(pairTurn, event);
  expect(run.error).toBeUndefined();
  return { event, run, threadId: event.data.messageId };
}

describe("the pair network (assistant, then reviewer)", () => {
  it("stores both agents' results in order, each with its agent's name", async () => {
    const { threadId } = await firstPairTurn();
    const rows = await threadRows(bed.db.pool, threadId);
    expect(rows.map((r) => [r.kind, r.agent_name])).toEqual([
      ["user", "user"],
      ["agent", "assistant"],
      ["agent", "assistant"],
      ["agent", "reviewer"],
    ]);
    // The reviewer saw the assistant's answer as text, none of the assistant's tool calls.
    const review = bed.model.requests[2]!;
    expect(systemOf(review)).toBe(REVIEWER_SYSTEM_PROMPT);
    expect(review.messages.slice(1)).toEqual([
      { role: "user", content: "What time is it?" },
      { role: "assistant", content: "It is noon." },
    ]);
    expect(review.tools ?? []).toEqual([]);
  });

  it("the next turn's requests are valid for each agent: the assistant's own tool calls paired, the reviewer given none", async () => {
    const { threadId } = await firstPairTurn();
    bed.model.reset();
    bed.model.script({ text: "Still about noon." }, { text: "OK" });
    const second = await execute(pairTurn, chatEvent({ threadId, content: "And now?" }));
    expect(second.error).toBeUndefined();

    const [assistant, reviewer] = bed.model.requests;
    expect(systemOf(assistant!)).toBe(ASSISTANT_SYSTEM_PROMPT);
    expectToolCallsPaired(assistant!);
    expect(assistant!.messages.some((m) => m.tool_calls?.some((call) => call.id === "call_time_1"))).toBe(true);
    expect(assistant!.messages.at(-1)).toEqual({ role: "user", content: "And now?" });
    // The reviewer's earlier note is part of the thread the assistant sees, as text.
    expect(assistant!.messages.some((m) => m.role === "assistant" && m.content === "OK")).toBe(true);

    expectToolCallsPaired(reviewer!);
    expect(reviewer!.messages.some((m) => m.role === "tool" || m.tool_calls)).toBe(false);
    expect(reviewer!.messages.slice(1).map((m) => [m.role, m.content])).toEqual([
      ["user", "What time is it?"],
      ["assistant", "It is noon."],
      ["assistant", "OK"],
      ["user", "And now?"],
      ["assistant", "Still about noon."],
    ]);
  });

  it("routes the same way when the run is retried or re-run: no agent is asked twice, nothing stored twice", async () => {
    bed.model.script({ toolCalls: [{ name: "current_time" }] }, { text: "It is noon." }, { status: 500 });
    const event = chatEvent({ content: "What time is it now?" });
    const failed = await execute(pairTurn, event);
    expect(failed.error).toBeDefined();
    expect(bed.model.requests).toHaveLength(3);

    // The retry replays the memoized inferences: the router sends the run to the reviewer again, and only the reviewer is asked.
    bed.model.script({ text: "OK" });
    const retried = await execute(pairTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    expect(bed.model.requests).toHaveLength(4);
    expect(systemOf(bed.model.requests[3]!)).toBe(REVIEWER_SYSTEM_PROMPT);

    // Replaying the whole completed run asks no model and routes to the same agents.
    const replayed = await execute(pairTurn, event, { memo: retried.memo, runId: retried.runId });
    expect(replayed.error).toBeUndefined();
    expect(replayed.result).toEqual(retried.result);
    expect(bed.model.requests).toHaveLength(4);

    const rerun = await execute(pairTurn, event);
    expect(rerun.result).toMatchObject({ status: "skipped" });
    const rows = await threadRows(bed.db.pool, event.data.messageId);
    expect(rows.map((r) => r.agent_name)).toEqual(["user", "assistant", "assistant", "reviewer"]);
  });
});

describe("per-agent thread state", () => {
  it("the reviewer's slice survives to the next turn of the thread, is absent in another thread, and nothing is stored for the assistant", async () => {
    const userId = `user-${randomUUID()}`;
    const { threadId } = await firstPairTurn(userId);
    expect(await agentStates(threadId)).toEqual([
      { agent_name: "reviewer", data: { reviewer: { reviews: 1, lastNote: "OK" } } },
    ]);

    bed.model.reset();
    bed.model.script({ text: "Still noon." }, { text: "Noon was an hour ago." });
    await execute(pairTurn, chatEvent({ userId, threadId, content: "And now?" }));
    expect(systemOf(bed.model.requests[1]!)).toContain(
      'You have reviewed 1 earlier answers in this thread; your latest note was: "OK"',
    );
    expect(await agentStates(threadId)).toEqual([
      { agent_name: "reviewer", data: { reviewer: { reviews: 2, lastNote: "Noon was an hour ago." } } },
    ]);

    bed.model.reset();
    bed.model.script({ text: "Hello." }, { text: "OK" });
    const other = await execute(pairTurn, chatEvent({ userId, content: "Hi, new thread" }));
    expect(other.error).toBeUndefined();
    expect(systemOf(bed.model.requests[1]!)).toBe(REVIEWER_SYSTEM_PROMPT);
    expect(await agentStates((other.result as { threadId: string }).threadId)).toEqual([
      { agent_name: "reviewer", data: { reviewer: { reviews: 1, lastNote: "OK" } } },
    ]);
  });

  it("keeps a long note whole up to its limit, never half of an emoji", async () => {
    const userId = `user-${randomUUID()}`;
    const note = `${"a".repeat(499)}\u{1F600} and more`;
    bed.model.script({ text: "It is noon." }, { text: note });
    const turn = await execute(pairTurn, chatEvent({ userId, content: "What time is it?" }));
    expect(turn.error).toBeUndefined();
    const { threadId } = turn.result as { threadId: string };
    expect(await agentStates(threadId)).toEqual([
      { agent_name: "reviewer", data: { reviewer: { reviews: 1, lastNote: "a".repeat(499) } } },
    ]);
  });

  it("a turn that waited for an earlier turn of its thread loads the state that turn saved", async () => {
    const { threadId } = await firstPairTurn();
    bed.model.reset();
    bed.model.script(
      { text: "Answer two." },
      { text: "Note two.", delayMs: 400 },
      { text: "Answer three." },
      { text: "OK" },
    );

    // The second turn is still waiting on its reviewer when the third starts.
    const secondRun = execute(pairTurn, chatEvent({ threadId, content: "Question two" }));
    while (bed.model.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    const third = await execute(pairTurn, chatEvent({ threadId, content: "Question three" }));
    expect(third.error).toBeUndefined();
    expect(third.stepIds).toContain("history.wait-for-turn");
    // Loaded after the wait, not at the start of the turn.
    expect(third.stepIds.indexOf("agent-state.load")).toBeGreaterThan(third.stepIds.indexOf("history.wait-for-turn"));
    expect((await secondRun).error).toBeUndefined();

    expect(systemOf(bed.model.requests[3]!)).toContain(
      'You have reviewed 2 earlier answers in this thread; your latest note was: "Note two."',
    );
    expect(await agentStates(threadId)).toEqual([
      { agent_name: "reviewer", data: { reviewer: { reviews: 3, lastNote: "OK" } } },
    ]);
  });

  it("the single assistant network stores no agent state at all", async () => {
    const single = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    bed.model.script({ text: "Hi." });
    const run = await execute(single, chatEvent({ content: "Hello" }));
    expect(run.error).toBeUndefined();
    expect(run.stepIds.filter((id) => id.startsWith("agent-state."))).toEqual([]);
    expect(await agentStates((run.result as { threadId: string }).threadId)).toEqual([]);
  });
});
