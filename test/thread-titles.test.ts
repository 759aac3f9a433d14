import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { cleanTitle, TITLER_SYSTEM_PROMPT } from "../src/agents/titler.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createTitleThread } from "../src/functions/title-thread.js";
import { storeModelTitle } from "../src/history/titles.js";
import { execute, type Execution } from "./helpers/engine.js";
import { chatEvent, hasLoneSurrogate, scriptedModel, turnsOf } from "./helpers/fixtures.js";
import { createTestApp, headersFor } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let titleThread: ReturnType<typeof createTitleThread>;
let app: ReturnType<typeof createTestApp>["app"];

beforeAll(() => {
  const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
  chatTurn = createChatTurn(deps);
  titleThread = createTitleThread(deps);
  app = createTestApp(bed.db.pool).app;
});

const USER = "titled-user";

/** A new thread's first turn through the chat turn function; returns its turn.finished event. */
async function firstTurn(question: string, answer: string) {
  const threadId = randomUUID();
  bed.model.script({ text: answer });
  const run = await execute(chatTurn, chatEvent({ content: question, messageId: threadId, userId: USER }));
  expect(run.error).toBeUndefined();
  bed.model.reset();
  return { threadId, finished: finishedEvent(run) };
}

const finishedEvent = (run: Execution) => {
  const event = run.sentEvents.find((e) => e.name === "threadline/turn.finished");
  expect(event?.data).toMatchObject({ status: "completed" });
  return { name: event!.name, data: event!.data };
};

const threadTitle = async (threadId: string) =>
  (
    await bed.db.pool.query<{ title: string | null; title_source: string | null }>(
      "SELECT title, title_source FROM threads WHERE id = $1",
      [threadId],
    )
  ).rows[0]!;

describe("thread titles (title-thread function)", () => {
  it("sets a short title after the first answer, asking the model with the first question and its answer", async () => {
    const { threadId, finished } = await firstTurn(
      "How do I bake sourdough bread at home?",
      "Start with an active starter, then ...",
    );
    bed.model.script({ text: '"Baking Sourdough at Home."' });

    const run = await execute(titleThread, finished);

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ threadId, status: "titled", title: "Baking Sourdough at Home" });
    expect(await threadTitle(threadId)).toEqual({ title: "Baking Sourdough at Home", title_source: "model" });
    expect(bed.model.requests).toHaveLength(1);
    const [system, user] = bed.model.requests[0]!.messages;
    expect(system).toMatchObject({ role: "system", content: TITLER_SYSTEM_PROMPT });
    expect(String(user!.content)).toContain("<user_message>\nHow do I bake sourdough bread at home?\n</user_message>");
    expect(String(user!.content)).toContain(
      "<assistant_message>\nStart with an active starter, then ...\n</assistant_message>",
    );

    const response = await app.request(`/api/threads/${threadId}`, { headers: await headersFor(USER) });
    expect(await response.json()).toMatchObject({ title: "Baking Sourdough at Home", titleSource: "model" });

    // A later completed turn of the titled thread asks the model nothing.
    const again = await execute(titleThread, finished);
    expect(again.result).toMatchObject({ status: "titled" });
    expect(bed.model.requests).toHaveLength(1);
  });

  it("a model failure leaves the thread untitled and the chat turn completed; Inngest's retry then titles it", async () => {
    const { threadId, finished } = await firstTurn("What is a monad?", "A monad is ...");
    bed.model.script({ status: 500, body: { error: { message: "The server had an error", type: "server_error" } } });

    const failed = await execute(titleThread, finished);

    expect(failed.error).toBeDefined();
    expect(await threadTitle(threadId)).toEqual({ title: null, title_source: null });
    expect((await turnsOf(bed.db.pool, threadId)).map((t) => t.status)).toEqual(["completed"]);
    const messages = await app.request(`/api/threads/${threadId}/messages`, { headers: await headersFor(USER) });
    expect((await messages.json()).messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);

    bed.model.reset();
    bed.model.script({ text: "Monads explained" });
    const retried = await execute(titleThread, finished, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    expect(await threadTitle(threadId)).toEqual({ title: "Monads explained", title_source: "model" });
  });

  it("never overwrites a title the user set, even one set while the model was answering", async () => {
    const { threadId, finished } = await firstTurn("Plan a trip to Lisbon", "Day 1: ...");
    const rename = await app.request(`/api/threads/${threadId}`, {
      method: "PATCH",
      headers: await headersFor(USER),
      body: JSON.stringify({ title: "Lisbon 2027" }),
    });
    expect(rename.status).toBe(200);

    const run = await execute(titleThread, finished);
    expect(run.result).toMatchObject({ status: "titled" });
    expect(bed.model.requests).toHaveLength(0);
    expect(await threadTitle(threadId)).toEqual({ title: "Lisbon 2027", title_source: "user" });

    // The race: the user renames after the load step read "untitled"; the storing statement checks again.
    const { threadId: raced } = await firstTurn("Plan a trip to Porto", "Day 1: ...");
    await app.request(`/api/threads/${raced}`, {
      method: "PATCH",
      headers: await headersFor(USER),
      body: JSON.stringify({ title: "Porto" }),
    });
    expect(await storeModelTitle(bed.db.pool, raced, "Trip to Porto")).toEqual({ stored: false });
    expect(await threadTitle(raced)).toEqual({ title: "Porto", title_source: "user" });
  });

  it("a thread created with a title (POST /api/threads) keeps it after its first answer", async () => {
    const threadId = randomUUID();
    const created = await app.request("/api/threads", {
      method: "POST",
      headers: await headersFor(USER),
      body: JSON.stringify({ id: threadId, title: "My own title" }),
    });
    expect(created.status).toBe(201);
    bed.model.script({ text: "An answer" });
    const event = chatEvent({ content: "A question", threadId, userId: USER });
    const turn = await execute(chatTurn, event);
    expect(turn.error).toBeUndefined();
    bed.model.reset();
    // A titled thread with nothing waiting: the turn announces no finish, so asks for no title.
    expect(turn.sentEvents.map((e) => e.name)).not.toContain("threadline/turn.finished");

    // Asked all the same (a finish announced for a later turn), title-thread keeps the user's title.
    const finished = { threadId, runId: turn.runId, messageId: event.data.messageId, status: "completed" };
    const run = await execute(titleThread, { name: "threadline/turn.finished", data: finished });
    expect(run.result).toMatchObject({ status: "titled" });
    expect(bed.model.requests).toHaveLength(0);
    expect(await threadTitle(threadId)).toEqual({ title: "My own title", title_source: "user" });
  });

  it("stores the title alone, whatever markdown or preamble the model wraps it in, and never half a character", async () => {
    const answers: [string, string][] = [
      ["**Title:** Sourdough at Home", "Sourdough at Home"],
      ["# Sourdough at Home", "Sourdough at Home"],
      ["Here is a title:\n\n**Sourdough at Home**", "Sourdough at Home"],
      [`${"🍞".repeat(60)}`, `${"🍞".repeat(39)}…`],
    ];
    for (const [answer, title] of answers) {
      const { threadId, finished } = await firstTurn("How do I bake sourdough bread at home?", "Start with ...");
      bed.model.script({ text: answer });
      const run = await execute(titleThread, finished);
      expect(run.error, answer).toBeUndefined();
      const response = await app.request(`/api/threads/${threadId}`, { headers: await headersFor(USER) });
      expect(await response.json(), answer).toMatchObject({ title, titleSource: "model" });
      bed.model.reset();
    }
  });

  it("names the thread from the answer, not from a reasoning model's <think> block before it", async () => {
    const { threadId, finished } = await firstTurn("How do I bake sourdough bread at home?", "Start with ...");
    bed.model.script({ text: "<think>\nThe user asks about bread.\nA short title:\n</think>\n\nSourdough at Home" });
    expect((await execute(titleThread, finished)).error).toBeUndefined();
    expect(await threadTitle(threadId)).toEqual({ title: "Sourdough at Home", title_source: "model" });
  });

  it("never cuts an emoji in half in the request: strict providers refuse a lone surrogate (HTTP 400) on every retry", async () => {
    const emojiAtCut = `${"a".repeat(999)}🍞 and more`;
    const { finished } = await firstTurn(emojiAtCut, emojiAtCut);
    bed.model.script({ text: "Bread" });
    expect((await execute(titleThread, finished)).error).toBeUndefined();
    const request = String(bed.model.requests[0]!.messages[1]!.content);
    expect(hasLoneSurrogate(request)).toBe(false);
    expect(request).toContain(`${"a".repeat(999)}…`);
  });

  it("cleans the model's answer: first line, no quotes or label, at most 80 characters", () => {
    expect(cleanTitle('\n  Title: "Sourdough basics"\nmore text')).toBe("Sourdough basics");
    expect(cleanTitle("x".repeat(200))).toHaveLength(80);
    expect(cleanTitle("   \n ")).toBe("");
  });
});
