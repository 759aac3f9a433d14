import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { execute, executeFailureHandler, memoBefore, MODEL_TIMEOUT_MS, type Execution } from "./helpers/engine.js";
import { chatEvent, conversation, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { startModelServer, type ModelServer } from "./helpers/model-server.js";
import { startOwnDatabase, type OwnDatabase } from "./helpers/own-database.js";

/**
 * Every fault a turn can meet, at every history step: the database stopped, the model failing
 * (500, timeout), the process killed between a step's commit and Inngest storing its result.
 * After recovery each thread has every user message exactly once and one current answer per
 * message. The history steps are discovered from a clean run, not listed here, so the matrix
 * follows the turn when its steps change.
 */

// A PostgreSQL server this file owns, so it can stop it in the middle of a turn.
let database: OwnDatabase;
let server: OwnDatabase["server"];
let pool: OwnDatabase["pool"];
let model: ModelServer;
let chatTurn: ReturnType<typeof createChatTurn>;
/** The history steps of a chat turn on an existing thread, in the order a clean run reaches them. */
let historySteps: string[];

beforeAll(async () => {
  [database, model] = await Promise.all([startOwnDatabase("faults"), startModelServer()]);
  ({ server, pool } = database);
  chatTurn = createChatTurn({ db: pool, model: scriptedModel(model) });

  const { threadId } = await conversation(chatTurn, model, [["Hello.", "Hi."]]);
  model.script({ text: "Probe answer." });
  const probe = await execute(chatTurn, chatEvent({ threadId, content: "Probe." }));
  expect(probe.error).toBeUndefined();
  historySteps = probe.stepIds.filter((id) => id.startsWith("history."));
}, 120_000);
afterAll(async () => {
  await database?.close();
  await model?.close();
});
beforeEach(() => model.reset());

/** Every user message once, in the order sent, and exactly one current answer to each. */
async function expectConsistent(threadId: string, messageIds: string[]) {
  const rows = await threadRows(pool, threadId);
  expect(rows.filter((r) => r.kind === "user" && r.on_path).map((r) => r.id)).toEqual(messageIds);
  expect(rows.filter((r) => r.kind === "user")).toHaveLength(messageIds.length);
  for (const id of messageIds) {
    const current = rows.filter((r) => r.kind === "agent" && r.on_path && r.answers === id);
    expect(current, `current answers to ${id}`).toHaveLength(1);
  }
}

/** A thread with one answered turn and the event of its next message. */
async function nextMessage(content: string) {
  const { threadId, messageIds } = await conversation(chatTurn, model, [["Hello.", "Hi."]]);
  const event = chatEvent({ threadId, content });
  return { threadId, event, messageIds: [...messageIds, event.data.messageId] };
}

describe("fault matrix", () => {
  it("covers the history steps a clean turn runs", () => {
    // history.find-earlier-turn and history.get run only with a turn ahead as the message is stored
    // (test/turn-waits.test.ts): otherwise the history window comes with the message.
    expect(historySteps).toEqual(["history.append-user-message", "history.append-results"]);
  });

  it("the database stopped at each history step: that step fails, and once the database is back the retry completes the turn", async () => {
    for (const stepId of historySteps) {
      const { threadId, event, messageIds } = await nextMessage(`Question with the database stopped at ${stepId}.`);
      model.script({ text: `Answer after ${stepId}.` });
      let stopped = false;
      const failed = await execute(chatTurn, event, {
        beforeStep: async (id) => {
          if (id !== stepId) return;
          stopped = true;
          await server.stop();
        },
      });
      expect(stopped, stepId).toBe(true);
      expect(failed.error, stepId).toBeDefined();
      await server.start();

      const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
      expect(retried.error, stepId).toBeUndefined();
      expect(retried.result, stepId).toMatchObject({ status: "completed", answer: `Answer after ${stepId}.` });
      expect(model.requests, stepId).toHaveLength(1);
      await expectConsistent(threadId, messageIds);
      model.reset();
    }
  }, 120_000);

  it("the process killed between each history step's commit and its stored result: the step runs again and nothing doubles", async () => {
    for (const stepId of historySteps) {
      const { threadId, event, messageIds } = await nextMessage(`Question killed after ${stepId}.`);
      model.script({ text: `First answer (${stepId}).` }, { text: `Second answer (${stepId}).` });
      const full = await execute(chatTurn, event);
      expect(full.error, stepId).toBeUndefined();

      const replayed = await execute(chatTurn, event, { memo: memoBefore(full, stepId), runId: full.runId });
      expect(replayed.error, stepId).toBeUndefined();
      await expectConsistent(threadId, messageIds);
      expect(await turnsOf(pool, event.data.messageId), stepId).toMatchObject([
        { run_id: full.runId, status: "completed" },
      ]);
      model.reset();
    }
  }, 120_000);

  it("the model failing with 500: the step's retry completes the turn with one answer", async () => {
    const { threadId, event, messageIds } = await nextMessage("Question while the model fails.");
    model.script({ status: 500, body: { error: { message: "The server had an error", type: "server_error" } } });
    const failed = await execute(chatTurn, event);
    expect(String((failed.error as Error).message)).toMatch(/HTTP 500/);

    model.script({ text: "Answer after the outage." });
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    await expectConsistent(threadId, messageIds);
  });

  it("the model timing out for good: the turn is recorded failed and releases the thread, a regenerate answers the message, the next one is answered", async () => {
    const { threadId, event, messageIds } = await nextMessage("Question the model never answers.");
    model.script({ text: "Too late.", delayMs: MODEL_TIMEOUT_MS + 300 });
    const failed: Execution = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    const { name, message } = failed.error as Error;
    const failure = await executeFailureHandler(chatTurn, { runId: failed.runId, event, error: { name, message } });
    expect(failure.sentEvents).toMatchObject([
      { name: "threadline/turn.finished", data: { runId: failed.runId, status: "failed" } },
    ]);
    expect(await turnsOf(pool, event.data.messageId)).toMatchObject([
      { status: "failed", error: expect.stringMatching(/did not answer in time/) },
    ]);

    model.script({ text: "Answer, regenerated." });
    const regenerate = createRegenerate({ db: pool, model: scriptedModel(model) });
    const regenerated = await execute(regenerate, {
      name: "chat/message.regenerate",
      data: { threadId, messageId: event.data.messageId, userId: "user-1" },
    });
    expect(regenerated.error).toBeUndefined();

    // The next message does not wait for anything: the failed turn released the thread.
    model.script({ text: "Answer to the next message." });
    const next = chatEvent({ threadId, content: "Next question." });
    const nextRun = await execute(chatTurn, next, {
      waits: async () => Promise.reject(new Error("nothing should be waited for")),
    });
    expect(nextRun.error).toBeUndefined();
    await expectConsistent(threadId, [...messageIds, next.data.messageId]);
  });
});
