import { randomUUID } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { budgetCommand } from "../scripts/budget.js";
import { asksForTools, costOf, DEFAULT_PRICES, reportedUsage } from "../src/agents/usage.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { NO_MEMORY } from "../src/memory/components.js";
import type { SelectUserUsageRow } from "../src/history/export-sql.js";
import { budgetRefusal, setUserBudget, turnUsage } from "../src/history/usage.js";
import { execute, StepFault } from "./helpers/engine.js";
import { chatEvent, countRows, scriptedModel } from "./helpers/fixtures.js";
import { asUser, createTestApp } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();

/** The scripted model's price: 1 USD per million input tokens, 0.5 cached, 4 output. */
const prices = { "scripted-model": { input: 1, output: 4, cachedInput: 0.5 } };
const gateway = () => ({ db: bed.db.pool, model: scriptedModel(bed.model), prices });
const streaming = () => ({ ...gateway(), inference: "stream" as const });

/** A usage_records row: the export's row type, with its owner (the export reads one user's rows). */
type LedgerRow = Omit<SelectUserUsageRow, "cursor_at"> & { user_id: string };

const ledger = async (where: { runId?: string; userId?: string }) =>
  (
    await bed.db.pool.query<LedgerRow>(
      "SELECT * FROM usage_records WHERE ($1::text IS NULL OR run_id = $1) AND ($2::text IS NULL OR user_id = $2) ORDER BY created_at, key",
      [where.runId ?? null, where.userId ?? null],
    )
  ).rows;

const reported = {
  prompt_tokens: 1_200,
  completion_tokens: 300,
  total_tokens: 1_500,
  prompt_tokens_details: { cached_tokens: 200 },
  completion_tokens_details: { reasoning_tokens: 50 },
};
/** 1000 uncached input at 1, 200 cached at 0.5, 300 output at 4, per million. */
const reportedCost = (1_000 * 1 + 200 * 0.5 + 300 * 4) / 1_000_000;

describe("the usage ledger", () => {
  it("INFERENCE=gateway: the answer's reported usage is stored with its turn, once, however often the run replays", async () => {
    bed.model.script({ text: "Counted.", usage: reported });
    const event = chatEvent({ content: "Count me.", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(gateway());
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    // A final answer's usage is recorded by the answer's store (history.append-results), not a step of its own.
    expect(run.stepIds).not.toContain("usage.assistant");
    expect(run.stepIds).toContain("history.append-results");

    const rows = await ledger({ runId: run.runId });
    expect(rows).toEqual([
      expect.objectContaining({
        key: `${run.runId}:assistant`,
        user_id: event.data.userId,
        thread_id: event.data.messageId,
        message_id: event.data.messageId,
        variant: 1,
        step_id: "assistant",
        provider: "openai",
        model: "scripted-model",
        input_tokens: "1200",
        output_tokens: "300",
        cached_tokens: "200",
        reasoning_tokens: "50",
        latency_ms: null,
        failed: false,
      }),
    ]);
    expect(Number(rows[0]!.cost_usd)).toBeCloseTo(reportedCost, 9);

    // A replay of the whole run (every step memoized) records nothing more.
    const replay = await execute(chatTurn, event, { memo: run.memo, runId: run.runId });
    expect(replay.error).toBeUndefined();
    expect(await ledger({ runId: run.runId })).toHaveLength(1);

    // What an event about the turn carries (the feedback event): its summed usage and model.
    expect(await turnUsage(bed.db.pool, run.runId)).toEqual({
      calls: 1,
      inputTokens: 1_200,
      outputTokens: 300,
      cachedTokens: 200,
      reasoningTokens: 50,
      totalTokens: 1_500,
      costUsd: expect.closeTo(reportedCost, 9),
      model: "scripted-model",
    });
    expect(await turnUsage(bed.db.pool, `run-${randomUUID()}`)).toBeUndefined();
  });

  it("INFERENCE=gateway: an answer AgentKit rejects after it arrived was billed: counted once, however often the run is retried", async () => {
    // A tool call whose arguments are no JSON: AgentKit's parser throws after the inference step succeeded.
    const rejected = {
      id: "chatcmpl-rejected",
      object: "chat.completion",
      model: "scripted-model",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "current_time", arguments: "{not json" } },
            ],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: reported,
    };
    bed.model.script({ status: 200, body: rejected });
    const event = chatEvent({ content: "Break the parser.", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(gateway());
    const failed = await execute(chatTurn, event);
    expect(JSON.stringify(failed.error)).toMatch(/Failed to parse JSON/);
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId, attempt: 1 });
    expect(retried.error).toBeDefined();
    // The model was called once (the inference is memoized) and its usage is one row.
    expect(bed.model.requests.filter((r) => r.messages.at(-1)?.content === "Break the parser.")).toHaveLength(1);
    expect(await ledger({ runId: failed.runId })).toEqual([
      expect.objectContaining({ key: `${failed.runId}:assistant`, input_tokens: "1200", output_tokens: "300" }),
    ]);
  });

  it("INFERENCE=gateway: an answer that asks for tools records its usage in its own step; the final one's rides on the answer's store", async () => {
    bed.model.script(
      { toolCalls: [{ name: "current_time", id: "call_time_1" }], usage: reported },
      { text: "It is noon.", usage: reported },
    );
    const event = chatEvent({ content: "What time is it?", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(gateway());
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    expect(run.stepIds.filter((id) => id.startsWith("usage."))).toEqual(["usage.assistant"]);
    const keys = [`${run.runId}:assistant`, `${run.runId}:assistant:1`];
    expect((await ledger({ runId: run.runId })).map((row) => row.key).sort()).toEqual(keys);
    const replay = await execute(chatTurn, event, { memo: run.memo, runId: run.runId });
    expect(replay.error).toBeUndefined();
    expect(await ledger({ runId: run.runId })).toHaveLength(2);
  });

  it("INFERENCE=gateway: a final answer AgentKit rejects records its usage in its own step before the run fails, once", async () => {
    // Content that is no string: AgentKit's parser throws on it, after the inference succeeded.
    const rejected = {
      id: "chatcmpl-rejected",
      object: "chat.completion",
      model: "scripted-model",
      choices: [{ index: 0, message: { role: "assistant", content: 42 }, finish_reason: "stop" }],
      usage: reported,
    };
    bed.model.script({ status: 200, body: rejected });
    const event = chatEvent({ content: "Answer in numbers.", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(gateway());
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(failed.stepIds).toContain("usage.assistant");
    expect(failed.stepIds).not.toContain("history.append-results");
    const retried = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId, attempt: 1 });
    expect(retried.error).toBeDefined();
    expect(await ledger({ runId: failed.runId })).toEqual([
      expect.objectContaining({ key: `${failed.runId}:assistant`, input_tokens: "1200", failed: false }),
    ]);
  });

  it("INFERENCE=gateway: a turn stopped while the model answered stores no answer, and records the answer's usage", async () => {
    const chatTurn = createChatTurn(gateway());
    bed.model.script({ text: "Too late.", usage: reported });
    const stopped = chatEvent({ content: "Stop me.", userId: `u-${randomUUID()}` });
    const run = await execute(chatTurn, stopped, {
      beforeStep: async (id) => {
        if (id === "history.append-results")
          await bed.db.pool.query("UPDATE turns SET status = 'stopped' WHERE message_id = $1", [
            stopped.data.messageId,
          ]);
      },
    });
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "stopped" });
    expect(run.stepIds).not.toContain("usage.assistant");
    expect(await ledger({ runId: run.runId })).toEqual([
      expect.objectContaining({ key: `${run.runId}:assistant`, variant: 1, input_tokens: "1200" }),
    ]);
  });

  it("INFERENCE=gateway: a run in flight across the deploy that recorded its usage step gets no second row", async () => {
    bed.model.script({ text: "Once.", usage: reported });
    const event = chatEvent({ content: "Count me once.", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(gateway());
    // The run stops before its answer's store, as an old run that has just recorded usage.assistant.
    const stoppedEarly = await execute(chatTurn, event, {
      beforeStep: async (id) => {
        if (id === "history.append-results") throw new StepFault("deploy");
      },
    });
    expect(await ledger({ runId: stoppedEarly.runId })).toEqual([]);
    const runId = stoppedEarly.runId;
    const oldRow = await bed.db.pool.query<{ key: string }>(
      `INSERT INTO usage_records (key, user_id, thread_id, message_id, run_id, step_id, attempt, provider, model,
         input_tokens, output_tokens, latency_ms, failed)
       VALUES ($1, $2, $3, $3, $4, 'assistant', 0, 'openai', 'scripted-model', 1200, 300, 7, false) RETURNING key`,
      [`${runId}:assistant`, event.data.userId, event.data.messageId, runId],
    );
    const usageStep = { id: "usage.assistant", handler: () => undefined };
    const resumed = await execute(chatTurn, event, { memo: [...stoppedEarly.memo, usageStep], runId });
    expect(resumed.error).toBeUndefined();
    expect(resumed.result).toMatchObject({ status: "completed" });
    expect(await ledger({ runId })).toEqual([
      expect.objectContaining({ key: oldRow.rows[0]!.key, latency_ms: 7, input_tokens: "1200" }),
    ]);
  });

  it("INFERENCE=stream: the stream's final usage is stored with the attempt, and the model was asked for it", async () => {
    bed.model.script({
      text: "Streamed and counted.",
      usage: reported,
      stream: { chunks: ["Streamed", " and counted."] },
    });
    const event = chatEvent({ content: "Stream me.", userId: `u-${randomUUID()}` });
    const run = await execute(createChatTurn(streaming()), event);
    expect(run.error).toBeUndefined();
    expect(bed.model.requests.at(-1)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    // Recorded inside the inference step: no step of its own.
    expect(run.stepIds.filter((id) => id.startsWith("usage."))).toEqual([]);

    const rows = await ledger({ runId: run.runId });
    expect(rows).toEqual([
      expect.objectContaining({
        key: `${run.runId}:assistant:0`,
        attempt: 0,
        variant: 1,
        input_tokens: "1200",
        output_tokens: "300",
        cached_tokens: "200",
        reasoning_tokens: "50",
        failed: false,
      }),
    ]);
    expect(rows[0]!.latency_ms).toBeGreaterThanOrEqual(0);
    expect(Number(rows[0]!.cost_usd)).toBeCloseTo(reportedCost, 9);
  });

  it("a streamed attempt that reported usage and then failed is billed: counted once, beside its retry's", async () => {
    bed.model.script(
      { text: "Billed, then lost.", usage: reported, stream: { dieAfterUsage: true } },
      { text: "The retry's answer." },
    );
    const event = chatEvent({ content: "Fail after usage.", userId: `u-${randomUUID()}` });
    const chatTurn = createChatTurn(streaming());
    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(await ledger({ runId: failed.runId })).toEqual([
      expect.objectContaining({ key: `${failed.runId}:assistant:0`, attempt: 0, failed: true, input_tokens: "1200" }),
    ]);

    const retry = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId, attempt: 1 });
    expect(retry.error).toBeUndefined();
    expect(retry.result).toMatchObject({ status: "completed", answer: "The retry's answer." });
    // A replay of the finished run adds nothing: two attempts billed, two rows.
    await execute(chatTurn, event, { memo: retry.memo, runId: failed.runId, attempt: 1 });
    const rows = await ledger({ runId: failed.runId });
    expect(rows.map((r) => [r.attempt, r.failed, r.input_tokens])).toEqual([
      [0, true, "1200"],
      [1, false, "100"],
    ]);
    expect(await turnUsage(bed.db.pool, failed.runId)).toMatchObject({ calls: 2, inputTokens: 1_300 });
  });

  it("a regenerate's usage is its own variant's; the messages API shows each answer's turn usage", async () => {
    const userId = `u-${randomUUID()}`;
    bed.model.script({ text: "First answer." }, { text: "Second answer.", usage: reported });
    const event = chatEvent({ content: "Answer twice.", userId });
    const threadId = event.data.messageId;
    expect((await execute(createChatTurn(gateway()), event)).error).toBeUndefined();
    const again = await execute(createRegenerate(gateway()), {
      name: "chat/message.regenerate",
      data: { threadId, messageId: event.data.messageId, userId },
    });
    expect(again.error).toBeUndefined();
    const rows = await ledger({ userId });
    expect(rows.map((r) => [r.variant, r.input_tokens])).toEqual([
      [1, "100"],
      [2, "1200"],
    ]);

    const { app } = createTestApp(bed.db.pool);
    const page = (await (await asUser(app, userId).get(`/api/threads/${threadId}/messages`)).json()) as {
      messages: { role: string; variant?: number; turnUsage?: Record<string, unknown> | null }[];
    };
    const answer = page.messages.find((m) => m.role === "assistant")!;
    // The current answer is the regenerated one.
    expect(answer).toMatchObject({
      variant: 2,
      turnUsage: { inputTokens: 1_200, outputTokens: 300, totalTokens: 1_500, model: "scripted-model" },
    });
    expect(answer.turnUsage!.costUsd).toBeCloseTo(reportedCost, 9);
    expect(page.messages.find((m) => m.role === "user")).not.toHaveProperty("turnUsage");
  });
});

describe("GET /api/usage", () => {
  it("sums equal the ledger's rows, by day, thread and model, and only the caller's", async () => {
    const userId = `u-${randomUUID()}`;
    const chatTurn = createChatTurn(gateway());
    bed.model.script({ text: "a" }, { text: "b", usage: reported }, { text: "c" });
    const first = chatEvent({ content: "one", userId });
    for (const event of [first, chatEvent({ content: "two", userId }), chatEvent({ content: "three", userId })])
      expect((await execute(chatTurn, event)).error).toBeUndefined();
    // Another user's usage is not the caller's.
    bed.model.script({ text: "d" });
    expect(
      (await execute(chatTurn, chatEvent({ content: "other", userId: `u-${randomUUID()}` }))).error,
    ).toBeUndefined();

    const rows = await ledger({ userId });
    expect(rows).toHaveLength(3);
    const expected = {
      calls: rows.length,
      inputTokens: rows.reduce((s, r) => s + Number(r.input_tokens), 0),
      outputTokens: rows.reduce((s, r) => s + Number(r.output_tokens), 0),
      cachedTokens: rows.reduce((s, r) => s + Number(r.cached_tokens ?? 0), 0),
      reasoningTokens: rows.reduce((s, r) => s + Number(r.reasoning_tokens ?? 0), 0),
    };
    const cost = rows.reduce((s, r) => s + Number(r.cost_usd), 0);
    const api = asUser(createTestApp(bed.db.pool).app, userId);
    for (const groupBy of ["day", "thread", "model"]) {
      const response = await api.get(`/api/usage?groupBy=${groupBy}`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as {
        groups: ({ key: string } & typeof expected & { costUsd: number })[];
        total: typeof expected & { costUsd: number; totalTokens: number };
      };
      expect(body.total).toMatchObject({ ...expected, totalTokens: expected.inputTokens + expected.outputTokens });
      expect(body.total.costUsd).toBeCloseTo(cost, 9);
      expect(body.groups.reduce((s, g) => s + g.inputTokens, 0)).toBe(expected.inputTokens);
      if (groupBy === "thread")
        expect(body.groups.map((g) => g.key).sort()).toEqual(rows.map((r) => r.thread_id).sort());
      if (groupBy === "model")
        expect(body.groups).toEqual([expect.objectContaining({ key: "scripted-model", provider: "openai" })]);
      if (groupBy === "day") expect(body.groups).toHaveLength(1);
    }
    // A range that holds none of it.
    const empty = (await (await api.get("/api/usage?from=2000-01-01T00:00:00Z&to=2000-02-01T00:00:00Z")).json()) as {
      groups: unknown[];
      total: { calls: number; costUsd: number | null };
    };
    expect(empty).toMatchObject({ groups: [], total: { calls: 0, costUsd: null } });
    expect((await api.get("/api/usage?groupBy=week")).status).toBe(400);
    expect((await api.get("/api/usage?from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z")).status).toBe(400);
  });
});

describe("budgets", () => {
  it("a user at their budget: 429 before sending (reset time and usage), no event, no row; a user under it sends", async () => {
    const userId = `u-${randomUUID()}`;
    bed.model.script({ text: "Spent.", usage: reported });
    const event = chatEvent({ content: "Spend.", userId });
    const threadId = event.data.messageId;
    expect((await execute(createChatTurn(gateway()), event)).error).toBeUndefined();
    await setUserBudget(bed.db.pool, userId, { dailyTokens: 1_500 });

    const { app, sent } = createTestApp(bed.db.pool);
    const api = asUser(app, userId);
    const before = await countRows(bed.db.pool);
    const refused = await api.post("/api/chat", { messageId: randomUUID(), threadId, content: "More." });
    expect(refused.status).toBe(429);
    const now = new Date();
    const midnight = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
    expect(await refused.json()).toMatchObject({
      code: "budget_exceeded",
      period: "day",
      resetAt: midnight.toISOString(),
      usage: { tokens: 1_500 },
      limit: { tokens: 1_500 },
    });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const regenerate = await api.post(`/api/threads/${threadId}/messages/${event.data.messageId}/regenerate`, {});
    expect(regenerate.status).toBe(429);
    const ui = await api.post("/api/ui/chat", {
      id: threadId,
      messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text: "More." }] }],
      trigger: "submit-message",
    });
    expect(ui.status).toBe(429);
    expect(sent).toEqual([]);
    expect(await countRows(bed.db.pool)).toEqual(before);

    // Raised by the operator: the same send goes through.
    await setUserBudget(bed.db.pool, userId, { dailyTokens: 10_000, monthlyCostUsd: 1 });
    expect((await api.post("/api/chat", { messageId: randomUUID(), threadId, content: "More." })).status).toBe(202);
    expect(sent).toHaveLength(1);
  });

  it("a turn that crosses the limit mid-way finishes (both agents of the pair network answer); the next send is refused", async () => {
    const userId = `u-${randomUUID()}`;
    await setUserBudget(bed.db.pool, userId, { dailyTokens: 100 });
    const { app, sent } = createTestApp(bed.db.pool);
    const api = asUser(app, userId);
    expect((await api.post("/api/chat", { messageId: randomUUID(), content: "Two answers, please." })).status).toBe(
      202,
    );
    // The assistant's call alone (120 tokens) crosses the limit; the reviewer still answers.
    bed.model.script({ text: "The answer." }, { text: "Reviewed." });
    const pair = createChatTurn({ ...gateway(), agents: { network: "pair", memory: NO_MEMORY } });
    const run = await execute(pair, sent[0]!);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed" });
    expect((await ledger({ runId: run.runId })).map((r) => r.step_id)).toEqual(["assistant", "reviewer"]);

    const refused = await api.post("/api/chat", { messageId: randomUUID(), content: "More." });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ usage: { tokens: 240 }, limit: { tokens: 100 } });
    expect(sent).toHaveLength(1);
  });

  it("configured defaults apply to a user without a budget of their own; a user's own budget replaces them", async () => {
    const userId = `u-${randomUUID()}`;
    bed.model.script({ text: "Spent.", usage: reported });
    expect((await execute(createChatTurn(gateway()), chatEvent({ content: "Spend.", userId }))).error).toBeUndefined();
    const db = bed.db.pool;
    const refusal = await budgetRefusal(db, userId, { monthlyCostUsd: reportedCost }, new Date());
    expect(refusal).toMatchObject({ period: "month", limit: { costUsd: reportedCost } });
    expect(refusal!.usage.costUsd).toBeCloseTo(reportedCost, 9);
    expect(await budgetRefusal(db, userId, { monthlyCostUsd: 1 }, new Date())).toBeUndefined();
    await setUserBudget(bed.db.pool, userId, { dailyTokens: 100_000 });
    expect(await budgetRefusal(db, userId, { monthlyCostUsd: reportedCost }, new Date())).toBeUndefined();
    await setUserBudget(bed.db.pool, userId, undefined);
    expect(await budgetRefusal(db, userId, { monthlyCostUsd: reportedCost }, new Date())).toBeDefined();
  });

  it("npm run budget sets, shows and clears a user's own budget; a mistaken command line is refused with what to fix", async () => {
    const userId = `u-${randomUUID()}`;
    bed.model.script({ text: "Spent.", usage: reported });
    expect((await execute(createChatTurn(gateway()), chatEvent({ content: "Spend.", userId }))).error).toBeUndefined();
    const defaults = { monthlyTokens: 1_000_000 };

    expect(await budgetCommand(["show", "--user", userId], bed.db.pool, defaults)).toMatch(
      /the configured defaults \(BUDGET_\*\)\n {2}this month: used 1500 tokens, \$0\.0023; limit 1000000 tokens; resets \S+\n {2}this day: used 1500 tokens, \$0\.0023; limit no limit;/,
    );
    const set = await budgetCommand(
      ["set", "--user", userId, "--daily-tokens", "1500", "--monthly-cost", "2.5"],
      bed.db.pool,
      defaults,
    );
    expect(set).toMatch(/their own budget\n {2}this month: .*limit \$2\.5;.*\n {2}this day: .*limit 1500 tokens;/);
    const api = asUser(createTestApp(bed.db.pool).app, userId);
    expect((await api.post("/api/chat", { messageId: randomUUID(), content: "More." })).status).toBe(429);

    expect(await budgetCommand(["clear", "--user", userId], bed.db.pool, defaults)).toMatch(/the configured defaults/);
    expect((await api.post("/api/chat", { messageId: randomUUID(), content: "More." })).status).toBe(202);

    await expect(budgetCommand(["set", "--user", userId], bed.db.pool, defaults)).rejects.toThrow(/at least one of/);
    await expect(
      budgetCommand(["set", "--user", userId, "--daily-tokens", "lots"], bed.db.pool, defaults),
    ).rejects.toThrow(/--daily-tokens must be a whole number/);
    await expect(budgetCommand(["show"], bed.db.pool, defaults)).rejects.toThrow(/needs --user/);
    await expect(budgetCommand(["raise", "--user", userId], bed.db.pool, defaults)).rejects.toThrow(/unknown command/);
  });
});

describe("reported usage and prices", () => {
  it("reads each provider's usage: OpenAI's details, Anthropic's cache fields (input includes them), Gemini's thoughts", () => {
    expect(reportedUsage("openai-chat", { usage: reported })).toEqual({
      inputTokens: 1_200,
      outputTokens: 300,
      cachedTokens: 200,
      reasoningTokens: 50,
    });
    expect(
      reportedUsage("anthropic", {
        usage: { input_tokens: 10, output_tokens: 40, cache_creation_input_tokens: 5, cache_read_input_tokens: 100 },
      }),
    ).toEqual({ inputTokens: 115, outputTokens: 40, cachedTokens: 100, reasoningTokens: null });
    expect(
      reportedUsage("gemini", {
        usageMetadata: { promptTokenCount: 70, candidatesTokenCount: 30, thoughtsTokenCount: 12 },
      }),
    ).toEqual({ inputTokens: 70, outputTokens: 42, cachedTokens: null, reasoningTokens: 12 });
    expect(reportedUsage("openai-chat", { choices: [] })).toBeUndefined();
    expect(reportedUsage("gemini", {})).toBeUndefined();
  });

  it("tells an answer that asks for tools (its usage gets its own step) from a final one, in each provider's format", () => {
    const openAi = (message: Record<string, unknown>) => ({ choices: [{ index: 0, message }] });
    expect(asksForTools("openai-chat", openAi({ content: null, tool_calls: [{ id: "call_1" }] }))).toBe(true);
    expect(asksForTools("openai-chat", openAi({ content: "Done.", tool_calls: [] }))).toBe(false);
    expect(asksForTools("openai-chat", openAi({ content: "Done." }))).toBe(false);
    expect(asksForTools("anthropic", { content: [{ type: "text" }, { type: "tool_use", id: "t1" }] })).toBe(true);
    expect(asksForTools("anthropic", { content: [{ type: "text", text: "Done." }] })).toBe(false);
    const gemini = (parts: unknown[]) => ({ candidates: [{ content: { parts } }] });
    expect(asksForTools("gemini", gemini([{ functionCall: { name: "current_time" } }]))).toBe(true);
    expect(asksForTools("gemini", gemini([{ text: "Done." }]))).toBe(false);
    // No answer to read: nothing asks for tools (AgentKit then has no tool to run either).
    expect(asksForTools("openai-chat", undefined)).toBe(false);
    expect(asksForTools("anthropic", { content: "text" })).toBe(false);
  });

  it("records no usage from a malformed report, and reads absent or null optional fields as none", () => {
    const openAi = (usage: unknown) => reportedUsage("openai-chat", { usage });
    expect(openAi({ prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: null })).toEqual({
      inputTokens: 5,
      outputTokens: 2,
      cachedTokens: null,
      reasoningTokens: null,
    });
    expect(
      openAi({ prompt_tokens: 5, completion_tokens: 2, completion_tokens_details: {} })?.reasoningTokens,
    ).toBeNull();
    for (const malformed of [
      { prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: { cached_tokens: null } },
      { prompt_tokens: 5, completion_tokens: 2, completion_tokens_details: [] },
      { prompt_tokens: 5.5, completion_tokens: 2 },
      { prompt_tokens: 2 ** 53, completion_tokens: 2 },
      { prompt_tokens: -1, completion_tokens: 2 },
      { prompt_tokens: "5", completion_tokens: 2 },
      [5, 2],
      null,
    ])
      expect(openAi(malformed)).toBeUndefined();
    expect(
      reportedUsage("anthropic", {
        usage: { input_tokens: 10, output_tokens: 4, cache_creation_input_tokens: null, cache_read_input_tokens: null },
      }),
    ).toEqual({ inputTokens: 10, outputTokens: 4, cachedTokens: null, reasoningTokens: null });
    expect(reportedUsage("anthropic", { usage: { input_tokens: 10, output_tokens: Number.NaN } })).toBeUndefined();
    expect(reportedUsage("gemini", { usageMetadata: {} })).toEqual({
      inputTokens: 0,
      outputTokens: 0,
      cachedTokens: null,
      reasoningTokens: null,
    });
    expect(reportedUsage("gemini", { usageMetadata: { promptTokenCount: null } })).toBeUndefined();
  });

  it("prices a dated model name by its family's entry, and none without one; MODEL_PRICES adds to the defaults", async () => {
    const usage = { inputTokens: 1_000_000, outputTokens: 1_000_000, cachedTokens: 0, reasoningTokens: null };
    expect(costOf(DEFAULT_PRICES, "gpt-4o-mini-2024-07-18", usage)).toBeCloseTo(0.75, 9);
    expect(costOf(DEFAULT_PRICES, "gpt-4o-2024-08-06", usage)).toBeCloseTo(12.5, 9);
    expect(costOf(DEFAULT_PRICES, "llama3.2", usage)).toBeNull();

    const inline = readEnvironment({ MODEL_PRICES: '{"llama3.2": {"input": 0, "output": 0.1}}' }).MODEL_PRICES;
    expect(inline).toMatchObject({
      "llama3.2": { input: 0, output: 0.1 },
      "gpt-4o-mini": DEFAULT_PRICES["gpt-4o-mini"],
    });
    const file = path.join(await mkdtemp(path.join(tmpdir(), "threadline-prices-")), "prices.json");
    await writeFile(file, '{"gpt-4o-mini": {"input": 1, "output": 2}}');
    expect(readEnvironment({ MODEL_PRICES: file }).MODEL_PRICES["gpt-4o-mini"]).toEqual({ input: 1, output: 2 });
    expect(() => readEnvironment({ MODEL_PRICES: '{"m": {"input": -1, "output": 1}}' })).toThrow(
      /MODEL_PRICES must map/,
    );
    expect(() => readEnvironment({ MODEL_PRICES: "/nowhere/prices.json" })).toThrow(
      /MODEL_PRICES must be a JSON object/,
    );
    expect(() => readEnvironment({ BUDGET_DAILY_TOKENS: "lots" })).toThrow(/BUDGET_DAILY_TOKENS/);
  });
});
