import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { MAX_PAGE_SIZE, readMessagePage } from "../src/history/message-pages.js";
import { listAnswerVariants } from "../src/history/store.js";
import { execute, executeFailureHandler } from "./helpers/engine.js";
import { chatEvent, conversation, countRows, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;

beforeAll(async () => {
  chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
  regenerate = createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) });
});

const system = { role: "system", content: ASSISTANT_SYSTEM_PROMPT };
const user = (content: string) => ({ role: "user", content });
const assistant = (content: string) => ({ role: "assistant", content });

const regenerateEvent = (data: { threadId: string; messageId: string; userId?: string }) => ({
  name: "chat/message.regenerate",
  data: { userId: "user-1", ...data },
});

/** The current path as the messages API shows it, as [role, text] pairs. */
async function shownPath(threadId: string) {
  const messages = (await readMessagePage(bed.db.pool, { threadId, userId: "user-1", limit: MAX_PAGE_SIZE })).messages;
  return messages.map((m) => [m.role, textOf(m.content)]);
}

function textOf(content: unknown): string {
  const stored = content as { text?: string; output?: { content: string }[] };
  return stored.text ?? (stored.output ?? []).map((o) => o.content).join("");
}

describe("regenerating the latest answer", () => {
  it("asks the model with the earlier turns and the message once, stores a second variant as the only current answer", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["What is 2+2?", "4"],
      ["And 3+3?", "6, I think"],
    ]);
    const [first, second] = messageIds as [string, string];

    bed.model.script({ text: "Six." });
    const run = await execute(regenerate, regenerateEvent({ threadId, messageId: second }));

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "Six." });
    expect(bed.model.requests).toHaveLength(1);
    expect(bed.model.requests[0]!.messages).toEqual([system, user("What is 2+2?"), assistant("4"), user("And 3+3?")]);

    const variants = await listAnswerVariants(bed.db.pool, { threadId, messageId: second, userId: "user-1" });
    expect(variants.map((v) => [v.variant, v.current, textOf(v.results[0]!.content)])).toEqual([
      [1, false, "6, I think"],
      [2, true, "Six."],
    ]);
    expect(await shownPath(threadId)).toEqual([
      ["user", "What is 2+2?"],
      ["assistant", "4"],
      ["user", "And 3+3?"],
      ["assistant", "Six."],
    ]);
    expect(await turnsOf(bed.db.pool, second)).toMatchObject([
      { kind: "chat", variant: 1, status: "completed" },
      { kind: "regenerate", variant: 2, status: "completed" },
    ]);
    expect(await turnsOf(bed.db.pool, first)).toMatchObject([{ kind: "chat", status: "completed" }]);

    // The next turn's history (the get step) holds only the current answer.
    bed.model.script({ text: "12" });
    const next = await execute(chatTurn, chatEvent({ threadId, content: "Double it?" }));
    expect(next.error).toBeUndefined();
    expect(bed.model.requests[1]!.messages).toEqual([
      system,
      user("What is 2+2?"),
      assistant("4"),
      user("And 3+3?"),
      assistant("Six."),
      user("Double it?"),
    ]);
  });
});

describe("regenerating an earlier message", () => {
  it("takes the later turns off the current path, keeps them listable, and the next turn sees only the current path", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["Name a fruit", "Apple"],
      ["Its colour?", "Red"],
      ["Its taste?", "Sweet"],
    ]);
    const [first, second, third] = messageIds as [string, string, string];

    bed.model.script({ text: "Banana" });
    const run = await execute(regenerate, regenerateEvent({ threadId, messageId: first }));

    expect(run.error).toBeUndefined();
    expect(bed.model.requests[0]!.messages).toEqual([system, user("Name a fruit")]);
    expect(await shownPath(threadId)).toEqual([
      ["user", "Name a fruit"],
      ["assistant", "Banana"],
    ]);
    // The turns after it are kept: their messages are stored off the path and their answers listable.
    const offPath = (await threadRows(bed.db.pool, threadId)).filter((r) => !r.on_path).map((r) => textOf(r.content));
    expect(offPath).toEqual(["Apple", "Its colour?", "Red", "Its taste?", "Sweet"]);
    for (const [messageId, answer] of [
      [second, "Red"],
      [third, "Sweet"],
    ] as const) {
      const variants = await listAnswerVariants(bed.db.pool, { threadId, messageId, userId: "user-1" });
      expect(variants.map((v) => [v.variant, v.current, textOf(v.results[0]!.content)])).toEqual([[1, false, answer]]);
    }

    bed.model.script({ text: "Yellow" });
    const next = await execute(chatTurn, chatEvent({ threadId, content: "Its colour?" }));
    expect(next.error).toBeUndefined();
    expect(bed.model.requests[1]!.messages).toEqual([
      system,
      user("Name a fruit"),
      assistant("Banana"),
      user("Its colour?"),
    ]);
    expect(await shownPath(threadId)).toEqual([
      ["user", "Name a fruit"],
      ["assistant", "Banana"],
      ["user", "Its colour?"],
      ["assistant", "Yellow"],
    ]);
  });
});

describe("regenerating a failed turn", () => {
  it("stores the answer the failed run never stored and shows the turn completed", async () => {
    // The model answers 500 on every attempt until the run has used up its retries.
    const event = chatEvent({ content: "Are you there?" });
    let attempt = await execute(chatTurn, event);
    for (let retry = 0; retry < 4; retry++)
      attempt = await execute(chatTurn, event, { memo: attempt.memo, runId: attempt.runId });
    expect(bed.model.requests.length).toBeGreaterThanOrEqual(5);
    await executeFailureHandler(chatTurn, {
      runId: attempt.runId,
      event,
      error: { name: "Error", message: "Model answered HTTP 500: script exhausted" },
    });
    const threadId = event.data.messageId;
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([
      { kind: "chat", status: "failed", error: "Model answered HTTP 500: script exhausted" },
    ]);
    expect(await shownPath(threadId)).toEqual([["user", "Are you there?"]]);

    bed.model.reset();
    bed.model.script({ text: "Yes, I am here." });
    const run = await execute(regenerate, regenerateEvent({ threadId, messageId: threadId }));

    expect(run.error).toBeUndefined();
    expect(bed.model.requests.map((r) => r.messages)).toEqual([[system, user("Are you there?")]]);
    expect(await shownPath(threadId)).toEqual([
      ["user", "Are you there?"],
      ["assistant", "Yes, I am here."],
    ]);
    const [shown] = (await readMessagePage(bed.db.pool, { threadId, userId: "user-1", limit: MAX_PAGE_SIZE })).messages;
    expect(shown!.turn).toMatchObject({ status: "completed", runId: run.runId });
    expect(await turnsOf(bed.db.pool, threadId)).toMatchObject([
      { kind: "chat", status: "failed" },
      { kind: "regenerate", variant: 1, status: "completed" },
    ]);
  });
});

describe("a regenerate whose inference fails once", () => {
  it("stores one new variant when it is executed again with its memoized steps", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["Tell me a joke", "Why did the chicken..."],
    ]);
    const messageId = messageIds[0]!;

    bed.model.script({ status: 503 }, { text: "A pun walks into a bar." });
    const event = { ...regenerateEvent({ threadId, messageId }), id: `event-${randomUUID()}` };
    const failed = await execute(regenerate, event);
    expect(failed.result).toBeUndefined();
    expect(await listAnswerVariants(bed.db.pool, { threadId, messageId, userId: "user-1" })).toHaveLength(1);

    const retried = await execute(regenerate, event, { memo: failed.memo, runId: failed.runId });

    expect(retried.error).toBeUndefined();
    expect(retried.result).toMatchObject({ status: "completed", answer: "A pun walks into a bar." });
    expect(bed.model.requests).toHaveLength(2);
    expect(bed.model.requests[1]!.messages).toEqual(bed.model.requests[0]!.messages);
    const variants = await listAnswerVariants(bed.db.pool, { threadId, messageId, userId: "user-1" });
    expect(variants.map((v) => [v.variant, v.current, v.results.length])).toEqual([
      [1, false, 1],
      [2, true, 1],
    ]);
    expect(await turnsOf(bed.db.pool, messageId)).toMatchObject([
      { kind: "chat", status: "completed" },
      { kind: "regenerate", variant: 2, status: "completed" },
    ]);
  });
});

describe("re-running an event (what the dev server's re-run does)", () => {
  it("a re-run of an answered chat/message.sent is a recorded no-op: no message rows, turn skipped, model not called", async () => {
    bed.model.script({ text: "Paris" });
    const event = { ...chatEvent({ content: "Capital of France?" }), id: `event-${randomUUID()}` };
    const first = await execute(chatTurn, event);
    expect(first.error).toBeUndefined();
    const before = await countRows(bed.db.pool);
    const rowsBefore = await threadRows(bed.db.pool, event.data.messageId);

    const rerun = await execute(chatTurn, event);

    expect(rerun.error).toBeUndefined();
    expect(rerun.result).toMatchObject({
      status: "skipped",
      reason: "the message already has an answer: regenerate it for a new one",
    });
    expect(bed.model.requests).toHaveLength(1);
    expect(await threadRows(bed.db.pool, event.data.messageId)).toEqual(rowsBefore);
    expect(await countRows(bed.db.pool)).toEqual({ ...before, turns: before.turns + 1 });
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([
      { run_id: first.runId, kind: "chat", variant: 1, status: "completed" },
      { run_id: rerun.runId, kind: "chat", variant: 1, status: "skipped" },
    ]);
    // The skipped re-run does not hide the run that answered.
    const [shown] = (
      await readMessagePage(bed.db.pool, { threadId: event.data.messageId, userId: "user-1", limit: MAX_PAGE_SIZE })
    ).messages;
    expect(shown!.turn).toMatchObject({ status: "completed", runId: first.runId });
  });

  it("a re-run of a failed chat/message.sent answers the message", async () => {
    const event = { ...chatEvent({ content: "Still there?" }), id: `event-${randomUUID()}` };
    const failed = await execute(chatTurn, event);
    expect(failed.result).toBeUndefined();
    await executeFailureHandler(chatTurn, {
      runId: failed.runId,
      event,
      error: { name: "Error", message: "Model answered HTTP 500" },
    });

    bed.model.script({ text: "Yes." });
    const rerun = await execute(chatTurn, event);

    expect(rerun.result).toMatchObject({ status: "completed", answer: "Yes." });
    expect(await shownPath(event.data.messageId)).toEqual([
      ["user", "Still there?"],
      ["assistant", "Yes."],
    ]);
    expect(await turnsOf(bed.db.pool, event.data.messageId)).toMatchObject([
      { status: "failed" },
      { kind: "chat", variant: 1, status: "completed" },
    ]);
  });

  it("a re-run of a completed regenerate event adds no variant; a new regenerate event does", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [["Pick a number", "7"]]);
    const messageId = messageIds[0]!;
    const event = { ...regenerateEvent({ threadId, messageId }), id: `event-${randomUUID()}` };
    bed.model.script({ text: "42" });
    expect((await execute(regenerate, event)).result).toMatchObject({ status: "completed" });

    const rerun = await execute(regenerate, event);

    expect(rerun.result).toMatchObject({
      status: "skipped",
      reason: "this regenerate event already produced its answer",
    });
    expect(bed.model.requests).toHaveLength(1);
    expect(
      (await listAnswerVariants(bed.db.pool, { threadId, messageId, userId: "user-1" })).map((v) => [
        v.variant,
        v.current,
      ]),
    ).toEqual([
      [1, false],
      [2, true],
    ]);

    bed.model.script({ text: "3" });
    await execute(regenerate, regenerateEvent({ threadId, messageId }));
    expect(
      (await listAnswerVariants(bed.db.pool, { threadId, messageId, userId: "user-1" })).map((v) => [
        v.variant,
        v.current,
      ]),
    ).toEqual([
      [1, false],
      [2, false],
      [3, true],
    ]);
  });
});

describe("regenerate refusals in the function", () => {
  it("fails non-retriably and writes nothing for an unknown message, an assistant message or another user's thread", async () => {
    const { threadId } = await conversation(chatTurn, bed.model, [["Hello", "Hi"]]);
    const answerId = (await threadRows(bed.db.pool, threadId)).find((r) => r.kind === "agent")!.id;
    const before = await countRows(bed.db.pool);

    const cases = [
      [regenerateEvent({ threadId, messageId: randomUUID() }), "is not a message of thread"],
      [regenerateEvent({ threadId, messageId: answerId }), "is an assistant answer"],
      [regenerateEvent({ threadId, messageId: threadId, userId: "intruder" }), "belongs to another user"],
    ] as const;
    for (const [event, message] of cases) {
      const run = await execute(regenerate, event);
      expect(run.error).toMatchObject({ name: "NonRetriableError", message: expect.stringContaining(message) });
    }

    expect(bed.model.requests).toHaveLength(0);
    expect(await countRows(bed.db.pool)).toEqual(before);
  });
});
