import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_CONTENT_LENGTH } from "../inngest.config.js";
import { ASSISTANT_SYSTEM_PROMPT } from "../src/agents/assistant.js";
import { historyEnvironment, readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import type { HistoryRow } from "../src/history/messages.js";
import { DEFAULT_HISTORY_MAXIMUMS, type HistoryEnvironment } from "../src/history/policy.js";
import { applyByteBudget } from "../src/history/token-budget.js";
import { execute, type Memo } from "./helpers/engine.js";
import { chatEvent, conversation, scriptedModel } from "./helpers/fixtures.js";
import { seedThread } from "./helpers/seed.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

const chatTurn = (historyEnv?: HistoryEnvironment) =>
  createChatTurn({
    db: bed.db.pool,
    model: scriptedModel(bed.model),
    ...(historyEnv ? { historyEnvironment: historyEnv } : {}),
  });

/** The history.get step's output as Inngest memoizes it (the one step output that carries summaryLag). */
async function historyStepOutput(memo: Memo): Promise<string> {
  const outputs = await Promise.all(memo.map(async (step) => JSON.stringify(await step.handler())));
  const found = outputs.filter((json) => json?.includes('"summaryLag"'));
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** Text of exactly MAX_CONTENT_LENGTH UTF-16 units that is expensive in JSON: CJK (3 bytes), control characters (6), escapes. */
const heavyText = (label: string) => {
  const pattern = '日本語\u0001"\\ab';
  return (label + pattern.repeat(Math.ceil(MAX_CONTENT_LENGTH / pattern.length))).slice(0, MAX_CONTENT_LENGTH);
};

describe("the byte budget of history.get", () => {
  it("with default settings, 40 turns of 32,000-character messages give a step output of at most 64 KB, newest turn first to stay", async () => {
    const { threadId } = await seedThread(bed.db.pool, {
      turns: 40,
      texts: (turn) => ({ question: heavyText(`turn ${turn} question: `), answer: heavyText(`turn ${turn} answer: `) }),
    });
    bed.model.script({ text: "ok" });
    const run = await execute(chatTurn(), chatEvent({ content: "question 41", threadId }));
    expect(run.error).toBeUndefined();

    const output = await historyStepOutput(run.memo);
    expect(Buffer.byteLength(output, "utf8")).toBeLessThanOrEqual(64_000);
    expect(run.result).toMatchObject({
      history: {
        maxBytes: DEFAULT_HISTORY_MAXIMUMS.maxBytes,
        sources: { maxBytes: "default" },
        bytes: { maxBytes: DEFAULT_HISTORY_MAXIMUMS.maxBytes },
      },
    });

    // The newest turn, cut to fit (its question and its answer each keep their beginning), then the current message once.
    const messages = bed.model.requests[0]!.messages;
    expect(messages[0]).toEqual({ role: "system", content: ASSISTANT_SYSTEM_PROMPT });
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "user"]);
    expect(String(messages[1]!.content)).toMatch(/^turn 40 question: 日本語/);
    expect(String(messages[2]!.content)).toMatch(/^turn 40 answer: 日本語/);
    for (const cut of messages.slice(1, 3))
      expect(String(cut.content)).toMatch(/\n\[… truncated by Threadline: \d+ characters omitted\]$/);
    expect(messages[3]).toEqual({ role: "user", content: "question 41" });
    expect(messages.filter((m) => m.content === "question 41")).toHaveLength(1);
  });

  it("keeps the newest whole turns that fit, in order, and the operator can change the budget", async () => {
    const turns = Array.from({ length: 12 }, (_, i): [string, string] => [
      `question ${i + 1} ${"lorem ipsum ".repeat(250)}`,
      `answer ${i + 1} ${"dolor sit ".repeat(300)}`,
    ]);
    const { threadId } = await conversation(chatTurn(), bed.model, turns);
    const env = historyEnvironment(readEnvironment({ HISTORY_MAX_BYTES: "20000" }));
    bed.model.script({ text: "ok" });
    const run = await execute(chatTurn(env), chatEvent({ content: "question 13", threadId }));
    expect(run.error).toBeUndefined();
    expect(Buffer.byteLength(await historyStepOutput(run.memo), "utf8")).toBeLessThanOrEqual(20_000 + 1_000);
    expect(run.result).toMatchObject({
      history: { maxBytes: 20_000, sources: { maxBytes: "environment" }, bytes: { truncated: [] } },
    });

    // About 6 KB a turn: the three newest turns fit, whole and in order.
    const texts = bed.model.requests[0]!.messages.slice(1).map((m) =>
      String(m.content).split(" ").slice(0, 2).join(" "),
    );
    expect(texts).toEqual([
      "question 10",
      "answer 10",
      "question 11",
      "answer 11",
      "question 12",
      "answer 12",
      "question 13",
    ]);
  });
});

describe("the byte budget on generated rows", () => {
  const piece = fc.oneof(
    fc.string({ unit: "grapheme", maxLength: 40 }),
    fc.constantFrom("\u0001", '"', "\\", "日本語", "😀", "\n"),
  );
  const longText = fc.array(piece, { maxLength: 400 }).map((pieces) => pieces.join(""));
  const row = (kind: "user" | "agent", text: string, n: number): HistoryRow => ({
    id: `${kind}-${n}`,
    kind,
    agentName: kind === "user" ? "user" : "assistant",
    content:
      kind === "user" ? { text } : { output: [{ type: "text", role: "assistant", content: text }], toolCalls: [] },
    createdAt: "2026-05-01T12:00:00.000Z",
  });

  it("what is kept never weighs more than the budget, and is the newest turns, whole or cut with the marker", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(longText, longText), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1_000, max: 20_000 }),
        (turns, maxBytes) => {
          const rows = turns.flatMap(([question, answer], n) => [row("user", question, n), row("agent", answer, n)]);
          const { rows: kept, report } = applyByteBudget(rows, maxBytes);
          const weight = kept.reduce((sum, r) => sum + Buffer.byteLength(JSON.stringify(r), "utf8") + 1, 0);
          expect(weight).toBeLessThanOrEqual(maxBytes);
          expect(report.bytes).toBe(weight);
          const keptIds = kept.map((r) => r.id);
          expect(keptIds).toEqual(rows.slice(rows.length - kept.length).map((r) => r.id));
          const cutIds = new Set(report.truncated.map((t) => t.id));
          for (const r of kept) {
            const original = rows.find((o) => o.id === r.id)!;
            if (cutIds.has(r.id))
              expect(JSON.stringify(r.content)).toMatch(/truncated by Threadline: \d+ characters omitted\]/);
            else expect(r).toEqual(original);
          }
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe("operator maximums", () => {
  const turns = Array.from({ length: 8 }, (_, i): [string, string] => [`question ${i + 1}`, `answer ${i + 1}`]);
  const questionsSent = () => bed.model.requests[0]!.messages.filter((m) => m.role === "user").map((m) => m.content);

  it("a request for more history than HISTORY_MAX_LENGTH gets the maximum, reported with its source", async () => {
    const { threadId } = await conversation(chatTurn(), bed.model, turns);
    const env = historyEnvironment(readEnvironment({ HISTORY_MAX_LENGTH: "3", HISTORY_MAX_TOKENS_CAP: "500" }));
    bed.model.script({ text: "ok" });
    const event = chatEvent({ content: "question 9", threadId });
    const run = await execute(chatTurn(env), {
      ...event,
      data: { ...event.data, history: { policy: "lastN", length: 1000, maxTokens: 2_000_000 } },
    });
    expect(run.error).toBeUndefined();
    expect(questionsSent()).toEqual(["question 7", "question 8", "question 9"]);
    expect(run.result).toMatchObject({
      history: {
        policy: "lastN",
        length: 3,
        maxTokens: 500,
        sources: { policy: "request", length: "operator-maximum", maxTokens: "operator-maximum" },
      },
    });
  });

  it("policy all under a length maximum reads every turn up to the maximum; a request within the maximums keeps its own source", async () => {
    const { threadId } = await conversation(chatTurn(), bed.model, turns);
    const env = historyEnvironment(readEnvironment({ HISTORY_MAX_LENGTH: "4" }));
    bed.model.script({ text: "ok" });
    const all = chatEvent({ content: "question 9", threadId });
    const run = await execute(chatTurn(env), { ...all, data: { ...all.data, history: { policy: "all" } } });
    expect(run.error).toBeUndefined();
    expect(questionsSent()).toEqual(["question 6", "question 7", "question 8", "question 9"]);
    expect(run.result).toMatchObject({
      history: { policy: "all", length: 4, sources: { policy: "request", length: "operator-maximum" } },
    });

    bed.model.reset();
    bed.model.script({ text: "ok" });
    const within = chatEvent({ content: "question 10", threadId });
    const second = await execute(chatTurn(env), {
      ...within,
      data: { ...within.data, history: { length: 2, maxTokens: 100 } },
    });
    expect(second.error).toBeUndefined();
    expect(questionsSent()).toEqual(["question 9", "question 10"]);
    expect(second.result).toMatchObject({
      history: { length: 2, maxTokens: 100, sources: { length: "request", maxTokens: "request" } },
    });
  });

  it("without operator settings the default maximums apply", async () => {
    const { threadId } = await conversation(chatTurn(), bed.model, turns.slice(0, 2));
    bed.model.script({ text: "ok" });
    const event = chatEvent({ content: "question 3", threadId });
    const run = await execute(chatTurn(), {
      ...event,
      data: { ...event.data, history: { length: 1000, maxTokens: 2_000_000 } },
    });
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({
      history: {
        length: DEFAULT_HISTORY_MAXIMUMS.length,
        maxTokens: DEFAULT_HISTORY_MAXIMUMS.maxTokens,
        maxBytes: DEFAULT_HISTORY_MAXIMUMS.maxBytes,
        sources: { length: "operator-maximum", maxTokens: "operator-maximum", maxBytes: "default" },
      },
    });
  });

  it("the operator's own settings must respect the maximums: a contradiction stops start-up, naming the variable", () => {
    expect(() => readEnvironment({ HISTORY_LENGTH: "50", HISTORY_MAX_LENGTH: "10" })).toThrow(
      /HISTORY_LENGTH: 50 is above HISTORY_MAX_LENGTH \(10\)/,
    );
    expect(() => readEnvironment({ HISTORY_MAX_TOKENS: "70000" })).toThrow(
      /HISTORY_MAX_TOKENS: 70000 is above HISTORY_MAX_TOKENS_CAP \(64000\)/,
    );
    expect(() => readEnvironment({ HISTORY_MAX_BYTES: "10" })).toThrow(/HISTORY_MAX_BYTES/);
    expect(historyEnvironment(readEnvironment({ HISTORY_MAX_LENGTH: "", HISTORY_MAX_BYTES: "100000" }))).toEqual({
      maximums: { maxBytes: 100_000 },
    });
  });
});
