import { describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import * as sql from "../src/history/store-sql.js";
import { countingPool } from "./helpers/counting-pool.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows, threadWithRunningTurn } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { statementsPerStep, totalStatements } from "./helpers/step-statements.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** Most SQL statements one turn may send (issue 8: 25 on a 100-message thread before). */
const MAX_STATEMENTS_PER_TURN = 7;

/**
 * Each history step sends exactly one statement (one round trip, no BEGIN/COMMIT), every other
 * statement comes from a step too, and the turn stays within MAX_STATEMENTS_PER_TURN.
 */
function expectOneStatementPerHistoryStep(perStep: Map<string, number>, historySteps: string[]) {
  expect(Object.fromEntries([...perStep].filter(([step]) => step.startsWith("history.")))).toEqual(
    Object.fromEntries(historySteps.map((step) => [step, 1])),
  );
  expect(totalStatements(perStep)).toBeLessThanOrEqual(MAX_STATEMENTS_PER_TURN);
}

describe("SQL statements per history step and per turn", () => {
  it("a new thread: 2 statements, one storing the question (and creating the thread), one storing the answer and recording the inference's usage", async () => {
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "Hello!" });
    const event = chatEvent({ content: "Hi" });
    const run = await counting.run(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), event);

    expect(run.error).toBeUndefined();
    expectOneStatementPerHistoryStep(counting.perStep, ["history.append-user-message", "history.append-results"]);
    // The usage ledger's row (issue 21) is written by the answer's statement: a final answer has no usage step.
    expect(counting.perStep.has("usage.assistant")).toBe(false);
    expect(totalStatements(counting.perStep)).toBe(2);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user", "agent"]);
  });

  it("an existing 100-message thread: 2 statements, the question (which finds no earlier turn unfinished, so none is looked for) with its history window (19 earlier turns under lastN 20) and summary check in one, the answer with its usage", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 50 });
    expect(await threadRows(bed.db.pool, thread.threadId)).toHaveLength(100);
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "answer 51" });
    const run = await counting.run(
      createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }),
      chatEvent({ content: "question 51", threadId: thread.threadId }),
    );

    expect(run.error).toBeUndefined();
    // The summary check in the same read found 60 messages outside the window: a summary is requested.
    expect(run.result).toMatchObject({
      status: "completed",
      history: { from: "database", read: 38 },
      summaryRequested: true,
    });
    expectOneStatementPerHistoryStep(counting.perStep, ["history.append-user-message", "history.append-results"]);
    expect(counting.perStep.has("usage.assistant")).toBe(false);
    expect(totalStatements(counting.perStep)).toBe(2);
  });

  it("a regenerate on that thread: 3 statements, the message check before the turn's two", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 50 });
    const messageId = (await threadRows(bed.db.pool, thread.threadId)).filter((r) => r.kind === "user").at(-1)!.id;
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "answer 50, again" });
    const run = await counting.run(createRegenerate({ db: counting.pool, model: scriptedModel(bed.model) }), {
      name: "chat/message.regenerate",
      data: { threadId: thread.threadId, messageId, userId: thread.userId },
    });

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "answer 50, again" });
    expectOneStatementPerHistoryStep(counting.perStep, [
      "history.load-message",
      "history.append-user-message",
      "history.append-results",
    ]);
    expect(counting.perStep.has("usage.assistant")).toBe(false);
    expect(totalStatements(counting.perStep)).toBe(3);
  });

  it("a message sent with busy rollback while a turn runs: 6 statements, its stop of that turn one of them", async () => {
    const chatTurn = createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) });
    const { threadId } = await threadWithRunningTurn(bed.db.pool, chatTurn, bed.model, "I like compilers.");
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "Noted." });
    const event = chatEvent({ content: "Never mind.", threadId });
    const run = await counting.run(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, busy: "rollback" },
    });

    expect(run.error).toBeUndefined();
    expectOneStatementPerHistoryStep(counting.perStep, [
      "history.append-user-message",
      "history.find-turns-to-interrupt",
      "history.interrupt-turns",
      "history.find-earlier-turn",
      "history.get",
      "history.append-results",
    ]);
    expect(counting.perStep.has("usage.assistant")).toBe(false);
    expect(totalStatements(counting.perStep)).toBe(6);
  });

  it("an edit of that thread's 25th message: 2 statements, the existing thread's (the edit rides in the message's store)", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 50 });
    const edited = (await threadRows(bed.db.pool, thread.threadId)).filter((r) => r.kind === "user")[24]!.id;
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "answer 25, edited" });
    const event = chatEvent({ content: "question 25, edited", threadId: thread.threadId, userId: thread.userId });
    const run = await counting.run(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), {
      ...event,
      data: { ...event.data, edits: edited },
    });

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", history: { from: "database", read: 38 } });
    expectOneStatementPerHistoryStep(counting.perStep, ["history.append-user-message", "history.append-results"]);
    expect(counting.perStep.has("usage.assistant")).toBe(false);
    expect(totalStatements(counting.perStep)).toBe(2);
    expect((await threadRows(bed.db.pool, thread.threadId)).filter((r) => r.on_path)).toHaveLength(50);
  });

  it("a retried run sends no statement for the steps that already succeeded", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const counting = countingPool(bed.db.pool);
    const chatTurn = createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "question 3", threadId: thread.threadId });
    bed.model.script({ status: 500 });
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(counting.queries.filter((q) => q === sql.storeAnswer || q === sql.storeAnswerWithUsage)).toHaveLength(0);

    counting.queries.length = 0;
    bed.model.script({ text: "answer 3" });
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    expect(counting.queries).toEqual([sql.storeAnswerWithUsage]);
  });
});
