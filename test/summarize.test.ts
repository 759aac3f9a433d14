import { beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { SUMMARIZER_SYSTEM_PROMPT } from "../src/agents/summarizer.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { createSummarizeThread } from "../src/functions/summarize-thread.js";
import { summaryContext } from "../src/history/messages.js";
import { ensureThread } from "../src/history/store.js";
import { execute, type Execution } from "./helpers/engine.js";
import { chatEvent, hasLoneSurrogate, scriptedModel } from "./helpers/fixtures.js";
import { storeAnsweredTurn } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

let chatTurn: ReturnType<typeof createChatTurn>;
let summarize: ReturnType<typeof createSummarizeThread>;

beforeAll(async () => {
  const deps = { db: bed.db.pool, model: scriptedModel(bed.model) };
  chatTurn = createChatTurn(deps);
  summarize = createSummarizeThread(deps);
});

const USER = "user-1";

/** The summary requests a chat turn sent (it also announces its own finish: threadline/turn.finished). */
const summaryRequests = (run: Execution) => run.sentEvents.filter((e) => e.name === "thread/summarize.requested");

/** Stores turns `from`..`to` ("message i" answered by "answer i") through the same storage calls a chat turn makes. */
async function seedTurns(threadId: string, from: number, to: number) {
  await ensureThread(bed.db.pool, threadId, USER);
  for (let i = from; i <= to; i++) {
    await storeAnsweredTurn(bed.db.pool, { threadId, userId: USER, question: `message ${i}`, answer: `answer ${i}` });
  }
}

async function chat(threadId: string, content: string) {
  bed.model.script({ text: `reply to ${content}` });
  const run = await execute(chatTurn, chatEvent({ threadId, content, userId: USER }));
  expect(run.error).toBeUndefined();
  return { run, request: bed.model.requests.at(-1)! };
}

const userSeq = async (threadId: string, text: string) =>
  Number(
    (
      await bed.db.pool.query(
        "SELECT seq FROM messages WHERE thread_id = $1 AND kind = 'user' AND content->>'text' = $2",
        [threadId, text],
      )
    ).rows[0].seq,
  );

const storedSummary = async (threadId: string) =>
  (
    await bed.db.pool.query(
      "SELECT covers_through_turn_seq::int AS covers, text FROM thread_summaries WHERE thread_id = $1",
      [threadId],
    )
  ).rows[0];

const textsOf = (request: { messages: { role: string; content?: unknown }[] }) =>
  request.messages.map((m) => `${m.role}: ${String(m.content)}`);

/** The window's user/answer pairs for turns from..to, as the model receives them. */
const turnsAsSent = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, k) => [
    `user: message ${from + k}`,
    `assistant: answer ${from + k}`,
  ]).flat();

/** Seeded turn i as the summarizer's request renders it: each message in its own fence. */
const turnAsSummarized = (i: number) =>
  `User:\n<user_message>\nmessage ${i}\n</user_message>\nAssistant (assistant):\n<assistant_message>\nanswer ${i}\n</assistant_message>`;

const summarizeEvent = (data: Record<string, unknown>) => ({ name: "thread/summarize.requested", data });

describe("progressive summarization", () => {
  it("summarizes the turns outside the window once they pass the threshold, then sends the summary and the recent turns only", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 30);

    // Turn 31: the window is turns 12..31; turns 1..11 (22 messages) lie outside it, past the threshold of 20.
    const { run: turn31 } = await chat(threadId, "message 31");
    expect(turn31.result).toMatchObject({ status: "completed", summaryRequested: true });
    const windowStart = await userSeq(threadId, "message 12");
    expect(summaryRequests(turn31)).toEqual([
      { name: "thread/summarize.requested", data: { threadId, userId: USER, beforeSeq: windowStart } },
    ]);

    bed.model.reset();
    bed.model.script({ text: "SUMMARY-1: the user sent messages 1 to 11." });
    const first = await execute(summarize, summarizeEvent(summaryRequests(turn31)[0]!.data));
    expect(first.error).toBeUndefined();
    expect(first.result).toMatchObject({ status: "stored", messagesSummarized: 22 });
    expect(bed.model.requests).toHaveLength(1);
    const [system, request] = bed.model.requests[0]!.messages;
    expect(system).toEqual({ role: "system", content: SUMMARIZER_SYSTEM_PROMPT });
    expect(request!.content).toBe(
      `Summarize this conversation:\n\n${Array.from({ length: 11 }, (_, k) => turnAsSummarized(k + 1)).join("\n")}`,
    );
    expect(await storedSummary(threadId)).toEqual({
      covers: await userSeq(threadId, "message 11"),
      text: "SUMMARY-1: the user sent messages 1 to 11.",
    });

    // Turn 32: the summary, then the window (turns 13..31), then the new message; nothing older.
    bed.model.reset();
    const { run: turn32, request: asked } = await chat(threadId, "message 32");
    expect(textsOf(asked)).toEqual([
      `system: ${ASSISTANT_SYSTEM_PROMPT}`,
      `user: ${summaryContext("SUMMARY-1: the user sent messages 1 to 11.")}`,
      ...turnsAsSent(13, 30),
      "user: message 31",
      "assistant: reply to message 31",
      "user: message 32",
    ]);
    // Only turn 12 (2 messages) lies between the summary and the window: no new request.
    expect(turn32.result).toMatchObject({ summaryRequested: false });
    expect(summaryRequests(turn32)).toEqual([]);
  });

  it("extends the previous summary with only the turns after it when summarizing again", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 30);
    const { run: turn31 } = await chat(threadId, "message 31");
    bed.model.script({ text: "SUMMARY-1" });
    expect((await execute(summarize, summarizeEvent(summaryRequests(turn31)[0]!.data))).error).toBeUndefined();

    await seedTurns(threadId, 32, 45);
    // Turn 46: the window is turns 27..46; turns 12..26 (30 messages) are outside and not in the summary.
    const { run: turn46 } = await chat(threadId, "message 46");
    expect(summaryRequests(turn46)).toEqual([
      {
        name: "thread/summarize.requested",
        data: { threadId, userId: USER, beforeSeq: await userSeq(threadId, "message 27") },
      },
    ]);

    bed.model.reset();
    bed.model.script({ text: "SUMMARY-2: messages 1 to 26." });
    const second = await execute(summarize, summarizeEvent(summaryRequests(turn46)[0]!.data));
    expect(second.error).toBeUndefined();
    expect(second.result).toMatchObject({ status: "stored", messagesSummarized: 30 });
    const request = String(bed.model.requests[0]!.messages[1]!.content);
    expect(request).toBe(
      `Previous summary:\n<previous_summary>\nSUMMARY-1\n</previous_summary>\n\nNew turns since that summary:\n\n${Array.from({ length: 15 }, (_, k) => turnAsSummarized(k + 12)).join("\n")}\n\nWrite the updated summary.`,
    );
    expect(await storedSummary(threadId)).toEqual({
      covers: await userSeq(threadId, "message 26"),
      text: "SUMMARY-2: messages 1 to 26.",
    });
    expect(
      (await bed.db.pool.query("SELECT count(*)::int AS n FROM thread_summaries WHERE thread_id = $1", [threadId]))
        .rows[0].n,
    ).toBe(1);

    bed.model.reset();
    const { request: asked } = await chat(threadId, "message 47");
    expect(textsOf(asked).slice(0, 4)).toEqual([
      `system: ${ASSISTANT_SYSTEM_PROMPT}`,
      `user: ${summaryContext("SUMMARY-2: messages 1 to 26.")}`,
      "user: message 28",
      "assistant: answer 28",
    ]);
    expect(textsOf(asked).join("\n")).not.toContain("SUMMARY-1");
  });

  it("leaves chat turns working when summarization fails", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 30);
    const { run: turn31 } = await chat(threadId, "message 31");

    bed.model.reset();
    bed.model.script({ status: 500 });
    const failed = await execute(summarize, summarizeEvent(summaryRequests(turn31)[0]!.data));
    expect(String((failed.error as { message?: string })?.message)).toContain("500");
    expect(await storedSummary(threadId)).toBeUndefined();

    bed.model.reset();
    const { run: turn32, request: asked } = await chat(threadId, "message 32");
    expect(turn32.result).toMatchObject({ status: "completed", answer: "reply to message 32", summaryRequested: true });
    expect(textsOf(asked)).toEqual([
      `system: ${ASSISTANT_SYSTEM_PROMPT}`,
      ...turnsAsSent(13, 30),
      "user: message 31",
      "assistant: reply to message 31",
      "user: message 32",
    ]);
    // The failed attempt stored nothing, so the next request starts from the beginning of the thread.
    expect(summaryRequests(turn32)).toEqual([
      {
        name: "thread/summarize.requested",
        data: { threadId, userId: USER, beforeSeq: await userSeq(threadId, "message 13") },
      },
    ]);

    // Inngest retries the failed run: the load step is memoized, only the model call runs again.
    bed.model.reset();
    bed.model.script({ text: "SUMMARY after retry" });
    const retried = await execute(summarize, summarizeEvent(summaryRequests(turn31)[0]!.data), {
      memo: failed.memo,
      runId: failed.runId,
    });
    expect(retried.error).toBeUndefined();
    expect(bed.model.requests).toHaveLength(1);
    expect(String(bed.model.requests[0]!.messages[1]!.content)).toContain(turnAsSummarized(11));
    expect(await storedSummary(threadId)).toEqual({
      covers: await userSeq(threadId, "message 11"),
      text: "SUMMARY after retry",
    });
  });

  it("does not request a summary while the turns outside the window stay within the threshold", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 29);
    // Turn 30: turns 1..10 (20 messages) are outside the window: at the threshold, not past it.
    const { run } = await chat(threadId, "message 30");
    expect(run.result).toMatchObject({ status: "completed", summaryRequested: false });
    expect(summaryRequests(run)).toEqual([]);
  });

  it("never cuts an emoji in half in the request: strict providers refuse a lone surrogate (HTTP 400) on every retry", async () => {
    const threadId = randomUUID();
    await ensureThread(bed.db.pool, threadId, USER);
    const emojiAtCut = `${"a".repeat(1_999)}🍞 and more`;
    await storeAnsweredTurn(bed.db.pool, { threadId, userId: USER, question: emojiAtCut, answer: "noted" });
    bed.model.script({ text: "SUMMARY" });
    const run = await execute(summarize, summarizeEvent({ threadId, userId: USER, beforeSeq: 100 }));
    expect(run.error).toBeUndefined();
    const request = String(bed.model.requests[0]!.messages[1]!.content);
    expect(hasLoneSurrogate(request)).toBe(false);
    expect(request).toContain(`<user_message>\n${"a".repeat(1_999)}… [truncated]\n</user_message>`);
  });

  it("stores the summary, not a reasoning model's <think> block before it", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 3);
    bed.model.script({ text: "<think>\nLet me summarize turns 1 to 3.\n</think>\n\nThe user sent three messages." });
    const run = await execute(summarize, summarizeEvent({ threadId, userId: USER, beforeSeq: 100 }));
    expect(run.error).toBeUndefined();
    expect((await storedSummary(threadId)).text).toBe("The user sent three messages.");
  });

  it("refuses to summarize another user's thread", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 3);
    const run = await execute(summarize, summarizeEvent({ threadId, userId: "someone-else", beforeSeq: 5 }));
    expect(String((run.error as { message?: string })?.message)).toContain("belongs to another user");
    expect(bed.model.requests).toHaveLength(0);
    expect(await storedSummary(threadId)).toBeUndefined();
  });
});

describe("a summary and a changed path", () => {
  it("drops the summary when an answer it covers is regenerated, so the model never sees the superseded answer", async () => {
    const threadId = randomUUID();
    await seedTurns(threadId, 1, 30);
    const { run: turn31 } = await chat(threadId, "message 31");
    bed.model.script({ text: "SUMMARY mentioning answer 5" });
    expect((await execute(summarize, summarizeEvent(summaryRequests(turn31)[0]!.data))).error).toBeUndefined();
    expect(await storedSummary(threadId)).toBeDefined();

    // Regenerate the answer to message 5, which the summary covers: the turns after it leave the path.
    const message5 = (
      await bed.db.pool.query("SELECT id FROM messages WHERE thread_id = $1 AND content->>'text' = 'message 5'", [
        threadId,
      ])
    ).rows[0].id;
    bed.model.reset();
    bed.model.script({ text: "answer 5, second try" });
    const regenerated = await execute(createRegenerate({ db: bed.db.pool, model: scriptedModel(bed.model) }), {
      name: "chat/message.regenerate",
      data: { threadId, messageId: message5, userId: USER },
    });
    expect(regenerated.error).toBeUndefined();
    expect(await storedSummary(threadId)).toBeUndefined();

    bed.model.reset();
    const { request } = await chat(threadId, "message 6 again");
    expect(textsOf(request)).toEqual([
      `system: ${ASSISTANT_SYSTEM_PROMPT}`,
      ...turnsAsSent(1, 4),
      "user: message 5",
      "assistant: answer 5, second try",
      "user: message 6 again",
    ]);
  });
});
