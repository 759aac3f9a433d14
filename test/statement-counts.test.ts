import { describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import * as sql from "../src/history/sql.js";
import { countingPool } from "./helpers/counting-pool.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/**
 * Every SQL statement a turn sends, in order, with the history step that sends it. Each history
 * step is one statement (one round trip, no BEGIN/COMMIT): the lists below are exact.
 */
const STEP_OF = new Map<string, string>([
  [sql.selectThreadMessage, "history.load-message"],
  [sql.beginTurn, "history.append-user-message"],
  [sql.selectHistoryWindow, "history.get"],
  [sql.storeAnswer, "history.append-results"],
]);
const steps = (queries: string[]) => queries.map((q) => STEP_OF.get(q) ?? q.trim().slice(0, 40));

describe("SQL statements per history step and per turn", () => {
  it("a new thread: 2 statements, one to store the question (creating the thread), one to store the answer", async () => {
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "Hello!" });
    const event = chatEvent({ content: "Hi" });
    const run = await execute(createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }), event);

    expect(run.error).toBeUndefined();
    expect(steps(counting.queries)).toEqual(["history.append-user-message", "history.append-results"]);
    expect((await threadRows(bed.db.pool, event.data.messageId)).map((r) => r.kind)).toEqual(["user", "agent"]);
  });

  it("an existing 100-message thread: 3 statements, history.get (19 earlier turns under lastN 20) and its summary check in one", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 50 });
    expect(await threadRows(bed.db.pool, thread.threadId)).toHaveLength(100);
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "answer 51" });
    const run = await execute(
      createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) }),
      chatEvent({ content: "question 51", threadId: thread.threadId }),
    );

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", history: { from: "database", read: 38 } });
    expect(steps(counting.queries)).toEqual(["history.append-user-message", "history.get", "history.append-results"]);
  });

  it("a regenerate on that thread: 4 statements, the message check before the turn's three", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 50 });
    const messageId = (await threadRows(bed.db.pool, thread.threadId)).filter((r) => r.kind === "user").at(-1)!.id;
    const counting = countingPool(bed.db.pool);
    bed.model.script({ text: "answer 50, again" });
    const run = await execute(createRegenerate({ db: counting.pool, model: scriptedModel(bed.model) }), {
      name: "chat/message.regenerate",
      data: { threadId: thread.threadId, messageId, userId: thread.userId },
    });

    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "answer 50, again" });
    expect(steps(counting.queries)).toEqual(["history.load-message", "history.append-user-message", "history.get", "history.append-results"]);
  });

  it("a retried run sends no statement for the steps that already succeeded", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const counting = countingPool(bed.db.pool);
    const chatTurn = createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "question 3", threadId: thread.threadId });
    bed.model.script({ status: 500 });
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(steps(counting.queries)).toEqual(["history.append-user-message", "history.get"]);

    counting.queries.length = 0;
    bed.model.script({ text: "answer 3" });
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    expect(steps(counting.queries)).toEqual(["history.append-results"]);
  });
});
