import { beforeAll, describe, expect, it } from "vitest";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { resultId } from "../src/history/ids.js";
import * as storeSql from "../src/history/store-sql.js";
import * as summariesSql from "../src/history/summaries-sql.js";
import { MAX_PAGE_SIZE, readMessagePage } from "../src/history/message-pages.js";
import { beginTurn, storeAnswer } from "../src/history/store.js";
import { readSummarySource, storeSummary } from "../src/history/summaries.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, conversation, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let regenerate: ReturnType<typeof createRegenerate>;
let summarize: ReturnType<typeof createSummarizeThread>;

beforeAll(() => {
  const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
  chatTurn = createChatTurn(deps);
  regenerate = createRegenerate(deps);
  summarize = createSummarizeThread(deps);
});

const regenerateEvent = (threadId: string, messageId: string) => ({
  name: "chat/message.regenerate",
  data: { threadId, messageId, userId: "user-1" },
});

/** Until the scripted model has received `count` requests: the run that sent the last one is now waiting for its answer. */
async function modelReached(count: number) {
  while (bed.model.requests.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
}

function textOf(content: unknown): string {
  const stored = content as { text?: string; output?: { content: string }[] };
  return stored.text ?? (stored.output ?? []).map((o) => o.content).join("");
}

/** The current path as the messages API shows it, as [role, text] pairs. */
async function shownPath(threadId: string) {
  return (await readMessagePage(bed.db.pool, { threadId, userId: "user-1", limit: MAX_PAGE_SIZE })).messages.map(
    (m) => [m.role, textOf(m.content)],
  );
}

/** Answers on the current path whose question is not on it: must always be none. */
async function answersWithoutQuestion(threadId: string) {
  const { rows } = await bed.db.pool.query(
    `SELECT a.id FROM messages a JOIN messages q ON q.id = a.answers
     WHERE a.thread_id = $1 AND a.on_path AND NOT q.on_path`,
    [threadId],
  );
  return rows;
}

/** Whether the thread's stored summary covers a message that is off the current path: must always be false. */
async function summaryCoversDetached(threadId: string): Promise<boolean> {
  const { rows } = await bed.db.pool.query(
    `SELECT EXISTS (
       SELECT 1 FROM thread_summaries s JOIN messages m ON m.thread_id = s.thread_id
       WHERE s.thread_id = $1 AND NOT m.on_path AND m.turn_seq <= s.covers_through_turn_seq
     ) AS covers`,
    [threadId],
  );
  return rows[0].covers;
}

const storedSummary = async (threadId: string) =>
  (
    await bed.db.pool.query(
      "SELECT covers_through_turn_seq::int AS covers, text FROM thread_summaries WHERE thread_id = $1",
      [threadId],
    )
  ).rows[0];

describe("a regenerate racing a new message", () => {
  it("regenerate stored while the new message's turn waits on the model: the new answer is stored off the path and its turn superseded", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["one", "ONE"],
      ["two", "TWO"],
    ]);
    const three = chatEvent({ threadId, content: "three" });
    bed.model.script({ text: "answer to three", delayMs: 400 }, { text: "ONE (regenerated)" });

    const threeRun = execute(chatTurn, three);
    await modelReached(1);
    const regenerated = await execute(regenerate, regenerateEvent(threadId, messageIds[0]!));
    expect(regenerated.error).toBeUndefined();
    const answered = await threeRun;
    expect(answered.error).toBeUndefined();

    expect(await shownPath(threadId)).toEqual([
      ["user", "one"],
      ["assistant", "ONE (regenerated)"],
    ]);
    expect(await answersWithoutQuestion(threadId)).toEqual([]);
    expect(await turnsOf(bed.db.pool, three.data.messageId)).toMatchObject([{ status: "superseded" }]);
    const answerToThree = (await threadRows(bed.db.pool, threadId)).find((r) => r.answers === three.data.messageId)!;
    expect([textOf(answerToThree.content), answerToThree.on_path]).toEqual(["answer to three", false]);

    // The next turn sees the current path only: no answer without its question.
    bed.model.reset();
    bed.model.script({ text: "ok" });
    expect((await execute(chatTurn, chatEvent({ threadId, content: "four" }))).error).toBeUndefined();
    expect(bed.model.requests[0]!.messages.slice(1)).toEqual([
      { role: "user", content: "one" },
      { role: "assistant", content: "ONE (regenerated)" },
      { role: "user", content: "four" },
    ]);
  });

  it("new message sent while the regenerate waits on the model: its turn waits for the regenerate and follows its answer on the path", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["one", "ONE"],
      ["two", "TWO"],
    ]);
    const three = chatEvent({ threadId, content: "three" });
    bed.model.reset();
    bed.model.script({ text: "ONE (regenerated)", delayMs: 400 }, { text: "answer to three" });

    const regenerating = execute(regenerate, regenerateEvent(threadId, messageIds[0]!));
    await modelReached(1);
    // The new turn stores its question at once, then waits durably for the running regenerate.
    const answered = await execute(chatTurn, three);
    expect(answered.error).toBeUndefined();
    expect((await regenerating).error).toBeUndefined();
    expect(answered.stepIds.some((id) => id.startsWith("history.wait-for-turn"))).toBe(true);

    // The regenerate replaced what followed "one" when it began ("two"), not the message sent since.
    expect(await shownPath(threadId)).toEqual([
      ["user", "one"],
      ["assistant", "ONE (regenerated)"],
      ["user", "three"],
      ["assistant", "answer to three"],
    ]);
    expect(await answersWithoutQuestion(threadId)).toEqual([]);
    expect(await turnsOf(bed.db.pool, three.data.messageId)).toMatchObject([{ status: "completed" }]);
    // The model answered "three" after the regenerated answer, as the path now shows it.
    expect(bed.model.requests[1]!.messages.slice(1)).toEqual([
      { role: "user", content: "one" },
      { role: "assistant", content: "ONE (regenerated)" },
      { role: "user", content: "three" },
    ]);
    // In the tree, "three" follows the regenerated variant of "one".
    const { rows } = await bed.db.pool.query("SELECT parent_id, parent_variant FROM messages WHERE id = $1", [
      three.data.messageId,
    ]);
    expect(rows[0]).toEqual({ parent_id: messageIds[0], parent_variant: 2 });
  });

  it("new message sent while the last answer is regenerated: it follows the new variant", async () => {
    const { threadId, messageIds } = await conversation(chatTurn, bed.model, [
      ["one", "ONE"],
      ["two", "TWO"],
    ]);
    const three = chatEvent({ threadId, content: "three" });
    bed.model.reset();
    bed.model.script({ text: "TWO (regenerated)", delayMs: 400 }, { text: "answer to three" });

    const regenerating = execute(regenerate, regenerateEvent(threadId, messageIds[1]!));
    await modelReached(1);
    expect((await execute(chatTurn, three)).error).toBeUndefined();
    expect((await regenerating).error).toBeUndefined();

    expect(await shownPath(threadId)).toEqual([
      ["user", "one"],
      ["assistant", "ONE"],
      ["user", "two"],
      ["assistant", "TWO (regenerated)"],
      ["user", "three"],
      ["assistant", "answer to three"],
    ]);
    const { rows } = await bed.db.pool.query("SELECT parent_id, parent_variant FROM messages WHERE id = $1", [
      three.data.messageId,
    ]);
    expect(rows[0]).toEqual({ parent_id: messageIds[1], parent_variant: 2 });
  });

  it("driven through the store directly: an answer whose question left the path is stored off it, and a retry stores nothing twice", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 2 });
    const { threadId, userId } = thread;
    const [first] = (await threadRows(bed.db.pool, threadId)).filter((r) => r.kind === "user");
    const answer = (text: string, messageId: string, variant: number) => [
      {
        id: resultId(messageId, variant, 0),
        agentName: "assistant",
        content: { output: [{ type: "text" as const, role: "assistant" as const, content: text }], toolCalls: [] },
      },
    ];

    const threeId = crypto.randomUUID();
    const three = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: threeId, text: "three" },
      turn: { runId: "run-three", kind: "chat" },
    });
    const regen = await beginTurn(bed.db.pool, {
      threadId,
      userId,
      message: { id: first!.id, text: "question 1" },
      turn: { runId: "run-regen", kind: "regenerate", eventId: "event-regen" },
    });
    await storeAnswer(bed.db.pool, {
      threadId,
      userId,
      runId: "run-regen",
      messageId: first!.id,
      messageSeq: regen.messageSeq,
      variant: regen.variant,
      detachLaterTurns: true,
      results: answer("answer 1, again", first!.id, regen.variant),
    });
    const late = {
      threadId,
      userId,
      runId: "run-three",
      messageId: threeId,
      messageSeq: three.messageSeq,
      variant: three.variant,
      detachLaterTurns: false,
      results: answer("answer to three", threeId, three.variant),
    };
    expect(await storeAnswer(bed.db.pool, late)).toMatchObject({ inserted: 1, status: "superseded" });
    expect(await storeAnswer(bed.db.pool, late)).toMatchObject({ inserted: 0, status: "superseded" });

    expect(await shownPath(threadId)).toEqual([
      ["user", "question 1"],
      ["assistant", "answer 1, again"],
    ]);
    expect(await answersWithoutQuestion(threadId)).toEqual([]);
  });
});

describe("a summarizer racing a regenerate", () => {
  /** A thread of 31 turns whose 31st asked for a summary of turns 1..11 (outside its window). */
  async function threadAskingForSummary() {
    const thread = await seedThread(bed.db.pool, { turns: 30 });
    bed.model.script({ text: "answer 31" });
    const turn31 = await execute(chatTurn, chatEvent({ threadId: thread.threadId, content: "question 31" }));
    expect(turn31.result).toMatchObject({ summaryRequested: true });
    bed.model.reset();
    const message5 = (await threadRows(bed.db.pool, thread.threadId)).find(
      (r) => r.kind === "user" && textOf(r.content) === "question 5",
    )!.id;
    const request = turn31.sentEvents.find((event) => event.name === "thread/summarize.requested")!;
    return { threadId: thread.threadId, request, message5 };
  }

  it("regenerate stored while the summarizer waits on the model: the summary built from the old path is not stored", async () => {
    const { threadId, request, message5 } = await threadAskingForSummary();
    bed.model.script({ text: "SUMMARY of the old path", delayMs: 400 }, { text: "answer 5, again" });

    const summarizing = execute(summarize, request);
    await modelReached(1);
    expect((await execute(regenerate, regenerateEvent(threadId, message5))).error).toBeUndefined();
    const summarized = await summarizing;

    expect(summarized.error).toBeUndefined();
    expect(summarized.result).toMatchObject({ status: "superseded" });
    expect(await storedSummary(threadId)).toBeUndefined();
    expect(await summaryCoversDetached(threadId)).toBe(false);
  });

  it("summary stored while the regenerate waits on the model: storing the regenerate's answer drops it", async () => {
    const { threadId, request, message5 } = await threadAskingForSummary();
    bed.model.script({ text: "answer 5, again", delayMs: 400 }, { text: "SUMMARY of the old path" });

    const regenerating = execute(regenerate, regenerateEvent(threadId, message5));
    await modelReached(1);
    const summarized = await execute(summarize, request);
    expect(summarized.result).toMatchObject({ status: "stored" });
    expect((await regenerating).error).toBeUndefined();

    expect(await storedSummary(threadId)).toBeUndefined();
    expect(await summaryCoversDetached(threadId)).toBe(false);

    // The next turn never sees the summary of the detached turns.
    bed.model.reset();
    bed.model.script({ text: "ok" });
    expect((await execute(chatTurn, chatEvent({ threadId, content: "question 6 again" }))).error).toBeUndefined();
    expect(JSON.stringify(bed.model.requests[0]!.messages)).not.toContain("SUMMARY of the old path");
  });

  it("driven through the store directly: a summary read before a detach is refused, one read after it is stored", async () => {
    const { threadId, message5 } = await threadAskingForSummary();
    const beforeSeq = (await threadRows(bed.db.pool, threadId)).find(
      (r) => r.kind === "user" && textOf(r.content) === "question 12",
    )!.seq;
    const read = await readSummarySource(bed.db.pool, { threadId, userId: "user-1", beforeSeq, maxMessages: 200 });

    const regen = await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: message5, text: "question 5" },
      turn: { runId: "run-regen-5", kind: "regenerate", eventId: "event-regen-5" },
    });
    await storeAnswer(bed.db.pool, {
      threadId,
      userId: "user-1",
      runId: "run-regen-5",
      messageId: message5,
      messageSeq: regen.messageSeq,
      variant: regen.variant,
      detachLaterTurns: true,
      results: [
        {
          id: resultId(message5, regen.variant, 0),
          agentName: "assistant",
          content: { output: [{ type: "text", role: "assistant", content: "answer 5, again" }], toolCalls: [] },
        },
      ],
    });
    const summary = (source: typeof read) => ({
      threadId,
      coversThrough: source.messages.at(-1)!.turnSeq,
      text: "summary",
      extends: null,
      pathVersion: source.pathVersion,
    });
    expect(await storeSummary(bed.db.pool, summary(read))).toEqual({ stored: false });

    const reread = await readSummarySource(bed.db.pool, {
      threadId,
      userId: "user-1",
      beforeSeq: regen.messageSeq,
      maxMessages: 200,
    });
    expect(reread.pathVersion).toBeGreaterThan(read.pathVersion);
    expect(await storeSummary(bed.db.pool, summary(reread))).toEqual({ stored: true });
    expect(await summaryCoversDetached(threadId)).toBe(false);
  });

  it("under the thread lock, in both orders: a summary store waiting for a detach is refused; a detach waiting for a summary store drops it", async () => {
    const { threadId, message5 } = await threadAskingForSummary();
    const beforeSeq = (await threadRows(bed.db.pool, threadId)).find(
      (r) => r.kind === "user" && textOf(r.content) === "question 12",
    )!.seq;
    const read = await readSummarySource(bed.db.pool, { threadId, userId: "user-1", beforeSeq, maxMessages: 200 });
    const summary = {
      threadId,
      coversThrough: read.messages.at(-1)!.turnSeq,
      text: "summary",
      extends: null,
      pathVersion: read.pathVersion,
    };
    const regen = await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: message5, text: "question 5" },
      turn: { runId: "run-lock-5", kind: "regenerate", eventId: "event-lock-5" },
    });
    const answer = [
      {
        id: resultId(message5, regen.variant, 0),
        agentName: "assistant",
        content: {
          output: [{ type: "text" as const, role: "assistant" as const, content: "answer 5, again" }],
          toolCalls: [],
        },
      },
    ];
    const settled = (promise: Promise<unknown>) =>
      Promise.race([promise.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 200))]);

    // The detach holds the lock (not committed yet) when the summary is stored: the summary waits, then sees the new version.
    const detaching = await bed.db.pool.connect();
    try {
      await detaching.query("BEGIN");
      await detaching.query(storeSql.storeAnswer, [
        threadId,
        "user-1",
        "run-lock-5",
        message5,
        regen.messageSeq,
        regen.variant,
        true,
        JSON.stringify(answer),
        null,
      ]);
      const storing = storeSummary(bed.db.pool, summary);
      expect(await settled(storing)).toBe(false);
      await detaching.query("COMMIT");
      expect(await storing).toEqual({ stored: false });
    } finally {
      detaching.release();
    }

    // The summary (now covering turn 5) holds the lock when the next regenerate of message 5 stores: it waits, then drops the summary.
    const reread = await readSummarySource(bed.db.pool, {
      threadId,
      userId: "user-1",
      beforeSeq: regen.messageSeq + 1,
      maxMessages: 200,
    });
    expect(reread.messages.at(-1)!.turnSeq).toBe(regen.messageSeq);
    const again = await beginTurn(bed.db.pool, {
      threadId,
      userId: "user-1",
      message: { id: message5, text: "question 5" },
      turn: { runId: "run-lock-5b", kind: "regenerate", eventId: "event-lock-5b" },
    });
    const summarizing = await bed.db.pool.connect();
    try {
      await summarizing.query("BEGIN");
      await summarizing.query(summariesSql.storeSummary, [
        threadId,
        reread.messages.at(-1)!.turnSeq,
        "summary",
        null,
        reread.pathVersion,
      ]);
      const storing = storeAnswer(bed.db.pool, {
        threadId,
        userId: "user-1",
        runId: "run-lock-5b",
        messageId: message5,
        messageSeq: again.messageSeq,
        variant: again.variant,
        detachLaterTurns: true,
        results: [{ ...answer[0]!, id: resultId(message5, again.variant, 0) }],
      });
      expect(await settled(storing)).toBe(false);
      await summarizing.query("COMMIT");
      expect(await storing).toMatchObject({ inserted: 1, status: "completed" });
    } finally {
      summarizing.release();
    }
    expect(await storedSummary(threadId)).toBeUndefined();
    expect(await summaryCoversDetached(threadId)).toBe(false);
  });
});
