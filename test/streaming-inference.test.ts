import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { chooseModel } from "../src/agents/model.js";
import { readCompletion, streamingRefusal } from "../src/agents/streamed-completion.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { describeFailure } from "../src/functions/failure-message.js";
import { createFunctions } from "../src/functions/index.js";
import { createRegenerate } from "../src/functions/regenerate.js";
import { readEventsAfter, type ThreadEvent } from "../src/history/events.js";
import { createThread } from "../src/history/threads.js";
import { DELTA_FLUSH_CHARS, deltaWriter } from "../src/stream/delta-writer.js";
import { streamedTexts } from "../src/stream/deltas.js";
import { createEventNotifier, type EventNotifier } from "../src/stream/notifier.js";
import { execute, executeFailureHandler, memoBefore } from "./helpers/engine.js";
import { chatEvent, scriptedModel, threadRows, turnsOf } from "./helpers/fixtures.js";
import { createTestApp } from "./helpers/http.js";
import { gate } from "./helpers/model-server.js";
import { openEventStream } from "./helpers/sse.js";
import { statementsPerStep, totalStatements } from "./helpers/step-statements.js";
import { useTestBed } from "./helpers/test-bed.js";

const bed = useTestBed();
const notifiers: EventNotifier[] = [];
afterAll(async () => {
  await Promise.all(notifiers.map((notifier) => notifier.close()));
});

const streaming = () => ({ db: bed.db.pool, model: scriptedModel(bed.model), inference: "stream" as const });

const logOf = (threadId: string): Promise<ThreadEvent[]> => readEventsAfter(bed.db.pool, threadId, 0, 1_000);

const deltaRows = async (threadId: string) =>
  (
    await bed.db.pool.query<{ key: string; attempt: number; delta: string }>(
      "SELECT key, attempt, data->>'delta' AS delta FROM thread_events WHERE thread_id = $1 AND event = 'text.delta' ORDER BY id",
      [threadId],
    )
  ).rows;

/** The stored answer's text of a turn (its last agent message). */
const storedAnswer = async (threadId: string) => {
  const agent = (await threadRows(bed.db.pool, threadId)).filter((row) => row.kind === "agent").at(-1);
  return (agent?.content as { output: { type: string; content?: string }[] } | undefined)?.output.find(
    (m) => m.type === "text",
  )?.content;
};

/** Waits until `done()` holds, polling the database briefly, at most 5 seconds. */
async function until(done: () => Promise<boolean>) {
  const deadline = Date.now() + 5_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("condition not reached within 5 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("INFERENCE=stream: the answer streams into the thread's event log", () => {
  it("deltas reach the log and the SSE route while the model is still answering, before the answer is stored; the stored answer is their text", async () => {
    const events = createEventNotifier(bed.db.pool);
    notifiers.push(events);
    const { app } = createTestApp(bed.db.pool, { events });
    const held = gate();
    bed.model.script({
      text: "Hello, streaming world.",
      stream: { chunks: ["Hello", ", streaming", " world."], holdAfter: { chunks: 2, gate: held } },
    });
    const event = chatEvent({ content: "Say hello." });
    const threadId = event.data.messageId;

    const running = execute(createChatTurn(streaming()), event);
    await held.reached;
    // The model is held after two chunks: their text is logged as it arrived.
    await until(async () => streamedTexts(await logOf(threadId))[0]?.text === "Hello, streaming");
    expect(await storedAnswer(threadId)).toBeUndefined();
    expect((await logOf(threadId)).map((e) => e.event)).not.toContain("stream.ended");
    const client = await openEventStream(app, threadId);
    await client.waitFor((await logOf(threadId)).length);
    // What the client received are the log's rows.
    expect(streamedTexts(client.received as ThreadEvent[]).map((s) => s.text)).toEqual(["Hello, streaming"]);

    held.release();
    const run = await running;
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "Hello, streaming world." });
    // This process called the model, streaming (not the test engine's stand-in for the Inngest server).
    expect(bed.model.requests.map((r) => r.stream)).toEqual([true]);

    const log = await logOf(threadId);
    expect(streamedTexts(log, run.runId)).toEqual([
      { runId: run.runId, stepId: "assistant", attempt: 0, text: "Hello, streaming world." },
    ]);
    expect(await storedAnswer(threadId)).toBe("Hello, streaming world.");
    // Every delta comes before the ending, which the statement storing the answer wrote.
    expect(log.at(-1)).toMatchObject({ event: "stream.ended", data: { status: "completed", runId: run.runId } });
    await until(async () => client.received.length === log.length);
    expect(client.received.map((e) => e.id)).toEqual(log.map((e) => e.id));
    await client.close();
  });

  it("a step that dies mid-stream fails with a readable cause; its retry (attempt 1) supersedes the partial text, and the stored answer is the retry's", async () => {
    bed.model.script(
      { text: "A broken answer", stream: { chunks: ["A bro", "ken", " answer"], dieAfter: 2 } },
      { text: "A whole answer.", stream: { chunks: ["A whole", " answer."] } },
    );
    const chatTurn = createChatTurn(streaming());
    const event = chatEvent({ content: "Answer me." });
    const threadId = event.data.messageId;

    const failed = await execute(chatTurn, event);
    expect(failed.error).toBeDefined();
    expect(describeFailure(failed.error as Error)).toMatch(
      /^The model's streamed answer broke off after 8 characters: terminated/,
    );
    // What arrived before the connection died is in the log, as attempt 0 of the step.
    expect(streamedTexts(await logOf(threadId))).toEqual([
      { runId: failed.runId, stepId: "assistant", attempt: 0, text: "A broken" },
    ]);

    const retry = await execute(chatTurn, event, { memo: failed.memo, runId: failed.runId, attempt: 1 });
    expect(retry.error).toBeUndefined();
    expect(retry.result).toMatchObject({ status: "completed", answer: "A whole answer." });
    expect(streamedTexts(await logOf(threadId), failed.runId)).toEqual([
      { runId: failed.runId, stepId: "assistant", attempt: 1, text: "A whole answer." },
    ]);
    expect(await storedAnswer(threadId)).toBe("A whole answer.");
    // Both attempts' rows stay in the log (keys restart per attempt); the reader's rule drops attempt 0's.
    const rows = await deltaRows(threadId);
    expect(
      rows
        .filter((r) => r.attempt === 0)
        .map((r) => r.delta)
        .join(""),
    ).toBe("A broken");
    expect(
      rows
        .filter((r) => r.attempt === 1)
        .map((r) => r.delta)
        .join(""),
    ).toBe("A whole answer.");
    expect(rows.filter((r) => r.attempt === 1)[0]!.key).toBe("assistant:delta:0");
  });

  it("a re-entered function or a step run again under the same attempt writes no delta twice", async () => {
    const text = "x".repeat(DELTA_FLUSH_CHARS) + "y".repeat(DELTA_FLUSH_CHARS);
    const chunks = ["x".repeat(DELTA_FLUSH_CHARS), "y".repeat(DELTA_FLUSH_CHARS)];
    bed.model.script({ text, stream: { chunks } }, { text, stream: { chunks } });
    const chatTurn = createChatTurn(streaming());
    const event = chatEvent({ content: "Two thousand characters, please." });
    const threadId = event.data.messageId;

    // The test engine re-enters the function for every step after the inference: it is not run again.
    const run = await execute(chatTurn, event);
    expect(run.error).toBeUndefined();
    const written = await deltaRows(threadId);
    expect(written.map((r) => r.key)).toEqual(["assistant:delta:0", "assistant:delta:1"]);
    expect(bed.model.requests).toHaveLength(1);

    // Killed after the inference did its work, before Inngest stored it: the step runs again, same attempt.
    const again = await execute(chatTurn, event, { memo: memoBefore(run, "assistant"), runId: run.runId });
    expect(again.result).toMatchObject({ status: "completed", answer: text });
    expect(bed.model.requests).toHaveLength(2);
    expect(await deltaRows(threadId)).toEqual(written);
    expect(streamedTexts(await logOf(threadId), run.runId).map((s) => s.text)).toEqual([text]);
  });

  it("text that cannot be logged stops the model at once and fails the step with the database's reason", async () => {
    // The log refuses one batch, as a database that fails mid-answer would.
    await bed.db.pool.query(`
      CREATE FUNCTION refuse_poisoned_delta() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.data->>'delta' LIKE '%POISON%' THEN RAISE EXCEPTION 'the log refused this batch'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_poisoned_delta BEFORE INSERT ON thread_events FOR EACH ROW EXECUTE FUNCTION refuse_poisoned_delta()`);
    try {
      // Held for good after the refused text: only stopping the call ends this step.
      const held = gate();
      bed.model.script({
        text: "Fine, POISON, never sent",
        stream: { chunks: ["Fine, ", "POISON", ", never sent"], holdAfter: { chunks: 2, gate: held } },
      });
      const event = chatEvent({ content: "Go." });
      const failed = await execute(createChatTurn(streaming()), event);
      expect(describeFailure(failed.error as Error)).toMatch(
        /^The answer's text could not be written to the thread's event log while it streamed: the log refused this batch/,
      );
      expect(await storedAnswer(event.data.messageId)).toBeUndefined();
    } finally {
      await bed.db.pool.query(
        "DROP TRIGGER refuse_poisoned_delta ON thread_events; DROP FUNCTION refuse_poisoned_delta()",
      );
    }
  });

  it("tool calls are assembled from the stream: the tool runs, the second inference streams under its own step id", async () => {
    bed.model.script(
      { toolCalls: [{ name: "current_time", id: "call_time_1" }] },
      { text: "It is noon.", stream: { chunks: ["It is", " noon."] } },
    );
    const event = chatEvent({ content: "What time is it?" });
    const threadId = event.data.messageId;

    const run = await execute(createChatTurn(streaming()), event);
    expect(run.error).toBeUndefined();
    expect(run.result).toMatchObject({ status: "completed", answer: "It is noon." });
    const secondCall = bed.model.requests[1]!.messages;
    expect(secondCall.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(secondCall[2]!.tool_calls).toEqual([
      { id: "call_time_1", type: "function", function: { name: "current_time", arguments: "{}" } },
    ]);
    expect(JSON.parse(String(secondCall[3]!.content))).toMatchObject({ data: { now: expect.any(String) } });
    expect((await threadRows(bed.db.pool, threadId)).map((r) => r.kind)).toEqual(["user", "agent", "agent"]);
    // The tool call streamed no text; the answer did, under the turn's second inference step.
    expect(streamedTexts(await logOf(threadId), run.runId)).toEqual([
      { runId: run.runId, stepId: "assistant:1", attempt: 0, text: "It is noon." },
    ]);
  });

  it("a regenerate streams its answer too, under its own run", async () => {
    bed.model.script({ text: "First answer." }, { text: "Second answer.", stream: { chunks: ["Second", " answer."] } });
    const deps = streaming();
    const event = chatEvent({ content: "Answer twice." });
    const threadId = event.data.messageId;
    expect((await execute(createChatTurn(deps), event)).error).toBeUndefined();

    const run = await execute(createRegenerate(deps), {
      name: "chat/message.regenerate",
      data: { threadId, messageId: event.data.messageId, userId: "user-1" },
    });
    expect(run.result).toMatchObject({ status: "completed", answer: "Second answer." });
    expect(streamedTexts(await logOf(threadId), run.runId).map((s) => s.text)).toEqual(["Second answer."]);
  });

  it("a provider's non-2xx answer still fails the turn with the provider's reason", async () => {
    bed.model.script({
      status: 429,
      body: { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } },
    });
    const chatTurn = createChatTurn(streaming());
    const event = chatEvent({ content: "Are you there?" });
    const run = await execute(chatTurn, event);
    const { name, message } = run.error as Error;
    await executeFailureHandler(chatTurn, { runId: run.runId, event, error: { name, message } });
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]).toMatchObject({
      status: "failed",
      error: "The model provider answered HTTP 429: Rate limit reached for requests (requests, rate_limit_exceeded)",
    });
  });

  it("a model that cannot be reached fails the turn saying so, as through the gateway", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = chooseModel(
      readEnvironment({ OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1/`, OPENAI_API_KEY: "test-key" }),
    );
    const chatTurn = createChatTurn({ ...streaming(), model: unreachable });
    const event = chatEvent({ content: "Anyone?" });
    const run = await execute(chatTurn, event);
    const { name, message } = run.error as Error;
    await executeFailureHandler(chatTurn, { runId: run.runId, event, error: { name, message } });
    expect((await turnsOf(bed.db.pool, event.data.messageId))[0]!.error).toMatch(
      /^The model request got no answer from the provider \(could not connect: fetch failed \(ECONNREFUSED\)\)/,
    );
  });

  it("statements per turn: one per batch of deltas and the usage row on top of the history's 2 (a short answer: 4; two full batches: 5)", async () => {
    const counting = statementsPerStep(bed.db.pool);
    bed.model.script({ text: "Short." });
    const short = await counting.run(
      createChatTurn({ ...streaming(), db: counting.pool }),
      chatEvent({ content: "Hi" }),
    );
    expect(short.error).toBeUndefined();
    expect(Object.fromEntries(counting.perStep)).toEqual({
      "history.append-user-message": 1,
      // The deltas' batch and the usage ledger's row (issue 21), inside the inference step.
      assistant: 2,
      "history.append-results": 1,
    });
    expect(totalStatements(counting.perStep)).toBe(4);

    const chunks = ["a".repeat(DELTA_FLUSH_CHARS), "b".repeat(DELTA_FLUSH_CHARS)];
    bed.model.script({ text: chunks.join(""), stream: { chunks } });
    const long = await counting.run(
      createChatTurn({ ...streaming(), db: counting.pool }),
      chatEvent({ content: "Hi again" }),
    );
    expect(long.error).toBeUndefined();
    expect(counting.perStep.get("assistant")).toBe(3);
    expect(totalStatements(counting.perStep)).toBe(5);
  });

  it("the first piece of an inference is written at once, the pieces after it in a batch", async () => {
    const threadId = randomUUID();
    await createThread(bed.db.pool, { threadId, userId: "user-1", title: null, metadata: {} });
    const failures: unknown[] = [];
    const writer = deltaWriter(bed.db.pool, { threadId, runId: "run-1", stepId: "assistant", attempt: 0 }, (error) =>
      failures.push(error),
    );
    writer.push("Once");
    writer.push(" upon");
    writer.push(" a time");
    await writer.finish();
    expect(failures).toEqual([]);
    expect(await deltaRows(threadId)).toEqual([
      { key: "assistant:delta:0", attempt: 0, delta: "Once" },
      { key: "assistant:delta:1", attempt: 0, delta: " upon a time" },
    ]);
  });
});

describe("INFERENCE=stream under Inngest's serve handler", () => {
  it("the handler runs the function's middleware: the inference streams in this process when the executor calls /api/inngest", async () => {
    const functions = createFunctions({ ...streaming() });
    const { app } = createTestApp(bed.db.pool, { functions, serving: { mode: "dev" } });
    bed.model.script({ text: "Served and streamed.", stream: { chunks: ["Served", " and streamed."] } });
    const event = { ...chatEvent({ content: "Through the handler, please." }), id: randomUUID(), ts: Date.now() };
    const threadId = event.data.messageId;
    const runId = randomUUID();
    const steps: Record<string, unknown> = {};
    const ops: string[] = [];
    // As the executor does: each answer's completed steps come back as memoized state, until the run returns.
    for (let request = 0; request < 20; request++) {
      const body = JSON.stringify({
        event,
        events: [event],
        steps,
        ctx: { run_id: runId, attempt: 0, stack: { stack: Object.keys(steps), current: Object.keys(steps).length } },
        version: 2,
      });
      const response = await app.request("/api/inngest?fnId=threadline-chat-turn&stepId=step", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      if (response.status === 200) break;
      expect(response.status).toBe(206);
      for (const op of (await response.json()) as { id: string; op: string; displayName?: string; data?: unknown }[]) {
        ops.push(`${op.op} ${op.displayName}`);
        steps[op.id] = { type: "data", data: op.data ?? null };
      }
    }
    // The inference was a step this process ran, not an AI gateway request for the server.
    expect(ops).toContain("StepRun assistant");
    expect(ops.some((op) => op.startsWith("AIGateway"))).toBe(false);
    expect(bed.model.requests.map((r) => r.stream)).toEqual([true]);
    expect(streamedTexts(await logOf(threadId), runId)).toEqual([
      { runId, stepId: "assistant", attempt: 0, text: "Served and streamed." },
    ]);
    expect(await storedAnswer(threadId)).toBe("Served and streamed.");
  });
});

describe("providers", () => {
  it("Anthropic's message stream is assembled into the message its non-streaming API answers", async () => {
    const sse = [
      [
        "message_start",
        {
          type: "message_start",
          message: {
            id: "msg_1",
            type: "message",
            role: "assistant",
            model: "claude",
            content: [],
            stop_reason: null,
            usage: { input_tokens: 5, output_tokens: 1 },
          },
        },
      ],
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
      ["ping", { type: "ping" }],
      [
        "content_block_delta",
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Let me " } },
      ],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "check." } }],
      ["content_block_stop", { type: "content_block_stop", index: 0 }],
      [
        "content_block_start",
        {
          type: "content_block_start",
          index: 1,
          content_block: { type: "tool_use", id: "toolu_1", name: "current_time", input: {} },
        },
      ],
      [
        "content_block_delta",
        { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"zone":' } },
      ],
      [
        "content_block_delta",
        { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"UTC"}' } },
      ],
      ["content_block_stop", { type: "content_block_stop", index: 1 }],
      [
        "message_delta",
        {
          type: "message_delta",
          delta: { stop_reason: "tool_use", stop_sequence: null },
          usage: { output_tokens: 12 },
        },
      ],
      ["message_stop", { type: "message_stop" }],
    ]
      .map(([event, data]) => `event: ${event as string}\r\ndata: ${JSON.stringify(data)}\r\n\r\n`)
      .join("");
    const texts: string[] = [];
    const message = await readCompletion("anthropic", new Response(sse).body!, (text) => texts.push(text));
    expect(texts).toEqual(["Let me ", "check."]);
    expect(message).toEqual({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_1", name: "current_time", input: { zone: "UTC" } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 12 },
    });
  });

  it("a stream that ends before the provider said it finished fails instead of passing a partial answer off as whole", async () => {
    const sse = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "Half" }, finish_reason: null }] })}\n\n`;
    await expect(readCompletion("openai-chat", new Response(sse).body!, () => {})).rejects.toThrow(
      "The model's streamed answer ended after 4 characters without finishing",
    );
  });

  it("INFERENCE=stream is refused at start-up for Gemini, accepted for OpenAI-compatible servers and Anthropic", () => {
    const refusal = (env: Record<string, string>) => {
      const model = chooseModel(readEnvironment(env));
      return model.configured ? streamingRefusal(model) : "not configured";
    };
    expect(refusal({ GEMINI_API_KEY: "g-key" })).toMatch(
      /^INFERENCE=stream streams OpenAI-compatible and Anthropic models, not gemini/,
    );
    expect(refusal({ OPENAI_BASE_URL: "http://localhost:11434/v1/" })).toBeUndefined();
    expect(refusal({ ANTHROPIC_API_KEY: "a-key" })).toBeUndefined();
    expect(readEnvironment({}).INFERENCE).toBe("gateway");
    expect(readEnvironment({ INFERENCE: "" }).INFERENCE).toBe("gateway");
    expect(readEnvironment({ INFERENCE: "stream" }).INFERENCE).toBe("stream");
    expect(() => readEnvironment({ INFERENCE: "fast" })).toThrow(/INFERENCE must be "gateway"/);
  });
});
