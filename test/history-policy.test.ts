import { beforeEach, describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { historyEnvironment, readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { DEFAULT_HISTORY_MAXIMUMS, type HistoryEnvironment, type HistoryRequest } from "../src/history/policy.js";
import { execute } from "./helpers/engine.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import {
  expectedMessages,
  seedThread,
  systemEntries,
  turnsBetween,
  type SeededEntry,
  type SeededThread,
} from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const seed = () => seedThread(bed.db.pool, { turns: 30, toolTurns: [3, 29], systemBefore: [1, 16] });

/** Runs turn 31 on the thread and returns what the model received and the run's report. */
async function turn31(
  thread: SeededThread,
  options: { request?: HistoryRequest; environment?: HistoryEnvironment } = {},
) {
  bed.model.script({ text: "answer 31" });
  const chatTurn = createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    ...(options.environment ? { historyEnvironment: options.environment } : {}),
  });
  const event = chatEvent({ content: "question 31", threadId: thread.threadId });
  const run = await execute(chatTurn, {
    ...event,
    data: { ...event.data, ...(options.request ? { history: options.request } : {}) },
  });
  expect(run.error).toBeUndefined();
  expect(bed.model.requests).toHaveLength(1);
  const messages = bed.model.requests[0]!.messages;
  // The current message reaches the model exactly once, last.
  expect(messages.filter((m) => m.content === "question 31")).toHaveLength(1);
  expect(messages.at(-1)).toEqual({ role: "user", content: "question 31" });
  return { messages, result: run.result as { history: Record<string, unknown> } };
}

const prompt = (entries: SeededEntry[]) => [
  { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
  ...expectedMessages(entries),
  { role: "user", content: "question 31" },
];

describe("history policies on a thread of 30 turns with system messages and tool calls", () => {
  let thread: SeededThread;
  // A fresh thread each time: a turn 31 run by one test must not be history for the next.
  beforeEach(async () => {
    thread = await seed();
  });

  it("all: every turn, with the system messages where they stand and tool calls paired with their results", async () => {
    const { messages, result } = await turn31(thread, { request: { policy: "all" } });
    expect(messages).toEqual(prompt(thread.entries));
    expect(result.history).toMatchObject({
      policy: "all",
      from: "database",
      read: 2 + 30 * 2 + 2,
      sent: 2 + 30 * 2 + 2,
    });
  });

  it("all keeps every message whatever preserveSystemMessages says, the note before the first turn included", async () => {
    const { messages } = await turn31(thread, { request: { policy: "all", preserveSystemMessages: false } });
    expect(messages).toEqual(prompt(thread.entries));
  });

  it("lastN: the last N user messages (the current one counted), system messages older than the window kept", async () => {
    const { messages, result } = await turn31(thread, { request: { policy: "lastN", length: 5 } });
    expect(messages).toEqual(prompt([...systemEntries(thread.entries), ...turnsBetween(thread.entries, 27, 30)]));
    expect(result.history).toMatchObject({ policy: "lastN", length: 5, preserveSystemMessages: true });
  });

  it("lastN without preserveSystemMessages: only the window's turns", async () => {
    const { messages } = await turn31(thread, {
      request: { policy: "lastN", length: 5, preserveSystemMessages: false },
    });
    expect(messages).toEqual(prompt(turnsBetween(thread.entries, 27, 30)));
  });

  it("lastN keeps a system message that falls inside the window in its place", async () => {
    const { messages } = await turn31(thread, {
      request: { policy: "lastN", length: 17, preserveSystemMessages: false },
    });
    // Turns 15..30 plus the current one: the note between turns 15 and 16 is inside the window.
    const window = turnsBetween(thread.entries, 15, 30);
    expect(window.filter((e) => e.kind === "system")).toHaveLength(1);
    expect(messages).toEqual(prompt(window));
  });

  it("lastN with length 0 behaves as 1: the current message, after the preserved system messages", async () => {
    const { messages } = await turn31(thread, { request: { policy: "lastN", length: 0 } });
    expect(messages).toEqual(prompt(systemEntries(thread.entries)));
  });

  it("lastN with length 0 and no preserved system messages: the current message alone", async () => {
    const { messages } = await turn31(thread, {
      request: { policy: "lastN", length: 0, preserveSystemMessages: false },
    });
    expect(messages).toEqual(prompt([]));
  });

  it("none: only the current message, whatever preserveSystemMessages says, and nothing is read", async () => {
    const { messages, result } = await turn31(thread, { request: { policy: "none", preserveSystemMessages: true } });
    expect(messages).toEqual(prompt([]));
    expect(result.history).toMatchObject({ policy: "none", from: "none", read: 0, sent: 0 });
  });

  it("the agent's default is lastN 20 with system messages preserved", async () => {
    const { messages, result } = await turn31(thread);
    expect(messages).toEqual(prompt([systemEntries(thread.entries)[0]!, ...turnsBetween(thread.entries, 12, 30)]));
    expect(result.history).toMatchObject({
      policy: "lastN",
      length: 20,
      preserveSystemMessages: true,
      // The agent asks for no token budget: the operator's maximum (here the default one) applies.
      maxTokens: DEFAULT_HISTORY_MAXIMUMS.maxTokens,
      maxBytes: DEFAULT_HISTORY_MAXIMUMS.maxBytes,
      sources: {
        policy: "default",
        length: "default",
        preserveSystemMessages: "default",
        maxTokens: "operator-maximum",
        maxBytes: "default",
      },
    });
  });
});

describe("precedence: environment over request over the agent's default", () => {
  let thread: SeededThread;
  beforeEach(async () => {
    thread = await seedThread(bed.db.pool, { turns: 6, systemBefore: [1] });
  });

  it("a request setting beats the default, and says so", async () => {
    const { messages, result } = await turn31(thread, { request: { length: 3 } });
    expect(messages).toEqual(prompt([...systemEntries(thread.entries), ...turnsBetween(thread.entries, 5, 6)]));
    expect(result.history).toMatchObject({
      policy: "lastN",
      length: 3,
      sources: {
        policy: "default",
        length: "request",
        preserveSystemMessages: "default",
        maxTokens: "operator-maximum",
      },
    });
  });

  it("an environment setting beats the request's, each setting reporting its own source", async () => {
    const environment = historyEnvironment(readEnvironment({ HISTORY_POLICY: "lastN", HISTORY_LENGTH: "2" }));
    const { messages, result } = await turn31(thread, {
      environment,
      request: { policy: "all", length: 10, preserveSystemMessages: false },
    });
    expect(messages).toEqual(prompt(turnsBetween(thread.entries, 6, 6)));
    expect(result.history).toMatchObject({
      policy: "lastN",
      length: 2,
      preserveSystemMessages: false,
      sources: {
        policy: "environment",
        length: "environment",
        preserveSystemMessages: "request",
        maxTokens: "operator-maximum",
      },
    });
  });

  it("the environment is validated: a bad HISTORY_POLICY stops start-up with a clear error, empty means unset", () => {
    expect(() => readEnvironment({ HISTORY_POLICY: "lastFew" })).toThrow(/HISTORY_POLICY/);
    expect(() => readEnvironment({ HISTORY_LENGTH: "-1" })).toThrow(/HISTORY_LENGTH/);
    expect(historyEnvironment(readEnvironment({ HISTORY_POLICY: "", HISTORY_MAX_TOKENS: "4000" }))).toEqual({
      maxTokens: 4000,
    });
  });

  it("a bad request setting fails the turn non-retriably, naming the field", async () => {
    const event = chatEvent({ content: "question 31", threadId: thread.threadId });
    const run = await execute(createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, history: { policy: "lastFew" } },
    });
    expect(String((run.error as Error).message)).toMatch(/history\.policy/);
    expect(bed.model.requests).toHaveLength(0);
  });

  it("the debug view shows the latest turn's policy, sources and message counts", async () => {
    const environment = historyEnvironment(readEnvironment({ HISTORY_LENGTH: "4" }));
    await turn31(thread, { environment, request: { policy: "lastN", maxTokens: 5000 } });
    const { app } = createTestApp(bed.db.pool);
    const response = await asUser(app, thread.userId).get(`/api/threads/${thread.threadId}/debug`);
    expect(response.status).toBe(200);
    const debug = (await response.json()) as { latestTurn: { status: string; context: unknown }; messages: unknown };
    expect(debug.latestTurn.status).toBe("completed");
    expect(debug.latestTurn.context).toMatchObject({
      policy: {
        policy: "lastN",
        length: 4,
        preserveSystemMessages: true,
        maxTokens: 5000,
        sources: { policy: "request", length: "environment", preserveSystemMessages: "default", maxTokens: "request" },
      },
      history: { from: "database", read: 1 + 3 * 2, sent: 1 + 3 * 2 },
    });
    expect(debug.messages).toMatchObject({ system: { onPath: 1 }, user: { onPath: 6 + 1 } });
    const other = await asUser(app, "someone-else").get(`/api/threads/${thread.threadId}/debug`);
    expect(other.status).toBe(404);
  });
});
