import { describe, expect, it } from "vitest";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import * as sql from "../src/history/store-sql.js";
import { countingPool } from "./helpers/counting-pool.js";
import { readHistory } from "../src/history/store.js";
import { applyTokenBudget } from "../src/history/token-budget.js";
import { execute } from "./helpers/engine.js";
import { chatEvent, scriptedModel } from "./helpers/fixtures.js";
import { expectedMessages, seedThread, turnsBetween, type SeededThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const MARKER = /\n\[… truncated by Threadline: (\d+) tokens omitted\]$/;

async function runTurn(thread: SeededThread, content: string, history: Record<string, unknown>) {
  bed.model.script({ text: "ok" });
  const event = chatEvent({ content, threadId: thread.threadId });
  const run = await execute(createChatTurn({ db: bed.db.pool, model: scriptedModel(bed.model) }), {
    ...event,
    data: { ...event.data, history },
  });
  expect(run.error).toBeUndefined();
  return {
    messages: bed.model.requests[0]!.messages,
    result: run.result as { history: { budget: { tokens: number; droppedRows: number; truncated: unknown[] } } },
  };
}

describe("token budget", () => {
  it("with a small budget the oldest turns go first: the model sees the most recent turns that fit, whole", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 12, toolTurns: [11] });
    const { messages, result } = await runTurn(thread, "question 13", { policy: "all", maxTokens: 120 });
    const { budget } = result.history;
    expect(budget.droppedRows).toBeGreaterThan(0);
    expect(budget.tokens).toBeLessThanOrEqual(120);
    // What reached the model is exactly a run of the latest turns (the tool turn 11 included), then the current message.
    const firstKept = (messages[1]!.content as string).match(/^question (\d+)$/)![1]!;
    expect(Number(firstKept)).toBeLessThan(11);
    expect(messages).toEqual([
      { role: "system", content: ASSISTANT_SYSTEM_PROMPT },
      ...expectedMessages(turnsBetween(thread.entries, Number(firstKept), 12)),
      { role: "user", content: "question 13" },
    ]);
  });

  it("never separates a tool call from its result, whatever the budget", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 8, toolTurns: [3, 6, 7], systemBefore: [1, 5] });
    const event = {
      threadId: thread.threadId,
      userId: thread.userId,
      beforeSeq: Number.MAX_SAFE_INTEGER,
      window: { userMessages: null, preserveSystemMessages: true },
    };
    const rows = await readHistory(bed.db.pool, event);
    const userRows = rows.filter((r) => r.kind === "user").map((r) => r.id);
    let previousKept = -1;
    for (let budget = 1; budget <= 400; budget += 1) {
      const kept = applyTokenBudget(rows, budget);
      expect(kept.report.tokens).toBeLessThanOrEqual(budget);
      const callIds = kept.rows.flatMap((r) =>
        (r.kind === "agent"
          ? (r.content as { output: { type: string; tools?: { id: string }[] }[] }).output
          : []
        ).flatMap((m) => m.tools?.map((t) => t.id) ?? []),
      );
      const resultIds = kept.rows.flatMap((r) =>
        r.kind === "agent"
          ? (r.content as { toolCalls: { tool: { id: string } }[] }).toolCalls.map((t) => t.tool.id)
          : [],
      );
      expect(callIds).toEqual(resultIds);
      // Turns are kept whole and contiguous up to the newest: the kept user messages are a suffix.
      const keptUsers = kept.rows.filter((r) => r.kind === "user").map((r) => r.id);
      expect(keptUsers).toEqual(keptUsers.length === 0 ? [] : userRows.slice(-keptUsers.length));
      expect(kept.report.truncated).toEqual([]);
      // A bigger budget never keeps fewer turns.
      expect(keptUsers.length).toBeGreaterThanOrEqual(previousKept);
      previousKept = keptUsers.length;
    }
    expect(previousKept).toBe(8);
  });

  it("a huge single message is cut to fit, with the marker, instead of being sent whole or dropped", async () => {
    const words = Array.from({ length: 5_000 }, (_, i) => `word${i}`).join(" ");
    const thread = await seedThread(bed.db.pool, { turns: 1, longQuestion: { turn: 1, text: words } });
    const { messages, result } = await runTurn(thread, "question 2", { policy: "all", maxTokens: 500 });
    expect(messages).toHaveLength(4);
    const cut = messages[1]!.content as string;
    const marker = cut.match(MARKER);
    expect(marker).not.toBeNull();
    const kept = cut.slice(0, marker!.index);
    expect(words.startsWith(kept)).toBe(true);
    expect(kept.length).toBeGreaterThan(100);
    expect(kept.length).toBeLessThan(words.length / 5);
    expect(messages[2]).toEqual({ role: "assistant", content: "answer 1" });
    expect(result.history.budget.truncated).toEqual([{ id: expect.any(String), omittedTokens: Number(marker![1]) }]);
    expect(result.history.budget.tokens).toBeLessThanOrEqual(500);
  });

  it("the current message is never dropped or cut, even when it alone is over the budget", async () => {
    const thread = await seedThread(bed.db.pool, { turns: 3 });
    const huge = Array.from({ length: 2_000 }, (_, i) => `token${i}`).join(" ");
    const { messages } = await runTurn(thread, huge, { policy: "all", maxTokens: 30 });
    expect(messages.at(-1)).toEqual({ role: "user", content: huge });
    expect(messages.filter((m) => m.content === huge)).toHaveLength(1);
  });

  it("a retried run reuses the memoized, budgeted history: nothing is read again and the model sees the same cut", async () => {
    const words = Array.from({ length: 3_000 }, (_, i) => `word${i}`).join(" ");
    const thread = await seedThread(bed.db.pool, { turns: 1, longQuestion: { turn: 1, text: words } });
    const counting = countingPool(bed.db.pool);
    const chatTurn = createChatTurn({ db: counting.pool, model: scriptedModel(bed.model) });
    const event = chatEvent({ content: "question 2", threadId: thread.threadId });
    const withBudget = { ...event, data: { ...event.data, history: { policy: "all", maxTokens: 300 } } };

    bed.model.script({ status: 500 });
    const failed = await execute(chatTurn, withBudget);
    expect(failed.error).toBeDefined();
    // The history is read once, by the statement that stores the message (no turn is ahead).
    const readsHistory = (q: string) => q === sql.selectHistoryWindow || q === sql.beginTurn;
    const reads = counting.queries.filter(readsHistory).length;
    expect(reads).toBe(1);

    bed.model.script({ text: "ok" });
    const retried = await execute(chatTurn, withBudget, { memo: failed.memo, runId: failed.runId });
    expect(retried.error).toBeUndefined();
    expect(counting.queries.filter(readsHistory).length).toBe(reads);
    expect(bed.model.requests).toHaveLength(2);
    expect(bed.model.requests[1]!.messages).toEqual(bed.model.requests[0]!.messages);
    expect(bed.model.requests[1]!.messages[1]!.content).toMatch(MARKER);
    expect(retried.result).toMatchObject({
      history: { from: "database", budget: { maxTokens: 300, truncated: [{ omittedTokens: expect.any(Number) }] } },
    });
  });
});
